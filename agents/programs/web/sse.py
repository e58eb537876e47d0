"""Live task events for the console: one watcher per app, fanned out to every SSE client.

``EventHub`` waits on the store's cheap change watch (db/watch.py), reads the task_events past
its cursor once per wake, and puts each new event on every subscriber's queue; an idle console
with fifty clients costs one ``PRAGMA data_version`` (or one idle LISTEN) per interval, not
fifty query loops.

On Postgres an event id is taken at INSERT and becomes visible at COMMIT, so id 101 can be seen
before id 100. The hub remembers the ids it skipped over (gaps) for ``GAP_SECONDS`` and asks
for them again at each wake; a gap that never fills was a rolled-back transaction.

``stream`` is one client: with a ``Last-Event-ID`` it first replays the log after that id
from the database, then follows the hub, de-duplicating by id. A client that falls more than
``QUEUE_SIZE`` events behind is closed, and its browser reconnects with its last id and replays.
A client that asks for ``changes`` also gets a ``change`` event (no id, no data) whenever the
store may have changed in a way task events do not show (a call started, handed off, ended):
on SQLite when ``PRAGMA data_version`` moves, on Postgres at each NOTIFY and fallback wake.

A database that stops answering ends each stream (its browser reconnects and replays from its
last id) and is logged once, not once per wake. ``close_streams`` ends every stream at once,
so the server can stop without waiting for clients that never hang up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from frontdesk.agents.programs.web.errors import one_line
from frontdesk.db.store import TaskStore
from frontdesk.db.watch import ChangeWatch

log = logging.getLogger("frontdesk.web.sse")

GAP_SECONDS = 30.0
MAX_GAP_SPAN = 1000  # a jump wider than this is not a handful of in-flight transactions
QUEUE_SIZE = 1000
HEARTBEAT_SECONDS = 15.0
PAGE = 500

Entry = dict[str, Any]
_CLOSED: Entry = {}  # put on a queue to end its stream
CHANGE: Entry = {"change": True}  # put on the queues of clients that asked for changes


class EventHub:
    def __init__(self, store: TaskStore, watch: ChangeWatch) -> None:
        self.store = store
        self.watch = watch
        self.cursor = 0
        self.gaps: dict[int, float] = {}  # skipped id -> when it was first missed
        self.subscribers: set[asyncio.Queue[Entry]] = set()
        self.watchers: set[asyncio.Queue[Entry]] = set()  # subscribers that want changes
        self.reads = 0
        self.closing = False
        self.failing = False
        self._task: asyncio.Task[None] | None = None
        self._poke = asyncio.Event()

    async def start(self) -> None:
        self.cursor = await self.store.last_event_id()
        self._task = asyncio.create_task(self._run(), name="frontdesk.web.events")

    def poke(self) -> None:
        """Read now (this process just wrote, e.g. a cancel from the console)."""
        self._poke.set()

    def subscribe(self, changes: bool = False) -> asyncio.Queue[Entry]:
        queue: asyncio.Queue[Entry] = asyncio.Queue(QUEUE_SIZE)
        if self.closing:
            queue.put_nowait(_CLOSED)
            return queue
        self.subscribers.add(queue)
        if changes:
            self.watchers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Entry]) -> None:
        self.subscribers.discard(queue)
        self.watchers.discard(queue)

    def close_streams(self) -> None:
        """End every stream now, and any that opens from here on (the server is stopping)."""
        self.closing = True
        for queue in list(self.subscribers):
            _close(queue)
        self.subscribers.clear()
        self.watchers.clear()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self.close_streams()
        await self.watch.aclose()

    async def _run(self) -> None:
        while True:
            waiter = asyncio.ensure_future(self.watch.wait())
            poked = asyncio.ensure_future(self._poke.wait())
            try:
                await asyncio.wait([waiter, poked], return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                poked.cancel()
            changed = (
                waiter.done()
                and not waiter.cancelled()
                and waiter.exception() is None
                and bool(waiter.result())
            )
            self._poke.clear()
            try:
                await self.read()
            except Exception as exc:
                if not self.failing:
                    log.warning(
                        "reading task events failed (%s); retrying at each wake", one_line(exc)
                    )
                self.failing = True
                for queue in list(self.subscribers):  # each browser reconnects and replays
                    self.unsubscribe(queue)
                    _close(queue)
                continue
            if self.failing:
                log.warning("reading task events again")
                self.failing = False
            if changed or not self.watch.sqlite:
                for queue in list(self.watchers):
                    with contextlib.suppress(asyncio.QueueFull):
                        queue.put_nowait(CHANGE)

    async def read(self) -> int:
        """Fan out every event committed since the last read; returns how many."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        self.gaps = {i: t for i, t in self.gaps.items() if now - t < GAP_SECONDS}
        sent = 0
        while True:
            self.reads += 1
            rows = await self.store.event_log(self.cursor, also=self.gaps, limit=PAGE)
            for entry in rows:
                event_id = entry["id"]
                if event_id in self.gaps:
                    del self.gaps[event_id]
                elif event_id > self.cursor:
                    if event_id - self.cursor <= MAX_GAP_SPAN:
                        for missing in range(self.cursor + 1, event_id):
                            self.gaps.setdefault(missing, now)
                    self.cursor = event_id
                else:
                    continue
                sent += 1
                for queue in list(self.subscribers):
                    try:
                        queue.put_nowait(entry)
                    except asyncio.QueueFull:
                        # Too far behind: end its stream; it resumes from its Last-Event-ID.
                        self.unsubscribe(queue)
                        _close(queue)
            if len(rows) < PAGE:
                return sent


