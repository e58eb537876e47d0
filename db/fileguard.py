"""Noticing that a live SQLite database's files were deleted or replaced underneath us.

A process that keeps writing after someone deleted the ``-wal`` (or the ``-shm``, or swapped
the database file for a copy) writes into a file nobody else will ever read: its commits look
fine and are lost, and other processes see rows go back in time (issue 23: 6-19 committed rows
gone, succeeded rows running again, and every running process silent). SQLite cannot tell; the
only sign is that the path now names another inode, or nothing.

So each process records the (st_dev, st_ino) of the database, its ``-wal`` and its ``-shm``
once the store is open, and compares them every ``INTERVAL`` seconds (a thread, so an idle
process notices too) and before every write transaction (three ``os.stat`` calls, a few
microseconds). The first difference trips the guard for good: one critical log line naming
the file, and from then on the writer refuses (``StoreUnavailable``) and the console's health
answers 503. Only a restart, after the operator has put the files right, clears it.

SQLite itself deletes the ``-wal`` and ``-shm`` when the last connection to the database
closes. The guard keeps one idle connection of its own open (the "anchor"), so while this
process lives no other process's close is the last one, and a missing ``-wal`` always means
somebody deleted it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from pathlib import Path

from frontdesk.db.errors import StoreUnavailable

log = logging.getLogger("frontdesk.store")

INTERVAL = 1.0
SUFFIXES = ("", "-wal", "-shm")

_Identity = tuple[int, int]


def _identity(path: str) -> _Identity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class FileGuard:
    """One database file's guard, shared by every store on it in this process (``acquire``)."""

    def __init__(self, path: str, interval: float = INTERVAL) -> None:
        self.path = path
        self.interval = interval
        self.problem: str | None = None
        self._seen: dict[str, _Identity | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._anchor: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._users = 0

    def start(self) -> None:
        """Open the anchor, record the files as they are now, and start watching."""
        with contextlib.suppress(sqlite3.Error):
            anchor = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            # A read makes the connection open the -wal and -shm and keep them (and a shared
            # lock) until it closes: see the module docstring.
            anchor.execute("SELECT count(*) FROM sqlite_master").fetchall()
            self._anchor = anchor
        self._seen = {self.path + s: _identity(self.path + s) for s in SUFFIXES}
        self._thread = threading.Thread(
            target=self._watch, name=f"frontdesk.fileguard:{Path(self.path).name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 1)
        if self._anchor is not None:
            with contextlib.suppress(sqlite3.Error):
                self._anchor.close()
            self._anchor = None

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            if self.look() is not None:
                return

    def look(self) -> str | None:
        """Compare the files with what was recorded; the problem (once found, for good)."""
        if self.problem is not None:
            return self.problem
        for path, before in self._seen.items():
            now = _identity(path)
            if now == before:
                continue
            if before is None:
                # Not there when the store opened (a -wal only appears with the first reader):
                # its first sighting is the file from now on.
                self._seen[path] = now
                continue
            # A deleted -wal is soon created again by any new connection: "replaced" then.
            what = "deleted" if now is None else "deleted or replaced (another file has its name)"
            self._trip(path, what)
            return self.problem
        return None

    def _trip(self, path: str, what: str) -> None:
        with self._lock:
            if self.problem is not None:
                return
            self.problem = (
                f"database file {path} was {what} while in use; this process no longer writes "
                "to the database (restart every frontdesk process on it once the files are put "
                "right; docs/deploy.md)"
            )
        log.critical(
            "%s: committed work in the old file may be lost; writes are refused from now on",
            self.problem,
        )

    def check(self) -> None:
        """Before a write: ``StoreUnavailable`` if the files are not the ones we opened."""
        problem = self.look()
        if problem is not None:
            raise StoreUnavailable(problem)


_guards: dict[str, FileGuard] = {}
_registry_lock = threading.Lock()


def acquire(path: str, interval: float = INTERVAL) -> FileGuard | None:
    """The guard on the SQLite database at ``path`` (started on first use), or None when the
    file does not exist (nothing to guard yet). Pair with ``release``."""
    key = os.path.realpath(path)
    if not os.path.exists(key):
        return None
    with _registry_lock:
        guard = _guards.get(key)
        if guard is None or guard._stop.is_set():
            guard = _guards[key] = FileGuard(key, interval)
            guard.start()
        guard._users += 1
        return guard


def release(guard: FileGuard) -> None:
    with _registry_lock:
        guard._users -= 1
        if guard._users > 0:
            return
        if _guards.get(guard.path) is guard:
            del _guards[guard.path]
    guard.stop()
