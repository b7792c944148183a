"""Running a task's checks in its workspace: the reason the first failing one gives (and
whether it judged the workspace alone), or None when every one passed. The reasons are our
words with the check's own paths and texts (a declared check, not content), or a
callable's words, bounded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from durable_agents.activities.checks.spec import CallDone, Check, CheckContext
from durable_agents.activities.tools.fd_walk import open_root
from durable_agents.activities.tools.files import read_workspace_text
from durable_agents.activities.tools.tool_identity import RunAs

# A file a check reads is read up to this much (a report, a config: not a dataset).
CHECK_READ_BYTES = 1024 * 1024
MAX_REASON_CHARS = 400
# Whether the tools' user may read and enter the workspace it is put in.
_ENTERS = "test -r . && test -x ."


@dataclass(frozen=True)
class CheckFailure:
    reason: str
    # The failing check judged the workspace alone (files, texts, a command, or a callable
    # that never read the answer): another answer cannot pass it, only a changed workspace.
    workspace_only: bool
    answer_read: bool = False


async def first_failure(
    checks: Sequence[Check],
    workspace: Path,
    answer: str,
    run_as: RunAs | None,
    calls: Sequence[CallDone] = (),
) -> CheckFailure | None:
    for check in checks:
        found = await _failure(check, workspace, answer, run_as, calls)
        if found is not None:
            return CheckFailure(bounded(found.reason), found.workspace_only, found.answer_read)
    return None


def bounded(reason: str) -> str:
    words = " ".join("".join(c if c.isprintable() else " " for c in reason).split())
    if not words:
        return "the check failed"
    return words if len(words) <= MAX_REASON_CHARS else words[: MAX_REASON_CHARS - 3] + "..."


async def _failure(
    check: Check, workspace: Path, answer: str, run_as: RunAs | None, calls: Sequence[CallDone]
) -> CheckFailure | None:
    async def read(path: str) -> str | None:
        return await read_workspace_text(workspace, path, CHECK_READ_BYTES)

    reason = await _workspace_failure(check, workspace, run_as, read)
    if reason is not None:
        return CheckFailure(reason, workspace_only=True)
    if check.call is not None:
        ctx = CheckContext(answer=answer, read_text=read, workspace=workspace, calls=calls)
        said = await check.call(ctx)
        if said is not None:
            return CheckFailure(
                said, not (ctx.answer_read or ctx.calls_read), answer_read=ctx.answer_read
            )
    return None


async def _workspace_failure(
    check: Check,
    workspace: Path,
    run_as: RunAs | None,
    read: Callable[[str], Awaitable[str | None]],
) -> str | None:
    """What the check's files, texts and command find missing (the callable aside)."""
    for path in check.files:
        if await read(path) is None:
            return f"{path} does not exist (or is not a file in the workspace)"
    for path, texts in check.contains.items():
        text = await read(path)
        if text is None:
            return f"{path} does not exist (or is not a file in the workspace)"
        folded = text.casefold()
        missing = [t for t in texts if t.casefold() not in folded]
        if missing:
            return f"{path} does not contain {missing[0]!r}"
    if check.command:
        return await _command(check, workspace, run_as)
    return None


async def _command(check: Check, workspace: Path, run_as: RunAs | None) -> str | None:
    """The command in the workspace, as the tools' user (it runs what the model wrote),
    with the worker's PATH only."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
    os.close(await asyncio.to_thread(open_root, workspace))  # made on first use, as tools do
    program, args = check.command[0], list(check.command[1:])
    if run_as is not None:
        if await _run(run_as.argv("sh", ["-c", _ENTERS]), workspace, env, 10) != 0:
            return (
                f"the check's command cannot run in the workspace as {run_as.user!r} "
                "(AGENT_TOOL_USER): give that user the workspace, or check with a callable"
            )
        env = run_as.env(env)
        program, args = run_as.argv(program, args)
    try:
        code = await _run((program, args), workspace, env, check.command_seconds)
    except OSError as err:
        return f"the check's command {check.command[0]!r} cannot run ({type(err).__name__})"
    if code is None:
        return f"the check's command ran past {check.command_seconds:g}s"
    if code != 0:
        return f"the check's command exited {code}"
    return None


async def _run(
    argv: tuple[str, list[str]], cwd: Path, env: dict[str, str], seconds: float
) -> int | None:
    """Its exit code, or None when it ran past `seconds` (then it and its children are
    killed). The cwd is entered before the user switches: the user needs only the right
    to use the workspace itself, not every directory above it."""
    program, args = argv
    proc = await asyncio.create_subprocess_exec(
        program,
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return await asyncio.wait_for(proc.wait(), seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: whatever it started too
        await proc.wait()
        return None
