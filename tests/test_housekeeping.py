"""register_housekeeping: plugins' periodic jobs, run by the runner, isolated from each other,
and the context's task methods (find_task, settle_task) that tell a caller how a call ended."""

from __future__ import annotations

import asyncio
import logging

import pytest
from jobkit import running

from frontdesk.core import hookimpl, host
from frontdesk.core.housekeeping import Housekeeper, HousekeepingContext
from frontdesk.db.store import wait_for


class Chores:
    """A plugin with a steady job, a job that fails three passes then works, and junk."""

    def __init__(self) -> None:
        self.ticks = 0
        self.flaky = 0
        self.seen: list[HousekeepingContext] = []

    @hookimpl
    def register_housekeeping(self, register):
        register("tick", self.tick, 0.05)
        register("flaky", self.flaky_job, 0.05)
        register("", self.tick, 1.0)  # no name: reported, left out
        register("fast", self.tick, 0.001)  # too tight a loop: reported, left out

    async def tick(self, ctx):
        self.seen.append(ctx)
        self.ticks += 1

    async def flaky_job(self, ctx):
        self.flaky += 1
        if self.flaky <= 3:
            raise ConnectionError("store is down")


async def test_hook_register_housekeeping(settings, store, caplog):
    chores = Chores()
    registry = host.load(settings, extra=[("chores", chores)])
    keeper = Housekeeper(store, registry)
    assert [j.name for j in keeper.jobs if j.plugin == "chores"] == ["tick", "flaky"]
    assert ("billing", "reconcile_payments") in [(j.plugin, j.name) for j in keeper.jobs]
    errors = registry.plugins["chores"].errors
    assert len(errors) == 2 and all("invalid job" in e for e in errors)
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="frontdesk.housekeeping")
    task = asyncio.create_task(keeper.run(stop))
    assert await wait_for(store, lambda: _at_least(chores, 5), timeout=10)
    stop.set()
    await asyncio.wait_for(task, 10)
    ctx = chores.seen[0]
    assert ctx.plugin == "chores" and ctx.database.dialect == "sqlite" and ctx.hook is not None
    lines = [r.getMessage() for r in caplog.records if "chores.flaky" in r.getMessage()]
    # One line when it starts failing, one when it works again: not one per failed pass.
    assert len(lines) == 2, lines
    assert "failed" in lines[0] and "works again" in lines[1]
    assert keeper.passes["chores.tick"] >= 5


async def _at_least(chores: Chores, n: int) -> bool:
    return chores.ticks >= n and chores.flaky > 4


async def test_the_runner_runs_housekeeping_at_its_start(settings, store):
    ran = asyncio.Event()

    class Plugin:
        @hookimpl
        def register_housekeeping(self, register, config):
            async def job(ctx):
                ran.set()

            register("once", job, 3600)

    registry = host.load(settings, extra=[("p", Plugin())])
    async with running(store, registry, settings):
        await asyncio.wait_for(ran.wait(), 15)


async def _critical(store, key: str, status: str = "running", **values):
    row = await store.create(
        caller="ada", tool="pay_invoice", pattern="critical", status="running",
        idempotency_key=key,
    )  # fmt: skip
    if status != "running":
        row = await store.transition(row.id, status, delivered_at=row.created_at, **values)
    return row


@pytest.mark.backends("sqlite", "postgres")
async def test_settle_task_tells_the_caller_how_a_call_in_doubt_ended(settings, store):
    ctx = HousekeepingContext(plugin="billing", config=None, hook=None, store=store)
    assert await ctx.settle_task("nokey", succeeded=True, message="x") is None
    first = await _critical(store, "k1", "failed", error="being confirmed")
    retry = await _critical(store, "k1#2", "failed", error="being confirmed")
    await _critical(store, "k1x", "failed", error="another call")  # not the same key
    assert (await ctx.find_task("k1")).id == retry.id
    settled = await ctx.settle_task("k1", succeeded=True, message="The payment went through.")
    assert settled.id == retry.id and settled.status == "succeeded"
    assert settled.result == "The payment went through." and settled.delivered_at is None
    assert [t.id for t in await store.pending_followups(["ada"])] == [retry.id]
    assert (await store.get(first.id)).status == "failed"
    # Settled once: again, nothing changes (no second follow-up).
    assert await ctx.settle_task("k1", succeeded=True, message="again") is None
    # A call still running answers for itself; nothing is written.
    await _critical(store, "k2")
    assert await ctx.settle_task("k2", succeeded=False, message="no") is None
    # A release is said once, too.
    await _critical(store, "k3", "failed", error="being confirmed")
    done = await ctx.settle_task("k3", succeeded=False, message="Nothing was charged.")
    assert done.status == "failed" and done.error == "Nothing was charged."
    assert await ctx.settle_task("k3", succeeded=False, message="Nothing was charged.") is None
