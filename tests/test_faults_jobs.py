"""A real Postgres outage under a live runner (issue 23 items 2, 3 and 7): a private postmaster
(tests/pgfault.py) SIGKILLed while a background job finishes and an in-turn call is live,
restarted after an outage longer than the in-turn lease and than the record-retry floor.

- the job's result, written during the outage, is retried until the store is back: the job's
  effect happened once, its row ends succeeded with one start and one end, and DBOS's
  workflow ends SUCCESS (it is never re-run while its runner lives);
- the live call's in-turn row outlives the outage (the runner gives every holder a full lease
  to renew once the store is back), and is closed only once its holder stops renewing;
- the process logs the outage as state changes (one "not answering", one "answering again"),
  with no traceback from frontdesk's loggers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import Counter

import jobkit
import kit
import pgfault
import pytest

from frontdesk.core import Department, ToolContext, hookimpl, tool
from frontdesk.core.host import load
from frontdesk.core.runner import RESTART
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.db.outage import OUTAGE

pytestmark = pytest.mark.faults

LEASE = 1.5
OUTAGE_SECONDS = 4.0  # longer than the lease and than the record floor below

brewed: list[int] = []
release = asyncio.Event()


@tool(pattern="background", timeout=30)
async def brew(ctx: ToolContext, name: str) -> dict:
    """A job whose effect is counted, and which finishes when the test says so."""
    brewed.append(ctx.task_id)
    await release.wait()
    return {"summary": f"{name} brewed"}


@hookimpl
def register_departments(register) -> None:  # noqa: ANN001
    register(Department(name="cellar", description="brews", instructions="You brew.", tools=[brew]))


def settings_for(url: str) -> Settings:
    return Settings(
        database_url=url, load_plugins="", job_lease_seconds=LEASE,
        runner_poll_seconds=0.05, runner_takeover_seconds=3, record_retry_seconds=0.5,
        followup_poll_seconds=0.05,
    )  # fmt: skip


async def renew_while(store, owner: str, task_id: int, alive: asyncio.Event) -> None:
    """A call process's lease loop (agents/runtime.py): every third of the lease, errors
    ignored (the store may be down)."""
    while alive.is_set():
        with contextlib.suppress(Exception):
            await store.renew(owner, LEASE, [task_id])
        await asyncio.sleep(LEASE / 3)


async def until(predicate, timeout: float, what: str):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            value = await predicate()
            if value:
                return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_postgres_kill_during_a_jobs_result_write_neither_loses_nor_doubles_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    brewed.clear()
    release.clear()
    OUTAGE.reset()
    with pgfault.private_postgres() as pg:
        settings = settings_for(pg.url)
        registry = load(settings, extra=[("kit", kit), ("faultkit", sys.modules[__name__])])
        store = await open_store(pg.url, registry)
        call_store = await open_store(pg.url)  # the call process's own store
        alive = asyncio.Event()
        alive.set()
        renewer = None
        try:
            async with jobkit.running(store, registry, settings) as runner:
                live = await call_store.create(
                    caller="ann", tool="lookup", pattern="interruptible", status="running",
                    lease_owner="call:live", lease_seconds=LEASE,
                )  # fmt: skip
                renewer = asyncio.create_task(renew_while(call_store, "call:live", live.id, alive))
                job = await jobkit.queue(store, settings, "brew", name="tea")
                await until(lambda: asyncio.sleep(0, brewed == [job.id]), 30, "the job to run")
                with caplog.at_level(logging.INFO, logger="frontdesk"):
                    pg.kill()
                    down_at = time.monotonic()
                    release.set()  # the job finishes now: its result is written into the outage
                    await asyncio.sleep(OUTAGE_SECONDS)
                    pg.start()
                    done = await jobkit.finished(store, job.id, timeout=60)
                    back_after = time.monotonic() - down_at
                    # A few leases of the runner's housekeeping after the outage: the live
                    # call keeps its row, the finished job stays finished.
                    beats = runner.sweeper.beats if runner.sweeper else 0
                    await until(
                        lambda: asyncio.sleep(0, runner.sweeper.beats >= beats + 6), 60, "beats"
                    )
                    assert (await store.get(live.id)).status == "running"
                    await until(lambda: OUTAGE_back(caplog), 30, "the outage log to say back")
                # Positive control: the holder stops renewing, and the runner closes its row.
                alive.clear()
                closed = await jobkit.in_status(store, live.id, "failed", timeout=60)
                assert closed.error == RESTART
                statuses = await runner.client.statuses(job.id)
        finally:
            alive.clear()
            if renewer is not None:
                renewer.cancel()
            await call_store.close()
            await store.close()
    print(f"job result recorded {back_after:.2f} s after the kill ({OUTAGE_SECONDS} s down)")
    assert brewed == [job.id], "the job ran twice"
    assert done.status == "succeeded" and done.result["summary"] == "tea brewed"
    assert done.attempts == 1
    assert [s for _, s in statuses] == ["SUCCESS"]
    lines = [r for r in caplog.records if r.name.startswith("frontdesk")]
    said = Counter(
        "down" if "not answering (" in r.getMessage()
        else "back" if "answering again" in r.getMessage()
        else "still" if "still not answering" in r.getMessage()
        else "other"
        for r in lines
    )  # fmt: skip
    print(f"outage lines: {dict(said)}; traceback-bearing lines: "
          f"{sum(1 for r in lines if r.exc_info)}")  # fmt: skip
    assert said["down"] == 1 and said["back"] == 1, [r.getMessage() for r in lines]
    assert not [r.getMessage() for r in lines if r.exc_info], "a traceback was logged"


def OUTAGE_back(caplog: pytest.LogCaptureFixture):  # noqa: ANN201, N802
    async def seen() -> bool:
        return any("answering again" in r.getMessage() for r in caplog.records)

    return seen()


@pytest.mark.parametrize("fault", ["kill", "restart-fast"])
def test_two_runners_through_a_postgres_kill_longer_than_the_takeover_bound(tmp_path, fault):
    """Real ``frontdesk runner`` processes with durable 3-step jobs in flight, the postmaster
    SIGKILLed for longer than the takeover bound (3 s), or ``pg_ctl restart -m fast``: after
    the restart no runner judges the other dead (each waits for good beats first), and every
    job finishes once."""
    import crashkit
    import crashtrials
    from test_crash_durable import STEPS, effects_of, q

    log = tmp_path / "effects.jsonl"
    with pgfault.private_postgres() as pg:
        url = pg.url
        crashtrials._queue(url, [])
        env = {kit.EFFECTS: str(log), "FRONTDESK_RUNNER_CONCURRENCY": "3",
               "FRONTDESK_RECORD_RETRY_SECONDS": "0.5"}  # fmt: skip
        a = crashkit.start("runner", "--db", url, **env)
        crashkit.wait_until(lambda: q(url, "SELECT 1 FROM runners"), timeout=60, proc=a)
        b = crashkit.start("runner", "--db", url, **env)
        try:
            crashkit.wait_until(lambda: len(q(url, "SELECT 1 FROM runners")) == 2, 60, b)
            time.sleep(3.0)  # both have beaten a while
            ids = crashtrials._queue(
                url, [(f"c{n}", {"name": f"j{n}", "seconds": 0.7}) for n in range(6)],
                tool="pipeline",
            )  # fmt: skip
            crashkit.wait_until(
                lambda: sum("gather" in effects_of(log, i) for i in ids) >= 3, 60, a
            )
            if fault == "kill":
                pg.kill()
                time.sleep(5.0)  # past the takeover bound
                pg.start()
            else:
                pg.restart_fast()
            crashkit.wait_until(
                lambda: all(s == "succeeded" for (s,) in q(url, "SELECT status FROM tasks")),
                timeout=120,
                proc=b,
            )
            states = q(url, "SELECT state FROM runners")
            rows = q(url, "SELECT id, attempts FROM tasks")
        finally:
            _, err_a = crashkit.stop(a)
            _, err_b = crashkit.stop(b)
    doubled = 0
    for task_id in ids:
        ran = [e for e in effects_of(log, task_id) if e in STEPS]
        doubled += len(ran) - len(set(ran))
        assert set(ran) == set(STEPS), (task_id, ran)
    lines = [line for line in (err_a + err_b).splitlines() if line.strip()]
    print(f"{len(ids)} jobs through a {fault}: {doubled} steps doubled, attempts "
          f"{sorted(a for _, a in rows)}, runners {states}; {len(lines)} log lines:\n"
          + "\n".join(lines))  # fmt: skip
    assert doubled == 0
    assert states == [("running",), ("running",)], states
    assert "Traceback" not in err_a + err_b
