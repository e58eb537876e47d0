"""Keeping an SQLite WAL small, so a nearly full disk recovers once space is freed.

SQLite's defaults let the WAL grow to 1,000 pages (about 4 MB) before a passive checkpoint,
and never shrink the file afterwards. On a small disk that WAL takes the space an operator
just freed, and then the checkpoint that would empty it needs space too: writes stop again a
few seconds after they resumed (issue 23). So every connection gets:

- ``wal_autocheckpoint`` of ``WAL_AUTOCHECKPOINT_PAGES``: the WAL is folded into the database
  once it holds about 512 KB, so it, and the database growth a checkpoint needs, stay small
  (with 1,000 pages a 4 MB disk with 1.2 MB free filled up again within 12 jobs; with 256
  pages, 1 MB of WAL left room for ~150 jobs' rows; with 128, the rows fill the disk, not the WAL);
- ``journal_size_limit`` of ``JOURNAL_SIZE_LIMIT``: a WAL that did grow (a big transaction, a
  reader that held it open) is cut back to this when it is reset.

And the process's serialized writer (db/writer.py) runs ``wal_checkpoint(TRUNCATE)`` when it
goes idle with more than ``IDLE_TRUNCATE_BYTES`` of WAL, and when a write fails on a full disk,
so between bursts the WAL file holds next to no disk space.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

# 128 pages of 4 KiB. Cost measured on this project's 2-core VM (7 interleaved runs, medians):
# 2,000 single-commit state changes 323 us each against 280 us at 1,000 pages, 2,000
# concurrent ones (group commit) 141 against 119 us: the checkpoints' fsyncs, paid on the
# driver's thread, not the event loop's.
WAL_AUTOCHECKPOINT_PAGES = 128
JOURNAL_SIZE_LIMIT = 1024 * 1024
# The idle writer truncates the WAL file only once it holds this much: every TRUNCATE bumps
# PRAGMA data_version, which wakes every watcher (db/watch.py) once more, and costs fsyncs
# (measured 2 ms median, 39 ms worst on the loaded VM; a write arriving meanwhile waits), so a
# burst of a few commits is left for the next one.
IDLE_TRUNCATE_BYTES = 128 * 1024
# The busy timeout during an idle checkpoint: never wait on another process's reader.
_CHECKPOINT_BUSY_MS = 0


def apply_pragmas(cursor: Any) -> None:
    """The WAL limits above, on a new connection (db/engine.py's connect hook)."""
    cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    cursor.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")


def truncate_checkpoint(conn: sqlite3.Connection, busy_timeout_ms: int) -> tuple[int, ...] | None:
    """``wal_checkpoint(TRUNCATE)`` without waiting: with a reader in another process using
    the WAL it does what it can and returns at once (busy=1) rather than holding the writer
    for the whole busy timeout. Returns SQLite's (busy, log frames, checkpointed frames), or
    None when it could not run (the disk still full, the file gone): the next idle moment
    tries again. Runs on the connection's own thread, outside a transaction."""
    try:
        conn.execute(f"PRAGMA busy_timeout={_CHECKPOINT_BUSY_MS}")
        try:
            row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    except sqlite3.Error:
        return None
    return tuple(row) if row is not None else None


def wal_bytes(wal_path: str | None) -> int:
    """The size of a -wal file (0 when there is none)."""
    if not wal_path:
        return 0
    try:
        return os.stat(wal_path).st_size
    except OSError:
        return 0


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (an sqlite3 error, bare or wrapped by SQLAlchemy) is the disk or a file
    size limit refusing a write: SQLITE_FULL, or the I/O error an EFBIG (``ulimit -f``) gives."""
    orig = getattr(exc, "orig", None) or exc
    if not isinstance(orig, sqlite3.Error):
        return False
    text = str(orig).lower()
    return "disk is full" in text or "disk i/o error" in text