def _close(queue: asyncio.Queue[Entry]) -> None:
    with contextlib.suppress(asyncio.QueueEmpty):
        while queue.full():
            queue.get_nowait()
    queue.put_nowait(_CLOSED)


def format_event(entry: Entry) -> bytes:
    data = json.dumps(entry, separators=(",", ":"), default=str)
    return f"id: {entry['id']}\nevent: task\ndata: {data}\n\n".encode()


async def stream(
    hub: EventHub,
    last_event_id: int | None,
    accept: Callable[[Entry], bool] = lambda _: True,
    heartbeat: float = HEARTBEAT_SECONDS,
    changes: bool = False,
) -> AsyncIterator[bytes]:
    """One SSE client's bytes: a replay after ``last_event_id``, then live events."""
    queue = hub.subscribe(changes)  # before the replay, so nothing falls between the two
    seen: OrderedDict[int, None] = OrderedDict()

    def fresh(entry: Entry) -> bool:
        if entry["id"] in seen:
            return False
        seen[entry["id"]] = None
        if len(seen) > 4 * QUEUE_SIZE:
            seen.popitem(last=False)
        return accept(entry)

    try:
        yield b"retry: 1000\n: connected\n\n"
        after = last_event_id
        while after is not None:
            try:
                rows = await hub.store.event_log(after, limit=PAGE)
            except Exception as exc:
                # The database went away mid-replay: end the stream; the browser retries with
                # the last id it got. (A traceback here would be one per reconnect.)
                log.info("replaying events after %s failed: %s", after, one_line(exc))
                return
            for entry in rows:
                if fresh(entry):
                    yield format_event(entry)
            after = rows[-1]["id"] if len(rows) == PAGE else None
        while True:
            try:
                entry = await asyncio.wait_for(queue.get(), heartbeat)
            except asyncio.TimeoutError:
                yield b": ping\n\n"  # keeps proxies from closing an idle stream
                continue
            if entry is _CLOSED:
                return
            if entry is CHANGE:
                yield b"event: change\ndata: {}\n\n"
                continue
            if fresh(entry):
                yield format_event(entry)
    finally:
        hub.unsubscribe(queue)
