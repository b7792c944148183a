"""read_artifact on the real store: pages by byte offset (ranged reads, whole characters),
grep with line numbers, RE2 only, and nothing outside the call's tenant and session tree."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.artifact_access import SqlArtifactAccess
from durable_agents.activities.tools.base import ToolContext, ToolError
from durable_agents.activities.tools.read_artifact import (
    MAX_LINE_BYTES,
    MAX_MATCHES,
    read_artifact_tool,
)
from durable_agents.storage import artifact_codec as codec
from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from tests.support.large_objects import spied

read_artifact = read_artifact_tool.fn
TEXT = "text/plain; charset=utf-8"
# Three contents whose sha256 share their first 8 hex characters ("25dc64d5"), found by a
# birthday search: what it takes to make a shortest prefix name several artifacts.
COLLIDING = [b"collide 1229629\n", b"collide 4506608\n", b"collide 4929327\n"]
SHARED_PREFIX = "25dc64d5"
_HEADER = re.compile(
    r"^\[artifact [0-9a-f]{16} \(.*\): bytes (\d+)-(\d+); (?:next offset (\d+)|end)"
)


async def new_session(res: Resources, tenant: str, parent: uuid.UUID | None = None) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(
            sid, title="t", model_config={}, parent_id=parent
        )
    return sid


async def held(
    res: Resources, tenant: str, session: uuid.UUID, data: bytes, content_type: str = TEXT
) -> tuple[str, str]:
    """Store `data` as a result the session holds (as run_tool does); (artifact id, sha256)."""
    ref = await res.store.put(tenant, data, content_type)
    async with res.sessions() as db, db.begin():
        artifact_id = await register_uploaded(db, res.store, ref, data)
        await ArtifactRepository(db, tenant).add_ref(
            artifact_id, owner_type="checkpoint", owner_id=str(session), required_for_resume=True
        )
    return str(artifact_id), ref.sha256


def ctx(
    res: Resources, tenant: str, session: uuid.UUID, store: ArtifactStore | None = None
) -> ToolContext:
    return ToolContext(
        idempotency_key="k",
        workspace=Path("unused"),
        tenant_id=tenant,
        session_id=str(session),
        artifacts=SqlArtifactAccess(res.sessions, store or res.store, tenant, session),
    )


async def call(context: ToolContext, **args: Any) -> str:
    out = await read_artifact(context, args)
    assert out.content_type == "text/plain; charset=utf-8"
    return out.content.decode()


async def refusal(context: ToolContext, **args: Any) -> ToolError:
    with pytest.raises(ToolError) as err:
        await read_artifact(context, args)
    return err.value


def page_of(text: str) -> tuple[int, int, int | None, str]:
    header, _, body = text.partition("\n")
    found = _HEADER.match(header)
    assert found, header
    nxt = found.group(3)
    return int(found.group(1)), int(found.group(2)), None if nxt is None else int(nxt), body


# --- paging --------------------------------------------------------------------------


async def test_pages_cover_the_text_by_byte_offsets_without_splitting_characters(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    data = "".join(f"ligne {i} é€😀\n" for i in range(400)).encode()
    artifact_id, _ = await held(resources, tenant, sid, data)
    c = ctx(resources, tenant, sid)

    pieces: list[str] = []
    offset: int | None = 0
    while offset is not None:
        # 11 bytes cut through a 2-, 3- or 4-byte character on most pages.
        start, end, offset, body = page_of(
            await call(c, artifact=artifact_id, offset=offset, length=11)
        )
        assert body.encode() == data[start:end]
        pieces.append(body)
    assert "".join(pieces) == data.decode()

    # A page too short for the character at its start still moves on, by that character.
    emoji = data.index("😀".encode())
    start, end, _, body = page_of(await call(c, artifact=artifact_id, offset=emoji, length=1))
    assert (start, end, body) == (emoji, emoji + 4, "😀")

    # An offset inside a character starts the page at the next whole one.
    inside = data.index("😀".encode()) + 1
    start, _, _, body = page_of(await call(c, artifact=artifact_id, offset=inside, length=40))
    assert start == inside + 3 and body.startswith("\n")


def _stored_as(res: Resources, *, compress: bool) -> ArtifactStore:
    store = res.store
    return ArtifactStore(store.client, store.bucket, store.prefix, compress=compress)


async def _page_reads(
    res: Resources, tenant: str, data: bytes, writer: ArtifactStore
) -> list[tuple[str, str | None]]:
    """Read one 8 KiB page at offset 5,000,000 of `data` stored by `writer`; the S3 calls."""
    sid = await new_session(res, tenant)
    ref = await writer.put(tenant, data, TEXT)
    async with res.sessions() as db, db.begin():
        artifact_id = await register_uploaded(db, writer, ref, data)
        await ArtifactRepository(db, tenant).add_ref(
            artifact_id, owner_type="checkpoint", owner_id=str(sid), required_for_resume=True
        )
    calls: list[tuple[str, str | None]] = []

    async def get_object(real: Any, **kwargs: Any) -> Any:
        calls.append(("get_object", kwargs.get("Range")))
        return await real(**kwargs)

    async def head_object(real: Any, **kwargs: Any) -> Any:
        calls.append(("head_object", None))
        return await real(**kwargs)

    store, _ = spied(res.store, get_object=get_object, head_object=head_object)
    text = await call(ctx(res, tenant, sid, store), artifact=str(artifact_id), offset=5_000_000)

    start, end, nxt, body = page_of(text)
    assert (start, end, nxt) == (5_000_000, 5_008_192, 5_008_192)
    assert body.encode() == data[5_000_000:5_008_192]
    return calls


LINES = b"".join(b"%09d some text to make a line\n" % i for i in range(200_000))  # 7 MB


async def test_a_page_of_a_large_raw_artifact_is_one_ranged_read(
    resources: Resources, tenant: str
) -> None:
    calls = await _page_reads(resources, tenant, LINES, _stored_as(resources, compress=False))
    assert calls == [("get_object", "bytes=5000000-5008191")]  # only the page was fetched


async def test_a_page_of_a_large_compressed_artifact_fetches_only_its_frame(
    resources: Resources, tenant: str
) -> None:
    """The page's raw offsets lie past the compressed object's end (416): a HEAD finds its
    frame table, and one ranged read fetches the single frame that holds the page."""
    packed = codec.compress_if_smaller(LINES)
    assert packed is not None and len(packed.layout.frames) > 1
    calls = await _page_reads(resources, tenant, LINES, _stored_as(resources, compress=True))

    frame = 5_000_000 // packed.layout.frame_size
    lo, hi = packed.layout.stored_span(frame, frame)
    assert calls == [
        ("get_object", "bytes=5000000-5008191"),
        ("head_object", None),
        ("get_object", f"bytes={lo}-{hi}"),
    ]


async def test_offset_and_length_are_bounded(resources: Resources, tenant: str) -> None:
    sid = await new_session(resources, tenant)
    artifact_id, _ = await held(resources, tenant, sid, b"short\n")
    c = ctx(resources, tenant, sid)
    too_long = await refusal(c, artifact=artifact_id, length=10**9)
    assert too_long.error_type == "InvalidArguments" and "'length'" in too_long.message
    past = await refusal(c, artifact=artifact_id, offset=100)
    assert past.error_type == "InvalidArguments" and "past the end" in past.message
    assert page_of(await call(c, artifact=artifact_id, offset=6))[2:] == (None, "")


async def test_binary_content_gets_a_clear_answer(resources: Resources, tenant: str) -> None:
    sid = await new_session(resources, tenant)
    c = ctx(resources, tenant, sid)
    png, _ = await held(resources, tenant, sid, b"\x89PNG\r\n\x1a\n\x00\x00", "image/png")
    blob, _ = await held(resources, tenant, sid, b"ok\n\xff\xfe\x00\x01 bytes", TEXT)
    for artifact, args in ((png, {}), (blob, {}), (blob, {"pattern": "ok"})):
        err = await refusal(c, artifact=artifact, **args)
        assert err.error_type == "BinaryArtifact" and "text only" in err.message


# --- grep ----------------------------------------------------------------------------


async def test_grep_returns_matching_lines_with_numbers_and_offsets(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    lines = [f"row {i}: {'ERROR disk full' if i % 97 == 5 else 'fine'}" for i in range(1000)]
    lines[600] = "x" * (MAX_LINE_BYTES * 2) + " error at the far end of a long line"
    data = ("\n".join(lines) + "\n").encode()
    _, sha = await held(resources, tenant, sid, data)

    text = await call(ctx(resources, tenant, sid), artifact=sha[:12], pattern=r"(?i)error\b")

    header, *found = text.splitlines()
    expected = [i for i, line in enumerate(lines) if "error" in line.lower()]
    assert f"{len(expected)} of 1000 lines match" in header
    numbers = [int(f.split(" ", 1)[0]) for f in found]
    assert numbers == [i + 1 for i in expected]
    for entry, i in zip(found, expected, strict=True):
        offset = int(entry.split("@", 1)[1].split(":", 1)[0])
        assert data[offset:].startswith(lines[i][:20].encode())
    long_entry = found[numbers.index(601)]
    assert "far end" in long_entry and len(long_entry) < 400  # shown around the match


async def test_grep_stops_at_the_match_cap_and_says_more_exist(
    resources: Resources, tenant: str
) -> None:
    sid = await new_session(resources, tenant)
    artifact_id, _ = await held(
        resources, tenant, sid, "".join(f"hit {i}\n" for i in range(500)).encode()
    )
    text = await call(ctx(resources, tenant, sid), artifact=artifact_id, pattern="hit")
    header, *found = text.splitlines()
    assert len(found) == MAX_MATCHES
    assert f"more match after line {MAX_MATCHES}" in header


@pytest.mark.parametrize("pattern", [r"(a)\1", r"foo(?=bar)", r"(?<!x)y", "a" * 600])
async def test_patterns_re2_cannot_take_are_refused(
    resources: Resources, tenant: str, pattern: str
) -> None:
    sid = await new_session(resources, tenant)
    artifact_id, _ = await held(resources, tenant, sid, b"aa foobar\n")
    err = await refusal(ctx(resources, tenant, sid), artifact=artifact_id, pattern=pattern)
    assert err.error_type == "InvalidPattern"
    assert "RE2" in err.message or "longer than" in err.message


# --- isolation -----------------------------------------------------------------------


def _words(err: ToolError, name: str) -> str:
    return err.message.replace(name, "NAME")


async def test_the_whole_session_tree_is_readable(resources: Resources, tenant: str) -> None:
    root = await new_session(resources, tenant)
    child = await new_session(resources, tenant, parent=root)
    grandchild = await new_session(resources, tenant, parent=child)
    from_child, _ = await held(resources, tenant, grandchild, b"made by a sub-agent\n")
    _, root_sha = await held(resources, tenant, root, b"made by the root\n")
    for reader in (root, child, grandchild):
        c = ctx(resources, tenant, reader)
        assert "sub-agent" in await call(c, artifact=from_child)
        assert "the root" in await call(c, artifact=root_sha[:8].upper())


async def test_other_tenants_and_other_trees_are_not_found_alike(
    resources: Resources, tenant: str
) -> None:
    mine = await new_session(resources, tenant)
    other_tree = await new_session(resources, tenant)
    other_tenant = f"{tenant}-b"
    theirs = await new_session(resources, other_tenant)
    tree_id, tree_sha = await held(resources, tenant, other_tree, b"another task's result\n")
    tenant_id, tenant_sha = await held(resources, other_tenant, theirs, b"another tenant's\n")
    c = ctx(resources, tenant, mine)

    names = [tree_id, tree_sha[:12], tree_sha, tenant_id, tenant_sha[:12], str(uuid.uuid4())]
    errors = [await refusal(c, artifact=name) for name in names]
    assert {e.error_type for e in errors} == {"ArtifactNotFound"}
    # The same words whether it exists elsewhere or nowhere: no existence oracle.
    assert len({_words(e, n) for e, n in zip(errors, names, strict=True)}) == 1
    # A user tool's access sees the same.
    assert c.artifacts is not None
    with pytest.raises(ToolError):
        await c.artifacts.read(tree_id)


async def test_an_ambiguous_prefix_names_only_candidates_of_this_tree(
    resources: Resources, tenant: str
) -> None:
    assert {hashlib.sha256(d).hexdigest()[:8] for d in COLLIDING} == {SHARED_PREFIX}
    both = await new_session(resources, tenant)
    one = await new_session(resources, tenant)
    shas = [(await held(resources, tenant, both, d))[1] for d in COLLIDING[:2]]
    _, elsewhere = await held(resources, tenant, one, COLLIDING[2])

    err = await refusal(ctx(resources, tenant, both), artifact=SHARED_PREFIX)
    assert err.error_type == "AmbiguousArtifact"
    assert all(s in err.message for s in shas) and elsewhere not in err.message
    # The other tree's colliding artifact does not make the prefix ambiguous there.
    assert "collide 4929327" in await call(ctx(resources, tenant, one), artifact=SHARED_PREFIX)


@pytest.mark.parametrize("bad", ["", "abc", "25dc64d", "not-hex-at-all", "../x"])
async def test_names_that_are_neither_id_nor_prefix_are_not_found(
    resources: Resources, tenant: str, bad: str
) -> None:
    sid = await new_session(resources, tenant)
    err = await refusal(ctx(resources, tenant, sid), artifact=bad)
    assert err.error_type == "ArtifactNotFound"
