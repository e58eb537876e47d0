"""Task updates over LiveKit RPC, against a stand-in for the room's local participant."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import pytest
from livekit import rtc

from frontdesk.agents.rpc import METHOD_CANCEL, METHOD_TASK, METHOD_TASKS, TaskRpc
from frontdesk.core.schema import open_store
from frontdesk.db.store import TaskEvent

ALICE, BOB = "alice", "bob"
PAYLOAD_KEYS = {"v", "task_id", "tool", "department", "pattern", "status", "progress", "note", "at"}


class StandInParticipant:
    """What TaskRpc needs of rtc.LocalParticipant, recording everything."""

    def __init__(self, *, error: Exception | None = None) -> None:
        self.sent: list[dict] = []
        self.handlers: dict = {}
        self.error = error

    async def perform_rpc(self, *, destination_identity, method, payload, response_timeout=None):
        if self.error is not None:
            raise self.error
        self.sent.append(
            {"to": destination_identity, "method": method, "payload": json.loads(payload)}
        )
        return ""

    def register_rpc_method(self, name, handler):
        self.handlers[name] = handler

    def unregister_rpc_method(self, name):
        self.handlers.pop(name, None)

    async def call(
        self, method: str, payload: object = None, *, caller_identity: str = ALICE
    ) -> dict:
        data = rtc.RpcInvocationData(
            request_id="req-1",
            caller_identity=caller_identity,
            payload=payload if isinstance(payload, str) else json.dumps(payload or {}),
            response_timeout=5.0,
            method=method,
        )
        return json.loads(await self.handlers[method](data))


def event(
    caller: str, task_id: int = 1, status: str = "running", note: str | None = None
) -> TaskEvent:
    return TaskEvent(
        task_id=task_id,
        caller=caller,
        session_id="call-1",
        tool="build_report",
        plugin="reports",
        department="reports",
        pattern="background",
        status=status,
        note=note,
        progress=0.6,
        at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    )


@pytest.fixture
def local():
    return StandInParticipant()


@pytest.fixture
def rpc(local, store):
    r = TaskRpc(local, store, ALICE)
    r.register()
    return r


async def test_on_event_sends_the_documented_payload_to_the_caller_only(rpc, local):
    rpc.on_event(event(BOB, 9))
    rpc.on_event(event(ALICE, 1, "running", "progress 60%: charts"))
    await rpc.flush()
    assert len(local.sent) == 1
    sent = local.sent[0]
    assert sent["to"] == ALICE and sent["method"] == METHOD_TASK == "frontdesk.task"
    assert sent["payload"] == {
        "v": 1,
        "task_id": 1,
        "tool": "build_report",
        "department": "reports",
        "pattern": "background",
        "status": "running",
        "progress": 0.6,
        "note": "progress 60%: charts",
        "at": "2026-01-02T03:04:05+00:00",
    }


async def test_store_events_arrive_in_order_and_only_the_callers(rpc, local, store):
    store.observers.append(rpc.on_event)
    mine = await store.create(caller=ALICE, tool="build_report", pattern="background")
    theirs = await store.create(caller=BOB, tool="build_report", pattern="background")
    await store.transition(theirs.id, "running")
    await store.transition(mine.id, "running")
    await store.set_progress(mine.id, 0.5, "halfway")
    await store.transition(mine.id, "succeeded", result={"summary": "done"})
    await rpc.flush()
    payloads = [s["payload"] for s in local.sent]
    assert all(p["task_id"] == mine.id and set(p) == PAYLOAD_KEYS for p in payloads)
    assert [p["status"] for p in payloads] == ["queued", "running", "running", "succeeded"]
    assert payloads[2]["note"] == "progress 50%: halfway" and payloads[2]["progress"] == 0.5


async def test_poll_forwards_events_written_by_another_process(rpc, local, store, db_url):
    store.observers.append(rpc.on_event)  # both paths wired: still one message per event
    assert await rpc.poll() == 0  # the first poll marks where the log ends
    runner_store = await open_store(db_url)  # stands for the runner's process
    try:
        job = await store.create(caller=ALICE, tool="build_report", pattern="background")
        await runner_store.transition(job.id, "running", note="claimed by runner-1")
        await runner_store.set_progress(job.id, 0.6, "charts")
        await runner_store.transition(job.id, "succeeded")
        other = await runner_store.create(caller=BOB, tool="x", pattern="background")
        await runner_store.transition(other.id, "running")
    finally:
        await runner_store.close()
    assert await rpc.poll() == 3  # "queued" came through the observer already
    assert await rpc.poll() == 0
    await rpc.flush()
    assert [(s["payload"]["status"], s["payload"]["note"]) for s in local.sent] == [
        ("queued", None),
        ("running", "claimed by runner-1"),
        ("running", "progress 60%: charts"),
        ("succeeded", None),
    ]


async def test_watch_polls_until_closed(local, store, db_url):
    rpc = TaskRpc(local, store, ALICE)
    rpc.watch(0.02)
    await asyncio.sleep(0.1)
    other = await open_store(db_url)
    try:
        await other.create(caller=ALICE, tool="build_report", pattern="background")
    finally:
        await other.close()
    for _ in range(50):
        if local.sent:
            break
        await asyncio.sleep(0.02)
    await rpc.aclose()
    assert [s["payload"]["status"] for s in local.sent] == ["queued"]


async def test_tasks_lists_only_the_callers_tasks(rpc, local, store):
    a1 = await store.create(caller=ALICE, tool="build_report", pattern="background")
    await store.create(caller=BOB, tool="secret_thing", pattern="background")
    a2 = await store.create(caller=ALICE, tool="lookup", pattern="interruptible", status="running")
    await store.transition(a2.id, "succeeded", result="The lab notes say it is fine.")
    answer = await local.call(METHOD_TASKS)
    assert answer["v"] == 1 and answer["truncated"] is False
    assert [t["task_id"] for t in answer["tasks"]] == [a2.id, a1.id]  # newest first
    first = answer["tasks"][0]
    assert first["status"] == "succeeded" and first["result"] == "The lab notes say it is fine."
    assert first["delivered"] is False and "args" not in first
    assert {t["tool"] for t in answer["tasks"]} == {"build_report", "lookup"}

    only_queued = await local.call(METHOD_TASKS, {"status": "queued", "limit": 5})
    assert [t["task_id"] for t in only_queued["tasks"]] == [a1.id]


async def test_tasks_answer_fits_an_rpc_payload(rpc, local, store):
    for i in range(50):
        t = await store.create(
            caller=ALICE, tool="build_report", pattern="interruptible", status="running"
        )
        await store.transition(t.id, "failed", error="x" * 400 + str(i))
    answer_text = await local.handlers[METHOD_TASKS](
        rtc.RpcInvocationData("r", ALICE, json.dumps({"limit": 50}), 5.0, METHOD_TASKS)
    )
    assert len(answer_text.encode()) <= 14_000
    assert json.loads(answer_text)["truncated"] is True


@pytest.mark.parametrize(
    "payload", ["not json", "[1, 2]", {"limit": 0}, {"limit": "all"}, {"status": 3}]
)
async def test_tasks_rejects_bad_requests(rpc, local, payload):
    with pytest.raises(rtc.RpcError) as err:
        await local.call(METHOD_TASKS, payload)
    assert err.value.code == 400


async def test_only_the_served_participant_may_call(rpc, local, store):
    await store.create(caller=ALICE, tool="build_report", pattern="background")
    for method in (METHOD_TASKS, METHOD_CANCEL):
        with pytest.raises(rtc.RpcError) as err:
            await local.call(method, {"task_id": 1}, caller_identity="mallory")
        assert err.value.code == 403


async def test_cancel_own_background_job(rpc, local, store):
    job = await store.create(caller=ALICE, tool="build_report", pattern="background")
    assert await local.call(METHOD_CANCEL, {"task_id": job.id}) == {
        "v": 1,
        "task_id": job.id,
        "status": "cancelled",
    }
    row = await store.get(job.id)
    assert row.status == "cancelled"
    assert (await store.events(job.id))[-1]["note"] == "cancelled by the caller's app"
    # they cancelled it themselves: no "your job did not complete" follow-up
    assert row.delivered_at is not None and await store.pending_followups([ALICE]) == []


async def test_cancel_another_callers_job_is_not_found(rpc, local, store):
    theirs = await store.create(caller=BOB, tool="build_report", pattern="background")
    with pytest.raises(rtc.RpcError) as foreign:
        await local.call(METHOD_CANCEL, {"task_id": theirs.id})
    with pytest.raises(rtc.RpcError) as unknown:
        await local.call(METHOD_CANCEL, {"task_id": 99999})
    assert foreign.value.code == unknown.value.code == 404
    assert foreign.value.message == f"task {theirs.id} not found"  # same words as an unknown id
    assert (await store.get(theirs.id)).status == "queued"


async def test_cancel_refuses_critical_and_in_turn_work(rpc, local, store):
    critical = await store.create(caller=ALICE, tool="charge", pattern="critical", status="running")
    with pytest.raises(rtc.RpcError) as err:
        await local.call(METHOD_CANCEL, {"task_id": critical.id})
    assert err.value.code == 403 and "critical" in err.value.message
    assert (await store.get(critical.id)).status == "running"

    lookup = await store.create(
        caller=ALICE, tool="lookup", pattern="interruptible", status="running"
    )
    with pytest.raises(rtc.RpcError) as err:
        await local.call(METHOD_CANCEL, {"task_id": lookup.id})
    assert err.value.code == 403 and "only background jobs" in err.value.message


async def test_cancel_finished_job_conflicts(rpc, local, store):
    job = await store.create(caller=ALICE, tool="build_report", pattern="background")
    await store.transition(job.id, "running")
    await store.transition(job.id, "succeeded")
    with pytest.raises(rtc.RpcError) as err:
        await local.call(METHOD_CANCEL, {"task_id": job.id})
    assert err.value.code == 409 and json.loads(err.value.data) == {
        "task_id": job.id,
        "status": "succeeded",
    }


@pytest.mark.parametrize("payload", [{}, {"task_id": "1"}, {"task_id": True}])
async def test_cancel_needs_an_integer_id(rpc, local, payload):
    with pytest.raises(rtc.RpcError) as err:
        await local.call(METHOD_CANCEL, payload)
    assert err.value.code == 400


async def test_an_app_without_the_method_turns_updates_off(store):
    local = StandInParticipant(error=rtc.RpcError(1400, "Method not supported at destination"))
    rpc = TaskRpc(local, store, ALICE)
    rpc.on_event(event(ALICE, 1))
    rpc.on_event(event(ALICE, 2))
    await rpc.flush()
    assert rpc.enabled is False
    rpc.on_event(event(ALICE, 3))
    assert rpc._queue.empty()


async def test_a_failing_send_does_not_stop_later_ones(store):
    class Flaky(StandInParticipant):
        calls = 0

        async def perform_rpc(self, **kwargs):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise rtc.RpcError(1503, "Recipient disconnected")
            return await super().perform_rpc(**kwargs)

    local = Flaky()
    rpc = TaskRpc(local, store, ALICE)
    rpc.on_event(event(ALICE, 1))
    rpc.on_event(event(ALICE, 2))
    await rpc.flush()
    assert [s["payload"]["task_id"] for s in local.sent] == [2]


async def test_aclose_unregisters_methods(rpc, local):
    assert set(local.handlers) == {METHOD_TASKS, METHOD_CANCEL}
    await rpc.aclose()
    assert local.handlers == {}


async def test_participant_identity_differs_from_caller_key_for_sip(local, store):
    # A phone caller's tasks are keyed by number; RPC goes to their participant identity.
    rpc = TaskRpc(local, store, "+15550100199", participant_identity="sip_abc")
    rpc.register()
    rpc.on_event(event("+15550100199"))
    await rpc.flush()
    assert local.sent[0]["to"] == "sip_abc"
    assert (await local.call(METHOD_TASKS, caller_identity="sip_abc"))["tasks"] == []


@pytest.mark.backends("postgres")
async def test_poll_keeps_an_event_committed_after_a_later_one(rpc, local, store, db_url):
    """Postgres hands out event ids at INSERT and shows rows at COMMIT: a slow writer's event
    can appear after a later id was already polled. It must still reach the app."""
    from sqlalchemy import insert

    from frontdesk.db.engine import create_engine
    from frontdesk.db.models import TaskEvent as TaskEventRow
    from frontdesk.db.models import utcnow

    assert await rpc.poll() == 0
    job = await store.create(caller=ALICE, tool="build_report", pattern="background")
    slow_engine = create_engine(db_url)
    try:
        async with slow_engine.connect() as slow:
            await slow.begin()
            await slow.execute(
                insert(TaskEventRow.__table__).values(
                    task_id=job.id, at=utcnow(), status="queued", note="slow writer"
                )
            )
            await store.transition(job.id, "running", note="fast writer")
            assert await rpc.poll() == 2  # "queued" (create) and "running"
            await slow.commit()
    finally:
        await slow_engine.dispose()
    assert await rpc.poll() == 1
    assert await rpc.poll() == 0
    await rpc.flush()
    assert [(s["payload"]["status"], s["payload"]["note"]) for s in local.sent] == [
        ("queued", None),
        ("running", "fast writer"),
        ("queued", "slow writer"),
    ]
