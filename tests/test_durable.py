"""Background jobs on DBOS, in-process, on SQLite and Postgres: durable steps, cancel and retry
through DBOS, a row whose enqueue never happened, and ``ctx.step``/``ctx.sleep`` outside a
runner. The crash-proof versions (SIGKILLed runners) are in test_crash_durable.py."""

from __future__ import annotations

import asyncio
import logging

import kit
import pytest
from jobkit import finished, queue, running

from frontdesk.core.context import ToolContext
from frontdesk.core.jobs import (
    QUEUE,
    cancel_job,
    client_for,
    derived_system_url,
    retry_job,
    workflow_id,
)
from frontdesk.db.errors import NotCancellable, NotRetryable
from frontdesk.db.store import wait_for

pytestmark = pytest.mark.backends("sqlite", "postgres")


async def test_a_three_step_job_records_each_step_once(
    store, registry, settings, tmp_path, monkeypatch
):
    log = tmp_path / "effects.jsonl"
    monkeypatch.setenv(kit.EFFECTS, str(log))
    async with running(store, registry, settings) as runner:
        job = await queue(store, settings, "pipeline", name="q1")
        done = await finished(store, job.id)
        steps = await asyncio.to_thread(
            client_for(settings)._get().list_workflow_steps, workflow_id(job.id)
        )
    assert done.status == "succeeded" and done.attempts == 1
    assert done.result["summary"] == "Pipeline q1 finished: gather, write, draw."
    assert [e["effect"] for e in kit.effects(log)] == ["gather", "write", "draw"]
    assert [e["key"] for e in kit.effects(log)] == [
        f"job-{job.id}:{s}" for s in ("gather", "write", "draw")
    ]
    assert [s["function_name"] for s in steps] == ["gather", "write", "draw"]
    notes = [e["note"] for e in await store.events(job.id)]
    assert notes == ["queued for the runner", f"started by runner {runner.executor_id}", None]


async def test_cancel_goes_through_dbos_and_stops_the_running_job(store, registry, settings):
    async with running(store, registry, settings):
        job = await queue(store, settings, "experiment", name="long", seconds=60)
        await wait_for(store, lambda: _status(store, job.id, "running"), 20)
        cancelled = await cancel_job(store, job.id, by="operator")
        assert cancelled.status == "cancelled" and cancelled.delivered_at is not None
        states = await client_for(settings).statuses(job.id)
        assert states == [(workflow_id(job.id), "CANCELLED")]
        with pytest.raises(NotCancellable):  # a second cancel: finished (the 409 rule)
            await cancel_job(store, job.id, by="operator")
        # The body stops within the runner's watch (kit's experiment records its progress).
        await asyncio.sleep(1.5)
        before = (await store.get(job.id)).progress
        await asyncio.sleep(1.5)
        assert (await store.get(job.id)).progress == before
    assert (await store.get(job.id)).status == "cancelled"


async def test_a_cancelled_queued_job_never_runs(store, registry, settings):
    job = await queue(store, settings, "experiment", name="never", seconds=0)
    await cancel_job(store, job.id, by="operator")
    async with running(store, registry, settings):
        await asyncio.sleep(10 * settings.runner_poll_seconds)
    task = await store.get(job.id)
    assert task.status == "cancelled" and task.attempts == 0 and task.started_at is None


async def test_retry_forks_from_the_failed_step(store, registry, settings, tmp_path, monkeypatch):
    log = tmp_path / "effects.jsonl"
    monkeypatch.setenv(kit.EFFECTS, str(log))
    monkeypatch.setenv("FRONTDESK_TEST_FAIL_STEP", "write")
    async with running(store, registry, settings):
        job = await queue(store, settings, "pipeline", name="r")
        failed = await finished(store, job.id)
        assert failed.status == "failed" and "internal error" in failed.error
        with pytest.raises(NotRetryable):
            await retry_job(
                store,
                (await queue(store, settings, "experiment", name="x", seconds=0)).id,
                by="operator",
            )
        monkeypatch.delenv("FRONTDESK_TEST_FAIL_STEP")
        queued = await retry_job(store, job.id, by="operator")
        assert queued.status == "queued" and queued.error is None
        done = await finished(store, job.id)
    assert done.status == "succeeded" and done.attempts == 2
    # gather finished before the failure and was not done again; write ran twice (it failed).
    assert [e["effect"] for e in kit.effects(log)] == ["gather", "write", "write", "draw"]
    runs = await client_for(settings).statuses(job.id)
    assert [s for _, s in runs] == ["SUCCESS", "SUCCESS"]


