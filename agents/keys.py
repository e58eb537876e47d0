"""Idempotency keys of tool calls, and the window that makes a repeat "the same call again".

A critical call's key is ``<digest>.<ms>-<rand>``: the digest of caller, tool and arguments,
the time of the first attempt in milliseconds, and a random tail, so two logical calls never
share a key however clocks move (a gateway's or a ledger's key is never reused to charge again).
A retry's row is ``<key>#<ms>-<rand>``: the same logical key (``stable_key``), its own time.

The time is the database's clock, not the process's (db/clock.py): on Postgres the server's
``clock_timestamp()``, asked on each critical call (one round trip), so call processes on one
Postgres judge the window alike whatever their own clocks say; on SQLite, whose clock is the
one machine's, read once per process and then advanced by the monotonic clock, so a
wall-clock step (an NTP step) neither opens nor closes the window. A repeat within ``idempotency_window_seconds`` by that clock
is the same call again (replayed, never redone). Rows are looked for over ``KEYS_KEPT``
(24 h, as Stripe keeps keys) by their stored ``created_at``, which is only a bound for the
index; the window itself is judged on the times in the keys.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
import weakref
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from frontdesk.core.execution import stable_key
from frontdesk.db.clock import database_now

if TYPE_CHECKING:
    from frontdesk.db.store import Task, TaskStore

KEYS_KEPT = timedelta(hours=24)
# How often a process reads the database's clock again, to follow its slow drift. A step of
# the database's clock between two reads is followed at the next read, not at once.
REFRESH_SECONDS = 3600.0


class DatabaseClock:
    """The database's clock, read once and then counted on the monotonic clock."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._anchor: tuple[datetime, float] | None = None
        self._lock = asyncio.Lock()

    async def now(self) -> datetime:
        if self._store.dialect != "sqlite":
            # A server's clock is one round trip away (a fraction of a millisecond), and
            # asking it each time holds even when this process's every clock is stepped
            # (libfaketime moves the monotonic clock too unless told not to).
            anchor = await self._read(None, force=True)
            return anchor[0]
        anchor = self._anchor
        if anchor is None or time.monotonic() - anchor[1] > REFRESH_SECONDS:
            anchor = await self._read(anchor)
        at, mono = anchor
        return at + timedelta(seconds=time.monotonic() - mono)

    async def _read(
        self, old: tuple[datetime, float] | None, force: bool = False
    ) -> tuple[datetime, float]:
        if force:
            at = await database_now(self._store.read_engine)
            self._anchor = (at, time.monotonic())
            return self._anchor
        async with self._lock:
            if self._anchor is not old and self._anchor is not None:
                return self._anchor  # another task read it meanwhile
            before = time.monotonic()
            try:
                at = await database_now(self._store.read_engine)
            except Exception:
                if old is None:
                    raise  # no clock yet: the store is down, and so is the call's next write
                return old  # keep counting from the last reading
            self._anchor = (at, (before + time.monotonic()) / 2)
            return self._anchor


_clocks: weakref.WeakKeyDictionary[Any, DatabaseClock] = weakref.WeakKeyDictionary()


def clock_for(store: TaskStore) -> DatabaseClock:
    """This process's reading of ``store``'s database clock."""
    clock = _clocks.get(store)
    if clock is None:
        clock = _clocks[store] = DatabaseClock(store)
    return clock


def digest(caller: str, tool: str, args: dict[str, Any]) -> str:
    canonical = json.dumps([caller, tool, args], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _stamp(now: datetime) -> str:
    return f"{int(now.timestamp() * 1000)}-{secrets.token_hex(3)}"


def fresh(digest_: str, now: datetime) -> str:
    """A new logical call's key."""
    return f"{digest_}.{_stamp(now)}"


def attempt(base: str, now: datetime) -> str:
    """A retry's row key: the logical call's key, then this attempt's own time."""
    return f"{base}#{_stamp(now)}"


def key_time(row_key: str) -> datetime | None:
    """When the row was made, by the database's clock as its key says; None for a key of
    another shape (rows from before keys carried the time)."""
    tail = row_key.split("#", 1)[1] if "#" in row_key else row_key.rpartition(".")[2]
    head = tail.split("-", 1)[0]
    if "-" not in tail or not head.isdigit():
        return None
    return datetime.fromtimestamp(int(head) / 1000, timezone.utc)


def same_call(found: list[Task], now: datetime, window_seconds: float) -> list[Task]:
    """Of the rows found for one digest (newest first), those of the logical call a repeat
    now belongs to: the newest call with an attempt inside the window by the database's
    clock (a row of another shape falls back to its ``created_at``). Empty: a new call."""
    since = now - timedelta(seconds=window_seconds)
    for task in found:
        made = key_time(task.idempotency_key or "") or task.created_at
        if made is not None and made >= since:
            base = stable_key(task.idempotency_key or "")
            return [t for t in found if stable_key(t.idempotency_key or "") == base]
    return []
