"""Graceful shutdown of a real ``frontdesk runner`` process: SIGTERM stops claiming, gives the
running job's lease back so another runner takes it at once (not after the lease runs out),
and the process exits promptly with status 0."""

from __future__ import annotations

import asyncio
import signal
import time

import crashkit
import pytest

from frontdesk.core.schema import open_store

EXIT_BOUND_SECONDS = 10.0  # STOP_GRACE_SECONDS (5) for stubborn jobs, plus closing the store


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_releases_the_running_job_and_exits_within_a_bound(settings, sig):
    url = settings.database_url

    async def queue() -> int:
        store = await open_store(url)
        try:
            job = await store.create(
                caller="ada", tool="experiment", pattern="background", plugin="kit",
                args={"name": "long", "seconds": 30.0}, note="queued for the runner",
            )  # fmt: skip
            return job.id
        finally:
            await store.close()

    job_id = asyncio.run(queue())
    # A 60 s lease: if the job were not released, nobody could take it for a minute.
    runner = crashkit.start("runner", "--db", url, lease=60)
    try:
        crashkit.wait_until(
            lambda: crashkit.query(
                url, "SELECT 1 FROM tasks WHERE id = ? AND progress > 0", job_id
            ),
            timeout=30,
            proc=runner,
        )
        runner.send_signal(sig)
        started = time.monotonic()
        out, err = crashkit.finish(runner, timeout=30)
        took = time.monotonic() - started
    finally:
        if runner.poll() is None:
            crashkit.kill(runner)
    assert runner.returncode == 0, err
    assert took < EXIT_BOUND_SECONDS, f"runner took {took:.1f}s to exit"
    [(status, owner, expires)] = crashkit.query(
        url, "SELECT status, lease_owner, lease_expires_at FROM tasks WHERE id = ?", job_id
    )
    assert (status, owner, expires) == ("queued", None, None)
    [(note,)] = crashkit.query(
        url, "SELECT note FROM task_events WHERE task_id = ? ORDER BY id DESC LIMIT 1", job_id
    )
    assert note.startswith("released by runner:") and f":{runner.pid}:" in note

    async def take_over() -> int:
        store = await open_store(url)
        try:
            claimed = await store.claim("runner:next", 30)  # at once, no lease to wait out
            assert claimed is not None and claimed.id == job_id
            return claimed.attempts
        finally:
            await store.close()

    assert asyncio.run(take_over()) == 2
    assert "Traceback" not in err