async def test_a_row_whose_enqueue_was_lost_is_run_by_reconciliation(store, registry, settings):
    job = await queue(store, settings, "experiment", enqueue=False, name="orphan", seconds=0)
    async with running(store, registry, settings):
        done = await finished(store, job.id)
    assert done.status == "succeeded" and done.attempts == 1
    assert [w for w, _ in await client_for(settings).statuses(job.id)] == [workflow_id(job.id)]


async def test_a_job_with_an_unknown_tool_fails_once(store, registry, settings):
    async with running(store, registry, settings):
        job = await queue(store, settings, "vanished")
        done = await finished(store, job.id)
    assert done.status == "failed" and "no background tool named 'vanished'" in done.error


async def test_step_and_sleep_outside_a_runner_just_run(store):
    ctx = ToolContext("ada", None, 1, None, "k", store=store)

    async def twice(x: int) -> int:
        return 2 * x

    assert await ctx.step("a", twice, 4) == 8
    assert await ctx.step("b", lambda x: x + 1, 1) == 2
    loop = asyncio.get_running_loop()
    start = loop.time()
    await ctx.sleep(0.05)
    assert loop.time() - start >= 0.05


def test_dbos_tables_never_share_the_main_sqlite_file():
    assert derived_system_url("sqlite+aiosqlite:///data/frontdesk.db") == (
        "sqlite:///data/frontdesk.dbos.db"
    )
    assert derived_system_url("postgresql+asyncpg://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert QUEUE == "frontdesk-jobs"


async def _status(store, task_id, status):
    return (await store.get(task_id)).status == status


async def test_the_report_job_runs_as_three_recorded_steps(store, registry, settings, tmp_path):
    row = await store.create(
        caller="ada", tool="generate_report", pattern="background", department="reports",
        plugin="reports", args={"kind": "activity", "period": "this-month"},
    )  # fmt: skip
    async with running(store, registry, settings):
        await client_for(settings).enqueue(row.id)
        done = await finished(store, row.id)
        steps = await asyncio.to_thread(
            client_for(settings)._get().list_workflow_steps, workflow_id(row.id)
        )
    assert done.status == "succeeded", done.error
    assert [s["function_name"] for s in steps] == [
        "gather", "write csv", "draw chart",
    ]  # fmt: skip
    assert done.result["files"]["csv"].endswith(f"task{row.id}.csv")


async def test_a_running_row_from_before_dbos_is_queued_again_and_run(store, registry, settings):
    """A background row the home-made runner left running (an expired lease, no workflow)."""
    row = await store.create(
        caller="ada", tool="experiment", pattern="background", department="lab", plugin="kit",
        args={"name": "legacy", "seconds": 0}, status="running",
        lease_owner="runner:old:1:abc", lease_seconds=-1,
    )  # fmt: skip
    async with running(store, registry, settings):
        done = await finished(store, row.id)
    assert done.status == "succeeded" and done.attempts == 2
    notes = [e["note"] for e in await store.events(row.id)]
    assert "re-queued: no workflow runs it" in notes


async def test_two_forks_of_one_retry_run_it_once(store, registry, settings, monkeypatch):
    """A retry whose fork was made twice (two runners reconciling at once): one runs."""
    kit.calls.clear()
    async with running(store, registry, settings):
        job = await queue(store, settings, "experiment", name="f", seconds=0)
        assert (await finished(store, job.id)).status == "succeeded"
        await store.transition(job.id, "failed", expect=("succeeded",), error="pretend")
        await store.retry(job.id, by="operator")
        client = client_for(settings)
        await asyncio.gather(client.retry(job.id), client.retry(job.id))
        done = await finished(store, job.id)
        await asyncio.sleep(20 * settings.runner_poll_seconds)
    assert done.status == "succeeded" and kit.calls["experiment"] == 2  # first run + one retry
    assert (await store.get(job.id)).attempts == 2


def test_workflows_dbos_cannot_start_as_it_stops_are_counted_not_logged(caplog):
    """DBOS.destroy can race its queue thread: a workflow dequeued in that moment fails with
    "cannot schedule new futures after shutdown" (it stays PENDING for the next runner). The
    runner counts those instead of letting DBOS print a traceback for each; other lines pass."""
    from frontdesk.core.jobs import late_starts

    dbos_log = logging.getLogger("dbos")
    with caplog.at_level(logging.WARNING, logger="dbos"), late_starts() as late:
        for _ in range(2):
            try:
                raise RuntimeError("cannot schedule new futures after shutdown")
            except RuntimeError as exc:
                dbos_log.error("Exception encountered in asynchronous workflow:", exc_info=exc)
        dbos_log.warning("Asyncio task cancelled for workflow")
    assert late.count == 2
    assert [r.getMessage() for r in caplog.records] == ["Asyncio task cancelled for workflow"]
    assert late not in dbos_log.filters  # only while DBOS is being destroyed
