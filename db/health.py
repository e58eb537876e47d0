"""Is the store healthy enough to keep writing? What `frontdesk doctor` and the console's
``/api/health`` ask, answered from the database's files, never from a write.

- headroom: the free bytes on the filesystem that holds an SQLite database against a
  threshold. SQLite needs space to write at all (and a checkpoint needs room for the pages it
  moves), so a disk running out is worth a red light before the first write fails;
- the file guard (db/fileguard.py): the database's files were deleted or replaced under it.

Postgres manages its own disk, so only SQLite files are looked at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from frontdesk.db.engine import sqlite_path

if TYPE_CHECKING:
    from frontdesk.db.store import TaskStore

MB = 1024 * 1024
# Below this much free space the light is red (FRONTDESK_MIN_FREE_MB overrides it). The WAL is
# kept near 1 MB (db/walcare.py), so writes go on well below it; this is room to act in.
DEFAULT_MIN_FREE_BYTES = 64 * MB


@dataclass(frozen=True)
class Headroom:
    path: str  # the directory whose filesystem was measured
    free_bytes: int
    min_free_bytes: int

    @property
    def ok(self) -> bool:
        return self.free_bytes >= self.min_free_bytes

    def line(self) -> str:
        free = f"{self.free_bytes / MB:.1f} MB free on the filesystem of {self.path}"
        if self.ok:
            return free
        return (
            f"only {free} (under {self.min_free_bytes / MB:.0f} MB): SQLite writes stop when it "
            "is full; free some space"
        )


def headroom(db_path: str, min_free_bytes: int = DEFAULT_MIN_FREE_BYTES) -> Headroom:
    """Free bytes (for an unprivileged writer) where ``db_path`` lives, or would be created."""
    where = Path(db_path).resolve().parent
    while not where.exists() and where != where.parent:
        where = where.parent
    st = os.statvfs(where)
    return Headroom(str(where), st.f_bavail * st.f_frsize, min_free_bytes)


def min_free_bytes(settings: object | None) -> int:
    """The threshold from settings (``min_free_mb``), else the default."""
    mb = getattr(settings, "min_free_mb", None)
    return DEFAULT_MIN_FREE_BYTES if mb is None else int(float(mb) * MB)


def problems(store: TaskStore, min_free: int = DEFAULT_MIN_FREE_BYTES) -> list[str]:
    """What is wrong with ``store``'s files, one line each; empty when nothing is."""
    found: list[str] = []
    guard = getattr(store, "file_guard", None)
    if guard is not None and guard.look() is not None:
        found.append(guard.problem)
    path = sqlite_path(store.url)
    if path is not None:
        try:
            room = headroom(path, min_free)
        except OSError as exc:
            found.append(f"cannot measure the free space for {path}: {exc.strerror or exc}")
        else:
            if not room.ok:
                found.append(room.line())
    return found
