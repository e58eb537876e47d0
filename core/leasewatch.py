"""Which in-turn leases nobody renews, judged without comparing clocks across processes.

A call process renews its turns' leases every third of the lease (agents/runtime.py); each
renewal writes a new ``lease_expires_at`` (by the database's clock, db/hotpath.py ``DbNow``).
A runner (core/runner.py ``recover``) closes the rows of a call process that died. It does not
decide that by comparing ``lease_expires_at`` with a clock: on SQLite the "database's clock" is
each process's own, so a call process an hour behind would look dead to a correct runner, and
a runner an hour ahead would fail every live turn (issue 23: 15 of 15). Instead it watches the
value: a lease still holding the value this runner saw a full lease ago, on this runner's own
monotonic clock, was not renewed by anyone, whatever any wall clock says.

Time only counts while this runner could read the store: after an outage (nobody could renew
meanwhile) every live holder gets a full lease to renew again before anything is judged, as the
takeover sweeper does for runners (core/takeover.py). The close itself is compare-and-set on the
exact lease value judged, so a holder that renews at the last moment keeps its turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frontdesk.db.records import Task


@dataclass
class LeaseWatch:
    lease_seconds: float
    clock: Callable[[], float] = time.monotonic
    # task id -> (the lease value seen, when it was first seen with that value)
    seen: dict[int, tuple[datetime | None, float]] = field(default_factory=dict)
    healthy_since: float | None = None

    def store_failed(self) -> None:
        """The store could not be read: nobody could renew meanwhile, so start over."""
        self.seen.clear()
        self.healthy_since = None

    def stale(self, rows: Iterable[Task]) -> list[Task]:
        """Of the leased rows read just now, those nobody renewed for a full lease."""
        now = self.clock()
        if self.healthy_since is None:
            self.healthy_since = now
        current: dict[int, tuple[datetime | None, float]] = {}
        out: list[Task] = []
        for task in rows:
            before = self.seen.get(task.id)
            if before is None or before[0] != task.lease_expires_at:
                current[task.id] = (task.lease_expires_at, now)
                continue
            current[task.id] = before
            since = max(before[1], self.healthy_since)
            if now - since >= self.lease_seconds:
                out.append(task)
        self.seen = current  # rows that finished or were closed are forgotten
        return out
