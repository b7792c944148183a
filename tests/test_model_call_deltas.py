"""call_model publishes the streamed reply as token deltas of its request: `send` counts the
re-sends after a context overflow, and a retry that finds the reply committed sends none.
The activity runs in Temporal's ActivityEnvironment; the model server is faked at HTTP."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.model_call import ModelActivities
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.listener import Listener
from durable_agents.storage.session_deltas import Delta, DeltaPublisher, encode_deltas
from durable_agents.storage.session_events import EventHub, listen_dsn
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.contracts import ModelCallInput
from tests.support.fake_openai import says
from tests.support.fake_window import (
    WindowedServer,
    windowed_server,  # noqa: F401 (the `windowed` fixture)
)
from tests.support.helpers import items_of

REPLY = "It fits now, after one overflow and a shorter request."
# ~17k tokens: more than the server's window of 4,096.
BIG_TASK = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1500))


@pytest.fixture
async def hub(migrated: StackEndpoints) -> AsyncIterator[EventHub]:
    listener = Listener(listen_dsn(migrated.database_url))
    events = EventHub(listener)
    async with listener:
        yield events


@pytest.fixture
async def activities(
    windowed: WindowedServer, resources: Resources
) -> AsyncIterator[ModelActivities]:
    provider = OpenAICompatibleProvider(windowed.url, None, "gpt-x", timeout=10)
    yield ModelActivities(
        resources.sessions,
        resources.store,
        provider,
        default_registry(),
        model="gpt-x",
        system_prompt="Be brief.",
        budget=ContextBudget(),
        deltas=resources.deltas,
    )
    await provider.aclose()


async def _session(resources: Resources, tenant: str, task: str) -> str:
    sid = uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        await ItemRepository(db, tenant).append(
            NewItem(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:task", text=task)
        )
    return str(sid)


async def _deltas_of(queue: asyncio.Queue[Delta], text: str) -> list[Delta]:
    got: list[Delta] = []
    async with asyncio.timeout(20):
        while "".join(d.text for d in got) != text:
            got.append(await queue.get())
    return got


async def test_deltas_after_an_overflow_carry_the_re_send_index(
    windowed: WindowedServer,
    activities: ModelActivities,
    resources: Resources,
    hub: EventHub,
    tenant: str,
) -> None:
    windowed.n_ctx = 4_096
    windowed.reply = says(REPLY)
    sid = await _session(resources, tenant, BIG_TASK)
    with hub.follow_deltas(tenant, sid) as queue:
        inp = ModelCallInput(sid, tenant, 5, f"{sid}:5:model")
        await ActivityEnvironment().run(activities.call_model, inp)
        got = await _deltas_of(queue, REPLY)
    assert [s.accepted for s in windowed.seen] == [False, True]
    assert all(s.body["stream"] is True for s in windowed.seen)
    assert {(d.step, d.attempt, d.send) for d in got} == {(5, 1, 1)}
    assert [d.seq for d in got] == list(range(len(got)))
    (answer,) = [i for i in await items_of(resources, tenant, sid) if i.role == "assistant"]
    assert answer.text == REPLY


async def test_a_retry_that_finds_the_reply_committed_sends_no_delta(
    windowed: WindowedServer,
    activities: ModelActivities,
    resources: Resources,
    hub: EventHub,
    tenant: str,
    migrated: StackEndpoints,
) -> None:
    windowed.reply = says(REPLY)
    sid = await _session(resources, tenant, "Say it.")
    inp = ModelCallInput(sid, tenant, 0, f"{sid}:0:model")
    with hub.follow_deltas(tenant, sid) as queue:
        first = await ActivityEnvironment().run(activities.call_model, inp)
        await _deltas_of(queue, REPLY)
        again = await ActivityEnvironment().run(activities.call_model, inp)
        # A marker on the same channel after the retry reaches the hub after anything the
        # retry could have sent.
        marker = DeltaPublisher(listen_dsn(migrated.database_url))
        await marker.publish(encode_deltas(Delta(tenant, sid, 99, 1, 0, 0, "marker")))
        await marker.aclose()
        heard = await asyncio.wait_for(queue.get(), 20)
    assert again == first and len(windowed.seen) == 1
    assert heard.text == "marker"  # nothing came between the first reply and the marker
