"""Issue 23 item 4 with a real runner (DBOS executor) on a 4 MB tmpfs: background jobs that
finish their work while the disk is full end ``succeeded`` once space is freed, each run
once, with the runner never restarted (before: 3-6 rows stayed running/queued and 3-4 jobs
did their work with no result recorded)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import faultdisk
import kit
import pytest
from jobkit import in_status, queue, running

pytestmark = pytest.mark.faults

JOBS = 4  # settings.runner_concurrency: all of them at once
LATER = 60


@pytest.fixture
def db_url(tmp_path: Path) -> Iterator[str]:
    """The store and DBOS's file on their own 4 MB disk."""
    with faultdisk.tmpfs(tmp_path / "disk") as disk:
        yield f"sqlite+aiosqlite:///{disk}/frontdesk.db"


def _hog(filler: Path, done: threading.Event) -> None:
    # Another process taking every byte that shows up, until the operator frees some.
    while not done.is_set():
        faultdisk.fill(filler)
        done.wait(0.002)


async def test_jobs_done_while_the_disk_is_full_end_succeeded_once_space_is_freed(
    store, registry, settings, db_url, tmp_path
):
    disk = tmp_path / "disk"
    filler = disk / "filler"
    async with running(store, registry, settings) as runner:
        jobs = [
            await queue(store, settings, "experiment", name=f"e{i}", seconds=1.5)
            for i in range(JOBS)
        ]
        deadline = time.monotonic() + 30
        while not all(job.id in runner.jobs for job in jobs):
            assert time.monotonic() < deadline, "the jobs did not start"
            await asyncio.sleep(0.02)
        bodies = {job.id: runner.jobs[job.id] for job in jobs}

        hogging = threading.Event()
        hog = asyncio.ensure_future(asyncio.to_thread(_hog, filler, hogging))
        try:
            # Every job's work finishes while nothing can be written.
            deadline = time.monotonic() + 30
            while not all(b.done() for b in bodies.values()):
                assert time.monotonic() < deadline, "the jobs' work did not finish"
                await asyncio.sleep(0.05)
            assert all(b.exception() is None for b in bodies.values())
            rows = [await store.get(job.id) for job in jobs]
            assert [r.status for r in rows] == ["running"] * JOBS  # the truth is pending
        finally:
            hogging.set()
            await hog
        os.truncate(filler, filler.stat().st_size - 1_200_000)
        freed = time.monotonic()
        ended = [await in_status(store, job.id, "succeeded", timeout=60) for job in jobs]
        recovered = time.monotonic() - freed
        # ... and the runner goes on (before, the WALs took the freed space back within
        # seconds): jobs queued after the recovery run too.
        later = [
            await queue(store, settings, "experiment", name=f"after{i}", seconds=0.05)
            for i in range(LATER)
        ]
        for job in later:
            assert (await in_status(store, job.id, "succeeded", timeout=60)).attempts == 1
    assert all(t.attempts == 1 and t.result["summary"].startswith("Experiment") for t in ended)
    assert kit.calls["experiment"] == JOBS + LATER  # none ran twice
    print(
        f"\n{JOBS} jobs done on a full disk: all succeeded {recovered:.2f} s after space was freed"
    )
