"""A database outage, logged as state changes: one line when it starts, one every
``STILL_DOWN_EVERY`` seconds while it lasts, one when the database answers again, per process.

Before this, every loop that touches the store (a runner's heartbeat and sweeps, the follow-up
watcher, each caller's tool call, the console's requests) logged its own traceback for each
failure: 110-540 tracebacks per process per outage (issue 23). Now the engines report here
(``track``): SQLAlchemy's ``handle_error`` event for every failed statement or connect, and the
pool's ``checkout`` event (which fires after the pre-ping succeeded) for "answering". Loops ask
``store_down(exc)`` and stay quiet for an outage this module already told; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from frontdesk.db.errors import StoreUnavailable

log = logging.getLogger("frontdesk.store")

STILL_DOWN_EVERY = 30.0
# SQLSTATE classes that mean "cannot reach it now": connection exceptions, insufficient
# resources (too many connections), operator intervention (shutting down, starting up).
_DOWN_STATES = ("08", "53", "57P")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or len(seen) > 10:
            continue
        seen.add(id(e))
        yield e
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]


def store_down(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (rather than a bug)."""
    for e in _chain(exc):
        if isinstance(e, (StoreUnavailable, PoolTimeout, OperationalError, InterfaceError)):
            return True
        if isinstance(e, DBAPIError) and e.connection_invalidated:
            return True
        if isinstance(e, (ConnectionError, TimeoutError, socket.gaierror)):
            return True
        state = str(getattr(e, "sqlstate", None) or getattr(e, "pgcode", None) or "")
        if state.startswith(_DOWN_STATES):
            return True
        if type(e).__module__.startswith(("asyncpg", "psycopg")) and type(e).__name__ in (
            "InterfaceError",
            "ConnectionDoesNotExistError",
            "OperationalError",
        ):
            return True
    return False


def from_database(exc: BaseException) -> bool:
    """Whether ``exc`` itself came from the database layer (not merely has one in its
    chain: a tool's own timeout carries asyncio's TimeoutError, which is no outage)."""
    return isinstance(exc, (SQLAlchemyError, StoreUnavailable, ConnectionError)) or type(
        exc
    ).__module__.startswith(("asyncpg", "psycopg", "sqlite3"))


def one_line(exc: BaseException) -> str:
    """``exc`` as one short line for a log (SQLAlchemy's messages carry the SQL on more)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


class Outage:
    """This process's view of the database: up, or down since when. Thread-safe (DBOS's
    engine reports from its own threads)."""

    def __init__(
        self, *, still_every: float = STILL_DOWN_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.still_every = still_every
        self.clock = clock
        self.down_since: float | None = None
        self.failures = 0
        self.outages = 0
        # Before the database ever answered, a failure is the caller's to report (an operator
        # command's one-line "cannot open database"), so only a long one is logged here.
        self.ever_up = False
        self._told = False
        self._last_line = 0.0
        self._lock = threading.Lock()

    @property
    def is_down(self) -> bool:
        return self.down_since is not None

    def failed(self, exc: BaseException) -> bool:
        """Count a failure; True if it is an outage (logged as a state change, if one),
        False if it is something else (the caller logs it as the bug it is)."""
        if not store_down(exc):
            return False
        with self._lock:
            now = self.clock()
            self.failures += 1
            if self.down_since is None:
                self.down_since = self._last_line = now
                self.failures = 1
                self.outages += 1
                self._told = self.ever_up
                log.log(
                    logging.WARNING if self.ever_up else logging.DEBUG,
                    "the task database is not answering (%s)",
                    one_line(exc),
                )
            elif now - self._last_line >= self.still_every:
                self._last_line = now
                self._told = True
                log.warning(
                    "the task database is still not answering after %.0f s (%d failed "
                    "operations; last: %s)",
                    now - self.down_since,
                    self.failures,
                    one_line(exc),
                )
        return True

    def ok(self) -> None:
        """The database answered."""
        if self.down_since is None:  # the common case: one attribute read
            self.ever_up = True
            return
        with self._lock:
            self.ever_up = True
            if self.down_since is None:
                return
            log.log(
                logging.WARNING if self._told else logging.DEBUG,
                "the task database is answering again after %.0f s (%d failed operations)",
                self.clock() - self.down_since,
                self.failures,
            )
            self.down_since = None

    def reset(self) -> None:
        """Forget any outage without a line (tests, between cases)."""
        with self._lock:
            self.down_since = None
            self.failures = 0


# What a library's log line about its database says when the database is away (DBOS logs
# these from its queue thread at every poll, each with the driver's multi-line message).
_DOWN_WORDS = (
    "connection failed",
    "connection refused",
    "server closed the connection",
    "terminating connection",
    "the database system is",
    "connection is closed",
    "connection timeout expired",
    "too many clients",
    "consuming input failed",
    "connect call failed",
    "connectionrefusederror",
    "connectiondoesnotexisterror",
)


class _OutageFilter(logging.Filter):
    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and store_down(exc):
            self.outage.failed(exc)
            return False
        # stamina's retry lines carry their cause as an extra field.
        text = f"{record.getMessage()} {getattr(record, 'stamina.caused_by', '')}"
        if any(word in text.lower() for word in _DOWN_WORDS):
            self.outage.failed(StoreUnavailable(text.strip().splitlines()[0][:300]))
            return False
        return True


# The process's one outage: every engine and loop of a process reports to it.
OUTAGE = Outage()


def track(sync_engine: Any, outage: Outage = OUTAGE) -> None:
    """Report ``sync_engine``'s (an ``Engine``, or an ``AsyncEngine.sync_engine``) failures
    and successful checkouts to ``outage``."""

    @event.listens_for(sync_engine, "handle_error")
    def _failed(ctx: Any) -> None:
        outage.failed(ctx.sqlalchemy_exception or ctx.original_exception)

    @event.listens_for(sync_engine.pool, "checkout")
    def _answered(*_: Any) -> None:
        outage.ok()


def quiet(logger_name: str, outage: Outage | None = None) -> None:
    """Route a library's outage lines (``logger_name``'s own records) into the outage log
    instead of printing each one; its other lines are untouched."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _OutageFilter) for f in logger.filters):
        logger.addFilter(_OutageFilter(outage or OUTAGE))


__all__ = ["OUTAGE", "Outage", "from_database", "one_line", "quiet", "store_down", "track"]
