"""A process writing jobs to a store until its files are deleted or replaced, for
tests/test_sqlite_fileguard.py.

``python guardchild.py URL``: opens the store (core schema only), prints ``ready``, then writes
one job every 20 ms. Once writes are refused it prints ``refused: <reason>`` for the first
refusal, keeps trying for ``TRIES`` more writes (each must be refused too), prints
``stopped <n> refused`` and exits 0 (after ``DEADLINE`` seconds at most). The store's log goes to stderr, one line per record.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time

TRIES = 20
DEADLINE = 60.0  # never refused by then: print "stopped 0 refused" and let the test fail


async def main(url: str) -> None:
    from frontdesk.core.schema import CORE, upgrade
    from frontdesk.db.errors import StoreUnavailable
    from frontdesk.db.store import TaskStore

    async def prepare(store: TaskStore) -> None:
        await upgrade(store, [CORE])

    store = await TaskStore.open(url, prepare=prepare)
    print("ready", flush=True)
    refused = 0
    give_up = time.monotonic() + DEADLINE
    try:
        while refused <= TRIES and time.monotonic() < give_up:
            try:
                task = await store.create(caller="c", tool="report", pattern="background")
                await store.transition(task.id, "running")
            except StoreUnavailable as exc:
                if not refused:
                    print(f"refused: {exc}", flush=True)
                refused += 1
            await asyncio.sleep(0.02)
    finally:
        await store.close()
    print(f"stopped {refused} refused", flush=True)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    asyncio.run(main(sys.argv[1]))
