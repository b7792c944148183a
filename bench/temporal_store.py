"""Where the Temporal dev server's SQLite store puts its bytes: each table with its indexes,
and the free pages, from SQLite's own page list (the dbstat table).

    .venv/bin/python bench/temporal_store.py STATE_DIR/temporal.db [--per N]

Reads a copy taken with SQLite's backup through a read-only connection, so the store
(running or stopped) is left as it is; --per N also divides every figure by N (e.g. the
sessions started).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TableBytes:
    table: str
    rows: int
    data: int  # the table's own pages
    indexes: int  # its indexes' pages


def _quoted(name: str) -> str:
    """An SQLite identifier, quoted: the names come from the file read."""
    return '"' + name.replace('"', '""') + '"'


def store_bytes(db: sqlite3.Connection) -> tuple[list[TableBytes], int, int]:
    """Each table's rows and pages (bytes), the free pages' bytes, and the page size."""
    owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_schema WHERE name IS NOT NULL"))
    tables = {n for (n,) in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    data: dict[str, int] = {}
    indexes: dict[str, int] = {}
    for name, size in db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        table = owner.get(name, name)
        into = data if name in tables else indexes
        into[table] = into.get(table, 0) + int(size)
    page = int(db.execute("PRAGMA page_size").fetchone()[0])
    free = int(db.execute("PRAGMA freelist_count").fetchone()[0]) * page
    out = [
        TableBytes(
            t,
            int(db.execute(f"SELECT count(*) FROM {_quoted(t)}").fetchone()[0]),
            data.get(t, 0),
            indexes.get(t, 0),
        )
        for t in sorted(tables)
    ]
    return out, free, page


def read_copy(path: Path) -> tuple[list[TableBytes], int, int]:
    """store_bytes of a page-for-page copy of `path` (SQLite's backup, through a read-only
    connection: a running server keeps writing, and nothing here checkpoints its WAL)."""
    with tempfile.TemporaryDirectory(prefix="temporal-store-") as tmp:
        src = sqlite3.connect(f"file:{path.absolute()}?mode=ro", uri=True)
        db = sqlite3.connect(Path(tmp) / "temporal.db")
        try:
            src.backup(db)
            return store_bytes(db)
        finally:
            db.close()
            src.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path, help="the dev server's SQLite file (temporal.db)")
    parser.add_argument("--per", type=int, default=1, help="divide the figures by N")
    args = parser.parse_args()
    if not args.db.is_file():
        parser.error(f"{args.db}: no such file")
    if args.per < 1:
        parser.error("--per must be at least 1")
    tables, free, page = read_copy(args.db)
    n = args.per
    total = sum(t.data + t.indexes for t in tables) + free
    print(f"page size {page} B; per {n}: table | rows | data B | index B | share")
    for t in sorted(tables, key=lambda t: -(t.data + t.indexes)):
        if t.data + t.indexes <= page * 2 and t.rows == 0:
            continue
        share = (t.data + t.indexes) / max(total, 1)
        print(
            f"  {t.table} | {t.rows / n:,.2f} | {t.data / n:,.0f} | {t.indexes / n:,.0f} | "
            f"{share:.1%}"
        )
    print(f"  (free pages) | | {free / n:,.0f} | | {free / max(total, 1):.1%}")
    print(f"  total | | {total / n:,.0f} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
