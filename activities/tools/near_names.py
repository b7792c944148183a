"""The names in a workspace directory close to one a tool call asked for and did not find,
for its error to offer ("did you mean ...?"): a small model that misread a date in a file
name (2026-10-24 for 2026-11-24) read the same wrong path again until it gave up."""

from __future__ import annotations

import difflib
import itertools
import os

from durable_agents.activities.tools.workspace import RESERVED_DIR, WorkspacePath

# A directory is read this far for names (a bound on a huge one), and this many are offered.
MAX_SCANNED = 1000
MAX_OFFERED = 2
# How alike a name must be (difflib's ratio) to be offered.
CUTOFF = 0.75


def near_names(dir_fd: int, parent: WorkspacePath, name: str) -> list[WorkspacePath]:
    """Up to MAX_OFFERED paths in ``parent`` (open as ``dir_fd``) whose names are close to
    ``name``, closest first; never the reserved directory."""
    try:
        with os.scandir(dir_fd) as entries:
            names = [e.name for e in itertools.islice(entries, MAX_SCANNED)]
    except OSError:
        return []
    # Compared without case (README.md for readme.md); one name for each folded form.
    folded = {n.casefold(): n for n in names}
    if not parent.parts:
        folded.pop(RESERVED_DIR, None)
    close = difflib.get_close_matches(name.casefold(), folded, n=MAX_OFFERED, cutoff=CUTOFF)
    return [WorkspacePath((*parent.parts, folded[n])) for n in close]


def did_you_mean(dir_fd: int, parent: WorkspacePath, name: str) -> str:
    """ " (did you mean a or b?)" for the close names, or "" when there are none."""
    close = near_names(dir_fd, parent, name)
    return f" (did you mean {' or '.join(p.shown for p in close)}?)" if close else ""
