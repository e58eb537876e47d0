"""A process that does work and records it, for the disk-fault tests (tests/test_sqlite_disk.py).

``python diskchild.py URL ROWS [--old-pragmas]``: opens the store (core schema only), then for
each row creates an in-turn task, "does the work" and records its end with
``frontdesk.core.recording.record`` (retried while the database cannot be written, as the
call processes and the runner do). Prints one JSON line: rows succeeded, record calls that
gave up, the largest -wal seen, seconds taken. ``--old-pragmas`` leaves SQLite's WAL defaults
(the behaviour before issue 23), for measuring the difference.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time


async def main(url: str, rows: int) -> dict[str, object]:
    from frontdesk.core.recording import record
    from frontdesk.core.schema import CORE, upgrade
    from frontdesk.db.health import sqlite_path
    from frontdesk.db.store import TaskStore

    async def prepare(store: TaskStore) -> None:
        await upgrade(store, [CORE])

    store = await TaskStore.open(url, prepare=prepare)
    wal = (sqlite_path(url) or "") + "-wal"
    largest = gave_up = 0
    started = time.monotonic()
    try:
        for i in range(rows):
            task = await store.create(
                caller=f"c{i % 7}", tool="lookup", pattern="interruptible", status="running",
                args={"q": "x" * 200},
            )  # fmt: skip
            try:
                await record(
                    store, task.id, "succeeded", retry_seconds=20, result={"answer": "y" * 400}
                )
            except Exception:
                gave_up += 1
            if os.path.exists(wal):
                largest = max(largest, os.path.getsize(wal))
            if i % 50 == 49:
                await asyncio.sleep(0.3)  # an idle moment, as between calls
        done = await store.status_counts()
    finally:
        await store.close()
    return {
        "succeeded": done.get("succeeded", 0),
        "running": done.get("running", 0),
        "gave_up": gave_up,
        "largest_wal": largest,
        "seconds": round(time.monotonic() - started, 2),
    }


if __name__ == "__main__":
    if "--old-pragmas" in sys.argv:
        from frontdesk.db import walcare

        walcare.apply_pragmas = lambda cursor: None
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(json.dumps(asyncio.run(main(args[0], int(args[1])))), flush=True)
