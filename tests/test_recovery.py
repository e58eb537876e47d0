"""Lease recovery in-process, on SQLite and Postgres: what ``Runner.recover`` does with each
kind of row a dead process leaves ``running``, and how a critical retry closes its own.

The crash tests (test_crash.py) kill real processes; these pin down each rule quickly.
"""

from __future__ import annotations

import asyncio

import jobkit
import kit
import pytest

from frontdesk.agents.patterns import _digest
from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.core.runner import RESTART, Runner
from frontdesk.core.schema import open_store
from frontdesk.db.models import utcnow
from frontdesk.db.store import TaskStore

pytestmark = pytest.mark.backends("sqlite", "postgres")

DEAD = "runner:elsewhere:4242:dead00"


async def left_running(store: TaskStore, pattern: str = "interruptible", **kw) -> int:
    """A row whose call process died: running, its lease already past."""
    kw.setdefault("tool", "lookup")
    task = await store.create(
        caller="ada", pattern=pattern, status="running", lease_owner=DEAD, lease_seconds=-1, **kw
    )
    return task.id


def watched(runner: Runner) -> list[float]:
    """The runner's lease watch on a clock the test moves (core/leasewatch.py): the leases it
    saw unchanged for a full lease on that clock are stale, whatever any wall clock says."""
    now = [0.0]
    runner.leases.clock = lambda: now[0]
    return now


async def recover_after_a_lease(runner: Runner) -> list:
    """What ``runner`` closes once it has watched the leases, unrenewed, for a full lease."""
    now = watched(runner)
    assert await runner.recover() == []  # first sight: nothing is judged yet
    now[0] += runner.leases.lease_seconds
    return await runner.recover()


async def test_in_turn_rows_of_a_dead_call_are_failed_and_jobs_left_to_dbos(
    store, registry, settings
):
    search = await left_running(store, tool="lookup")
    note = await left_running(store, pattern="fire_and_forget", tool="note")
    # A background row with an expired lease (left by the runner before DBOS): not failed
    # here; reconciliation enqueues it (test_durable.py).
    legacy = await left_running(store, pattern="background", tool="experiment")
    done = {t.id: t for t in await recover_after_a_lease(Runner(store, registry, settings))}
    assert set(done) == {search, note}
    assert all(t.status == "failed" and t.error == RESTART for t in done.values())
    assert {t.id for t in await store.pending_followups(["ada"])} == {search, note}
    assert (await store.get(legacy)).status == "running"


async def test_critical_row_reconciled_through_its_key(store, registry, settings):
    """A retry of the same logical call already succeeded: the dead row is closed as told."""
    dead = await left_running(store, pattern="critical", tool="charge", idempotency_key="abc.1")
    twin = await store.create(
        caller="ada", tool="charge", pattern="critical", status="running", idempotency_key="abc.1#2"
    )
    await store.transition(twin.id, "succeeded", result="Charged.", delivered_at=utcnow())
    alone = await left_running(store, pattern="critical", tool="charge", idempotency_key="zzz.1")
    done = {t.id: t for t in await recover_after_a_lease(Runner(store, registry, settings))}
    assert done[dead].status == "failed" and done[dead].delivered_at is not None
    assert f"completed as task {twin.id}" in (await store.events(dead))[-1]["note"]
    assert done[alone].status == "failed" and done[alone].delivered_at is None
    assert [t.id for t in await store.pending_followups(["ada"])] == [alone]


async def test_a_holder_that_renews_after_the_scan_keeps_its_job(store, registry, settings):
    task_id = await left_running(store)
    [stale] = await store.expired()
    assert await store.renew(DEAD, 30, [task_id]) == {task_id}  # it was only slow
    assert await Runner(store, registry, settings)._reclaim(stale) is None
    task = await store.get(task_id)
    assert task.status == "running" and task.lease_owner == DEAD


async def test_runners_racing_to_recover_close_once(store, registry, settings, db_url):
    task_id = await left_running(store)
    others = [await open_store(db_url) for _ in range(3)]
    try:
        runners = [Runner(s, registry, settings) for s in (store, *others)]
        clocks = [watched(r) for r in runners]
        assert await asyncio.gather(*(r.recover() for r in runners)) == [[]] * 4
        for now in clocks:
            now[0] += settings.job_lease_seconds
        results = await asyncio.gather(*(r.recover() for r in runners))
    finally:
        for s in others:
            await s.close()
    assert sum(len(r) for r in results) == 1
    notes = [e["note"] or "" for e in await store.events(task_id)]
    assert sum(n.startswith(RESTART) for n in notes) == 1


def record_keys(registry, tool: str, monkeypatch) -> list[str]:
    """Every idempotency key ``tool`` is run with, whole (a wrong key differs anywhere)."""
    spec = registry.tools[tool]
    body, keys = spec.fn, []

    async def spy(ctx, **args):
        keys.append(ctx.idempotency_key)
        return await body(ctx, **args)

    monkeypatch.setattr(spec, "fn", spy)
    return keys


