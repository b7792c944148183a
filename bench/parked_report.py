"""The parked-approvals benchmark's report (bench/parked_approvals.py): rows and checks as
they happen, errors by kind, and the summary table at the end (with --json, also a file)."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Report:
    sessions: int
    concurrency: int
    rows: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, value: str) -> None:
        self.rows.append((name, value))
        print(f"  {name}: {value}", flush=True)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append((name, ok, detail))
        print(f"  check {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)


def secs(s: float, n: int) -> str:
    rate = f", {n / s:.1f}/s" if s > 0 else ""
    return f"{s:.2f} s{rate}"


def note_errors(report: Report, phase: str, errors: list[BaseException]) -> None:
    if not errors:
        return
    kinds: dict[str, int] = {}
    for err in errors:
        key = f"{type(err).__name__}: {err}"[:160]
        kinds[key] = kinds.get(key, 0) + 1
    for key, count in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
        report.errors.append(f"{phase}: {count}x {key}")
        print(f"  ERROR {phase}: {count}x {key}", flush=True)


def print_report(report: Report, args: argparse.Namespace) -> None:
    print()
    print(
        f"parked approvals: {report.sessions} sessions, concurrency {report.concurrency}, "
        f"{args.workers} worker process(es)"
        + (f" forking {args.forked} workers each, " if args.forked > 1 else ", ")
        + f"max_cached_workflows {args.max_cached or 'AGENT_MAX_CACHED_WORKFLOWS'} each, "
        f"AGENT_WORKFLOW_SANDBOX={os.environ.get('AGENT_WORKFLOW_SANDBOX', 'off')}"
    )
    width = max(len(name) for name, _ in report.rows)
    for name, value in report.rows:
        print(f"  {name:<{width}}  {value}")
    print("checks:")
    for name, ok, detail in report.checks:
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}: {detail}")
    if report.errors:
        print("errors:")
        for line in report.errors:
            print(f"  {line}")
    if args.json:
        payload = {
            "sessions": report.sessions,
            "concurrency": report.concurrency,
            "workers": args.workers,
            "forked": args.forked,
            "rows": dict(report.rows),
            "checks": {name: {"ok": ok, "detail": d} for name, ok, d in report.checks},
            "errors": report.errors,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
