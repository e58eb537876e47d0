"""Stats without freezing the console.

Outcomes are a full aggregate over the window's finished tasks (0.7 s at 100k rows on SQLite).
Run on the store's one read connection, each call held every listing, task page and SSE read
behind it, and forty at once ran the pool dry. So here:

- they run on an engine of their own (its own SQLite connection, on its own thread: SQLite lets
  readers run side by side in WAL mode), never the read engine the listings use;
- concurrent requests for one window share one computation (single flight), and its answer
  is kept ``TTL`` seconds; at most one aggregate runs at a time;
- a request waits at most ``WAIT`` seconds for the answer, then is told 503 with Retry-After;
- the answer is serialized once, when computed: forty clients polling a cached answer cost
  forty copies of the same bytes, not forty validations and encodings on the event loop that
  the listings share.

The answer says when it was computed (``computed_at``), so a cached figure is never passed off
as live.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from frontdesk.agents.programs.web.errors import Busy
from frontdesk.agents.programs.web.inputs import parse_window
from frontdesk.db.browse import outcomes
from frontdesk.db.engine import create_engine


@dataclass(frozen=True)
class Answer:
    data: dict[str, Any]
    body: bytes


TTL = 10.0
WAIT = 20.0
FINISHED = ("succeeded", "failed", "cancelled")


def failure_rate(counts: dict[str, int]) -> float | None:
    """Failed over succeeded plus failed; a cancel (mostly a caller who moved on) is neither."""
    done = counts.get("succeeded", 0) + counts.get("failed", 0)
    return counts.get("failed", 0) / done if done else None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals, and per (department, tool): counts by status, failure rate, and the median and
    p95 of successful runs."""
    totals: dict[str, int] = dict.fromkeys(FINISHED, 0)
    tools: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {**dict.fromkeys(FINISHED, 0), "median_seconds": None, "p95_seconds": None}
    )
    for r in rows:
        totals[r["status"]] += r["count"]
        entry = tools[(r["department"], r["tool"])]
        entry[r["status"]] += r["count"]
        if r["status"] == "succeeded":
            entry.update(median_seconds=r["median_seconds"], p95_seconds=r["p95_seconds"])
    return {
        "totals": {**totals, "failure_rate": failure_rate(totals)},
        "tools": [
            {"department": d, "tool": t, **e, "failure_rate": failure_rate(e)}
            for (d, t), e in sorted(tools.items())
        ],
    }


class StatsService:
    def __init__(self, url: str, ttl: float | None = None, wait: float | None = None) -> None:
        self.url = url
        self.ttl = TTL if ttl is None else ttl  # read at start: the bench sets the module's
        self.wait = WAIT if wait is None else wait
        self.engine: AsyncEngine | None = None
        self.computed = 0  # how many aggregates ran (tests and the bench read it)
        self._cache: dict[str, tuple[float, Answer]] = {}
        self._flights: dict[str, asyncio.Future[Answer]] = {}
        self._one_at_a_time = asyncio.Lock()

    async def aclose(self) -> None:
        for flight in list(self._flights.values()):
            flight.cancel()
            with contextlib.suppress(BaseException):
                await flight
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None

    async def get(self, window: str) -> dict[str, Any]:
        """The stats of ``window`` ("hour", "day", "week", "all")."""
        return (await self._get(window)).data

    async def get_json(self, window: str) -> bytes:
        """The same, as the JSON the API sends."""
        return (await self._get(window)).body

    async def _get(self, window: str) -> Answer:
        loop = asyncio.get_running_loop()
        cached = self._cache.get(window)
        if cached is not None and loop.time() - cached[0] < self.ttl:
            return cached[1]
        flight = self._flights.get(window)
        if flight is None:
            flight = self._flights[window] = asyncio.ensure_future(self._compute(window))
            flight.add_done_callback(lambda f: self._landed(window, f))
        try:
            return await asyncio.wait_for(asyncio.shield(flight), self.wait)
        except asyncio.TimeoutError:
            raise Busy("the stats are still being computed; try again shortly") from None

    def _landed(self, window: str, flight: asyncio.Future[Answer]) -> None:
        self._flights.pop(window, None)
        if not flight.cancelled():
            flight.exception()  # retrieved, so an error no request waited for is not "lost"

    async def _compute(self, window: str) -> Answer:
        since = parse_window(window)
        async with self._one_at_a_time:
            if self.engine is None:
                self.engine = create_engine(self.url)
            rows = await outcomes(self.engine, since)
            self.computed += 1
        data = {
            "window": window,
            "since": since.isoformat() if since else None,
            "computed_at": datetime.now(timezone.utc).isoformat(),
            "outcomes": rows,
            **summarize(rows),
        }
        answer = Answer(data, json.dumps(data, separators=(",", ":")).encode())
        self._cache[window] = (asyncio.get_running_loop().time(), answer)
        return answer