@pytest.mark.backends("sqlite")
async def test_critical_retry_closes_a_dead_calls_row_and_runs_once(
    store, registry, settings, transcript, monkeypatch
):
    """The caller retries a payment whose call process died mid-way: the expired row is
    closed (and counted as told), and the retry runs under the same stable key."""
    args = {"amount": "5.00", "seconds": 0.0}
    base = f"{_digest('ada', 'charge', args)}.1700000000"
    dead = await store.create(
        caller="ada", tool="charge", pattern="critical", status="running", args=args,
        idempotency_key=base, lease_owner="call:4242:gone", lease_seconds=-1,
    )  # fmt: skip
    keys = record_keys(registry, "charge", monkeypatch)
    scenario = parse_scenario(
        {
            "caller": "ada",
            "steps": [
                {"user": "lab", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]},
                {"user": "charge 5", "llm": [{"tools": [{"charge": args}]}, {"say": "Done."}]},
                {"expect": {"task": "charge", "status": "succeeded"}},
            ],
        }
    )
    assert await simulate([scenario], settings, registry, transcript.append, runner=False) == []
    rows = sorted(await store.list(caller="ada", tool="charge"), key=lambda t: t.id)
    assert [t.status for t in rows] == ["failed", "succeeded"]
    assert rows[0].id == dead.id and rows[0].error == RESTART and rows[0].delivered_at
    # the retry runs under the same logical key (a gateway would recognise it), on a new row
    assert rows[1].idempotency_key.startswith(f"{base}#") and kit.calls["charge"] == 1
    assert rows[1].idempotency_key != rows[0].idempotency_key
    assert keys == [base]  # the whole stable key reached the tool, not the row's suffixed copy
    output = [e for e in transcript.of("tool_output") if e["name"] == "charge"][-1]["output"]
    assert output == f"Charged 5.00 with key {base[:8]}."


@pytest.mark.backends("sqlite")
async def test_critical_retry_while_the_first_is_alive_elsewhere_is_refused(
    store, registry, settings, transcript
):
    args = {"amount": "7.00", "seconds": 0.0}
    await store.create(
        caller="ada", tool="charge", pattern="critical", status="running", args=args,
        idempotency_key=f"{_digest('ada', 'charge', args)}.1700000000",
        lease_owner="call:4242:alive", lease_seconds=60,
    )  # fmt: skip
    scenario = parse_scenario(
        {
            "caller": "ada",
            "steps": [
                {"user": "lab", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]},
                {"user": "charge 7", "llm": [{"tools": [{"charge": args}]}, {"say": "Hm."}]},
            ],
        }
    )
    assert await simulate([scenario], settings, registry, transcript.append, runner=False) == []
    output = [e for e in transcript.of("tool_output") if e["name"] == "charge"][-1]
    assert output["is_error"] and "still being processed" in output["output"]
    assert kit.calls.get("charge", 0) == 0


async def test_a_stopped_runner_leaves_its_job_to_the_next_one_after_its_last_step(
    store, registry, settings, monkeypatch, tmp_path
):
    """stop() cancels a running job within a bound; its workflow stays pending, and the next
    runner resumes it after its last finished step (gather is not done again)."""
    from frontdesk.core import runner as runner_mod

    log = tmp_path / "effects.jsonl"
    monkeypatch.setenv(kit.EFFECTS, str(log))
    monkeypatch.setenv(kit.HANG_AFTER, "gather")
    monkeypatch.setattr(runner_mod, "STOP_GRACE_SECONDS", 0.3)
    loop = asyncio.get_running_loop()
    async with jobkit.running(store, registry, settings) as first:
        job = await jobkit.queue(store, settings, "pipeline", name="p")
        while [e["effect"] for e in kit.effects(log)] != ["gather", "hung after gather"]:
            await asyncio.sleep(0.02)
        started = loop.time()
    assert loop.time() - started < 5
    assert (await store.get(job.id)).status == "running"  # pending in DBOS, not failed
    monkeypatch.delenv(kit.HANG_AFTER)
    async with jobkit.running(store, registry, settings) as second:
        done = await jobkit.finished(store, job.id)
    assert second.executor_id == first.executor_id  # the same host slot, taken back
    assert done.status == "succeeded" and done.attempts == 2
    assert [e["effect"] for e in kit.effects(log)] == [
        "gather",
        "hung after gather",
        "write",
        "draw",
    ]


@pytest.mark.backends("sqlite")
async def test_hangup_records_critical_work_that_finished_while_the_turn_was_still_busy(
    store, registry, settings, monkeypatch
):
    """Shutdown waits for critical work; if it finished but its turn has not yet written the
    outcome (here a filler still stopping), shutdown records the real outcome, never
    "unfinished at hang-up" for a payment that went through."""
    import contextlib

    from frontdesk.agents import patterns
    from frontdesk.agents.runtime import CallRuntime

    @contextlib.asynccontextmanager
    async def slow_filler(*_args):
        yield
        await asyncio.sleep(0.3)  # stopping the filler speech takes a moment

    monkeypatch.setattr(patterns, "_ack", slow_filler)
    runtime = CallRuntime(None, store=store, registry=registry, settings=settings, caller="ada")
    turn = asyncio.create_task(
        patterns.run_tool(
            registry.tools["charge"], runtime, "lab", {"amount": "5.00", "seconds": 0.2}, None
        )
    )
    while not runtime.inflight:
        await asyncio.sleep(0.01)
    await runtime.shutdown("hang-up")
    assert (await turn).startswith("Charged 5.00")
    [row] = await store.list(caller="ada", tool="charge")
    assert row.status == "succeeded" and row.error is None
    assert [e["status"] for e in await store.events(row.id)] == ["running", "succeeded"]
