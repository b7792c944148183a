"""Whether a model-supplied path names something in a workspace: what an `exists:ARG`
approval policy asks before a call runs, and asks again when the call runs unasked.

The same rules as the file tools (fd_walk): the path is parsed lexically and walked one
component at a time below the root, never through a symlink. Nothing is created, not even
the root.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from durable_agents.activities.tools.base import ToolError
from durable_agents.activities.tools.fd_walk import held_dir
from durable_agents.activities.tools.workspace import parse_relative, shown

_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def appeared(shown: str) -> ToolError:
    """What a call let through unasked because the path `shown` (bounded, quoted) named
    nothing is told when it names something by the time the call runs: nothing was done,
    and calling again asks a person."""
    return ToolError(
        "FileExists",
        f"{shown} exists now, but did not when this call was let through without approval; "
        "nothing was done. To change a file that exists use edit_file, or call again to ask "
        "a person",
    )


def names_entry(workspace: Path, raw: object) -> bool:
    """True when `raw` names an existing entry (file, directory, symlink, anything) below
    `workspace`, or when that cannot be told (an I/O error): who asks this would rather
    ask a person than guess. A value no file tool accepts as a path (not a string, outside
    the workspace, through a symlink, inside the reserved directory) names nothing: the
    tool refuses such a call without touching the workspace."""
    if not isinstance(raw, str):
        return False
    try:
        path = parse_relative(raw)
    except ToolError:
        return False
    if not path.parts:
        return True  # the root itself
    try:
        root = os.open(workspace, _ROOT_FLAGS)
    except FileNotFoundError:
        return False  # a workspace no tool has used yet holds nothing
    except OSError:
        return True
    try:
        with held_dir(root, path.parent, suggest=False) as dir_fd:
            os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
    except ToolError:
        # A directory on the way is missing, is a file, or is a symlink the tools refuse.
        return False
    except OSError as exc:
        return exc.errno not in (errno.ENOENT, errno.ENOTDIR)
    finally:
        os.close(root)
    return True


def refuse_if_named(workspace: Path, args: dict[str, Any], new_args: frozenset[str]) -> None:
    """Raise `appeared` when an argument in `new_args` (see ToolContext.must_be_new) names
    something now. Any tool gets this look just before it runs; the file tools also create
    only, closing the window between this look and their write."""
    for name in sorted(new_args):
        value = args.get(name)
        if names_entry(workspace, value):
            raise appeared(shown(value) if isinstance(value, str) else f"argument {name!r}")
