"""Compression of real text: this repository's own files, each read with the read_file tool
and stored as run_tool stores a result (ArtifactStore.put), on a throwaway PostgreSQL + S3.

Reports raw bytes (what the tool returned) against stored bytes (the objects' sizes in the
bucket), per file kind and in all, and the time put() took (indicative: shared machine).

    cd bench && ../.venv/bin/python compression.py
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
import warnings
from collections import defaultdict
from pathlib import Path

from throwaway_stack import bench_resources  # bench/ is on sys.path when run as a script

from durable_agents.activities.tools.base import ToolContext
from durable_agents.activities.tools.files import read_file

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench-compression"


def tracked_files() -> list[str]:
    """The repository's files as git knows them (no venv, no caches), text or not."""
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p and (ROOT / p).is_file())


def kind_of(path: str) -> str:
    suffix = Path(path).suffix
    return suffix if suffix in {".py", ".md", ".js", ".css", ".html", ".json", ".toml"} else "other"


async def main(args: argparse.Namespace) -> None:
    files = tracked_files()[: args.limit or None]
    ctx = ToolContext(idempotency_key="bench", workspace=ROOT, tenant_id=TENANT, session_id="-")
    raw: dict[str, int] = defaultdict(int)
    stored: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    compressed = 0
    put_s = 0.0
    async with bench_resources() as res:
        store, s3 = res.store, res.store.client
        for path in files:
            out = await read_file(ctx, {"path": path})
            began = time.perf_counter()
            ref = await store.put(TENANT, out.content, out.content_type)
            put_s += time.perf_counter() - began
            head = await s3.head_object(Bucket=store.bucket, Key=ref.key)
            kind = kind_of(path)
            raw[kind] += ref.size_bytes
            stored[kind] += int(head["ContentLength"])
            count[kind] += 1
            compressed += head.get("ContentEncoding") == "zstd"
    print(
        f"{len(files)} files of {ROOT.name} via read_file + ArtifactStore.put; "
        f"{compressed} stored compressed; put() {put_s * 1000 / len(files):.1f} ms/file"
    )
    print("| kind | files | raw bytes | stored bytes | stored / raw |")
    print("|---|---|---|---|---|")
    for kind in sorted(raw, key=lambda k: -raw[k]):
        print(
            f"| {kind} | {count[kind]} | {raw[kind]:,} | {stored[kind]:,} |"
            f" {stored[kind] / raw[kind]:.3f} |"
        )
    total_raw, total_stored = sum(raw.values()), sum(stored.values())
    print(
        f"| all | {len(files)} | {total_raw:,} | {total_stored:,} |"
        f" {total_stored / total_raw:.3f} |"
    )


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N files")
    asyncio.run(main(parser.parse_args()))
