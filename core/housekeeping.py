"""Housekeeping: a plugin's periodic jobs, run by the runner (``register_housekeeping``).

A plugin that keeps state outside the tasks table sometimes has work no call will do: billing
settles a payment left pending when the store or the call process died between the gateway's
charge and the ledger write. The runner must run that work without knowing the plugin, so a
plugin registers a job and the runner runs every job at its start and then on its interval.

Each job is isolated: one that raises or hangs is logged once when it starts failing (and once
when it works again), never once per pass, and never stops the runner or another job.

A job gets a ``HousekeepingContext``: the plugin's ``config``, a ``database`` (the same
``Database`` a tool gets) and the ``hook`` relay, plus two task methods keyed by a tool's
idempotency key, so a job can tell a caller how work their call left in doubt ended, without
touching the store: ``find_task`` and ``settle_task``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

from frontdesk.core.context import Database
from frontdesk.core.execution import stable_key
from frontdesk.core.registry import _impls, _run_hook

if TYPE_CHECKING:
    from frontdesk.core.registry import Registry
    from frontdesk.db.records import Task
    from frontdesk.db.store import TaskStore

log = logging.getLogger("frontdesk.housekeeping")

Job = Callable[["HousekeepingContext"], Awaitable[Any]]
# The shortest interval a job may ask for: a tight loop on the store helps nobody.
MIN_EVERY_SECONDS = 0.05
# A pass that takes longer than this many intervals (at least MIN_TIMEOUT) is cut off.
TIMEOUT_INTERVALS = 4
MIN_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Registration:
    plugin: str
    name: str
    fn: Job
    every_seconds: float


@dataclass
class HousekeepingContext:
    """What a housekeeping job gets, once per pass (the same object every pass).

    - ``plugin``: the plugin's name; ``config``: its settings instance (or None);
    - ``database``: SQL on the frontdesk database for the plugin's own tables (``Database``);
    - ``hook``: the plugin manager's hook relay, as tools get it in ``ctx.hook``;
    - ``find_task(idempotency_key)`` and ``settle_task(...)``: the outcome of a tool call,
      by the key the tool was given as ``ctx.idempotency_key``.
    """

    plugin: str
    config: Any
    hook: Any
    store: InitVar[TaskStore]
    database: Database = field(init=False, repr=False)

    def __post_init__(self, store: TaskStore) -> None:
        self.database = Database(store)
        self._store = store

    async def find_task(self, idempotency_key: str) -> Task | None:
        """The newest task row of the tool call whose ``ctx.idempotency_key`` was this (a
        caller's retry of the same call is a row of its own under the same key), or None."""
        rows = await self._rows(idempotency_key)
        return rows[0] if rows else None

    async def settle_task(
        self, idempotency_key: str, *, succeeded: bool, message: str
    ) -> Task | None:
        """Write how a tool call left in doubt ended, for its caller to hear as a follow-up.

        For the call whose ``ctx.idempotency_key`` was this: when its newest row ended failed
        or cancelled (the caller heard "being confirmed", or the call process died), that row
        becomes ``succeeded`` with ``message`` as its result, or stays ``failed`` with
        ``message`` as its caller-safe error, and is marked untold, so the caller's live call
        (now or their next) speaks it when idle. Returns the row, or None when there is
        nothing to say: no row, a row still running (the call answers itself), an attempt
        that already succeeded (the caller heard it), or this same outcome already written.
        Compare-and-set on the row's status, so a late write from the call changes nothing.
        """
        rows = await self._rows(idempotency_key)
        if not rows or any(t.status in ("succeeded", "running", "queued") for t in rows):
            return None
        task = rows[0]
        if not succeeded and task.error == message:
            return None  # already settled so (a pass repeated after a partial write)
        values: dict[str, Any] = {"delivered_at": None}
        if succeeded:
            values.update(result=message, error=None)
        else:
            values.update(error=message)
        return await self._store.transition(
            task.id,
            "succeeded" if succeeded else "failed",
            expect=(task.status,),
            note=f"settled by {self.plugin}: " + ("succeeded" if succeeded else "failed"),
            **values,
        )

    async def _rows(self, key: str) -> list[Task]:
        from sqlalchemy import or_, select

        from frontdesk.db.models import Task as TaskRow
        from frontdesk.db.records import Task

        tasks = TaskRow.__table__
        stmt = (
            select(tasks)
            .where(or_(tasks.c.idempotency_key == key, tasks.c.idempotency_key.like(f"{key}#%")))
            .order_by(tasks.c.id.desc())
        )
        async with self._store.read_engine.connect() as conn:
            rows = [Task.from_row(r) for r in (await conn.execute(stmt)).all()]
        # LIKE's "_" matches any character: keep the rows of exactly this key.
        return [t for t in rows if stable_key(t.idempotency_key or "") == key]


def collect(registry: Registry) -> list[Registration]:
    """Every plugin's jobs (``register_housekeeping``); a plugin whose hook raises, or that
    registers something invalid, is reported in its errors and its jobs are left out."""
    found: list[Registration] = []
    for impl in _impls(registry, "register_housekeeping"):
        info = registry.plugins[impl.plugin_name]
        staged: list[tuple[Any, Any, Any]] = []

        def register(name: Any, fn: Any, every_seconds: Any, _s: list[Any] = staged) -> None:
            _s.append((name, fn, every_seconds))

        config = registry.configs.get(info.name)
        if not _run_hook(
            registry, info, impl, "register_housekeeping", register=register, config=config
        ):
            continue
        for name, fn, every_seconds in staged:
            ok = (
                isinstance(name, str)
                and name
                and callable(fn)
                and isinstance(every_seconds, (int, float))
                and every_seconds >= MIN_EVERY_SECONDS
            )
            if not ok:
                info.errors.append(
                    f"register_housekeeping: invalid job {name!r} (needs a name, an async "
                    f"fn(ctx) and every_seconds >= {MIN_EVERY_SECONDS})"
                )
                continue
            found.append(Registration(info.name, name, fn, float(every_seconds)))
    return found


class Housekeeper:
    """Runs the registered jobs: each at once, then every ``every_seconds``, until ``stop``."""

    def __init__(self, store: TaskStore, registry: Registry) -> None:
        self.jobs = collect(registry)
        self.contexts = {
            job.plugin: HousekeepingContext(
                plugin=job.plugin,
                config=registry.configs.get(job.plugin),
                hook=registry.pm.hook,
                store=store,
            )
            for job in self.jobs
        }
        self.passes: dict[str, int] = {}  # "plugin.name" -> passes that finished

    async def run(self, stop: asyncio.Event) -> None:
        if not self.jobs:
            return
        loops = [asyncio.ensure_future(self._loop(job, stop)) for job in self.jobs]
        try:
            await asyncio.gather(*loops)
        finally:
            for loop in loops:
                loop.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*loops, return_exceptions=True)

    async def _loop(self, job: Registration, stop: asyncio.Event) -> None:
        label = f"{job.plugin}.{job.name}"
        ctx = self.contexts[job.plugin]
        timeout = max(job.every_seconds * TIMEOUT_INTERVALS, MIN_TIMEOUT_SECONDS)
        failing = False
        while not stop.is_set():
            try:
                await asyncio.wait_for(job.fn(ctx), timeout)
            except Exception as exc:
                # Once per state change: an outage is one line, not one per pass.
                if not failing:
                    log.warning("housekeeping %s failed: %r; retrying every %gs", label, exc,
                                job.every_seconds)  # fmt: skip
                failing = True
            else:
                if failing:
                    log.info("housekeeping %s works again", label)
                failing = False
                self.passes[label] = self.passes.get(label, 0) + 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), job.every_seconds)
