"""No job lost to a dead runner: executor ids, heartbeats, and taking over a dead runner's work.

DBOS resumes a workflow only in a process with the executor id that started it, and only at
that process's launch. So each runner:

- takes a unique, stable executor id (``claim_id``): ``FRONTDESK_RUNNER_ID`` if set, else
  ``<hostname>-<n>``, the lowest slot of this host whose process is gone, so a restarted runner
  gets its old id back and DBOS resumes its work at once;
- beats in the ``runners`` table every ``takeover/6`` seconds;
- sweeps every beat: a runner whose beat count has not moved for ``2/3`` of the bound, on this
  process's own monotonic clock (no wall clocks compared across processes), or that stopped,
  has its pending workflows put back on their queue (``reenqueue`` keyed on the dead executor,
  so two sweepers, or a sweeper and the dead runner's own restart, resume a workflow once).

A sweeper that could not beat itself (the database was away) waits two thirds of the bound of
good beats before judging anyone: after an outage every runner's count stood still, and the live
ones must get the time to beat again. A runner judged dead while alive (stalled for the bound)
takes its id back at its next beat and goes on. The bound (``FRONTDESK_RUNNER_TAKEOVER_SECONDS``, default 30) is
the longest a dead runner's job waits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frontdesk.db.outage import OUTAGE
from frontdesk.db.runners import GONE, RUNNING, STOPPED

if TYPE_CHECKING:
    from frontdesk.core.settings import Settings
    from frontdesk.db.store import TaskStore

log = logging.getLogger("frontdesk.runner")

MAX_SLOTS = 64


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def claim_id(store: TaskStore, settings: Settings, version: str) -> str:
    """This runner's executor id (see the module's docstring)."""
    host, pid = socket.gethostname()[:80], os.getpid()
    if settings.runner_id:
        # The operator's promise that no other live runner uses it.
        await store.claim_runner(settings.runner_id, host, pid, version, free=lambda row: True)
        return settings.runner_id

    def free(row: Any) -> bool:
        # Only this host can tell whether one of its processes is gone.
        return row.host == host and (row.state in (STOPPED, GONE) or _process_gone(row.pid))

    for slot in range(MAX_SLOTS):
        candidate = f"{host}-{slot}"
        if await store.claim_runner(candidate, host, pid, version, free=free):
            return candidate
    raise RuntimeError(f"every runner id of host {host} is taken ({MAX_SLOTS})")


@dataclass
class Sweeper:
    store: TaskStore
    me: str
    bound: float
    resume: Any  # callable(executor_id) -> awaitable[int]: put a dead runner's work back
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)
    healthy_since: float | None = None
    beats: int = 0

    @property
    def interval(self) -> float:
        return self.bound / 6

    @property
    def dead_after(self) -> float:
        return self.bound * 2 / 3

    async def beat(self) -> bool:
        """One heartbeat; False when another process holds this runner's id (it must stop).

        A runner judged dead while it lived (its loop or the database stalled for the bound)
        takes its id back and goes on: the jobs it was running may meanwhile have been resumed
        elsewhere, the at-least-once case every step is keyed for."""
        try:
            held = await self.store.beat(self.me)
            if not held:
                held = await self.store.revive_runner(self.me, os.getpid())
                if held:
                    log.warning(
                        "runner %s was judged dead by another runner (no heartbeat for the "
                        "bound); it takes its id back, and jobs it was running may have been "
                        "resumed elsewhere",
                        self.me,
                    )
        except Exception as exc:
            if not OUTAGE.failed(exc):  # an outage is logged once per process (db/outage.py)
                log.warning("runner %s: heartbeat not recorded (%r); will retry", self.me, exc)
            self.healthy_since = None
            return True
        if self.healthy_since is None:
            self.healthy_since = time.monotonic()
        self.beats += 1
        return held

    async def sweep(self) -> list[str]:
        """Take over every runner judged dead; their ids."""
        now = time.monotonic()
        if self.healthy_since is None or now - self.healthy_since < self.dead_after:
            return []
        taken: list[str] = []
        for row in await self.store.runners():
            if row.executor_id == self.me or row.state == GONE:
                continue
            before = self.seen.get(row.executor_id)
            if before is None or before[0] != row.beats:
                self.seen[row.executor_id] = (row.beats, now)
                if row.state != STOPPED:
                    continue
            still = now - self.seen[row.executor_id][1]
            if row.state == RUNNING and still < self.dead_after:
                continue
            # Compare-and-set on the count we judged: a runner that beat since keeps its id.
            if not await self.store.mark_runner(row.executor_id, GONE, beats=row.beats):
                continue
            resumed = await self.resume(row.executor_id)
            why = "stopped" if row.state == STOPPED else f"silent for {still:.0f}s"
            log.warning(
                "runner %s took over runner %s (%s): %d workflow(s) resumed",
                self.me, row.executor_id, why, resumed,
            )  # fmt: skip
            taken.append(row.executor_id)
        return taken


async def every(seconds: float, stop: asyncio.Event) -> bool:
    """Wait ``seconds`` or until ``stop``; True while the runner goes on."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        return True
    return False
