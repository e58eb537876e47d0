"""Issue 23 item 4: SQLite on a disk that fills up, on real filesystems.

- every connection keeps the WAL small (``wal_autocheckpoint``, ``journal_size_limit``) and
  the writer empties it (``wal_checkpoint(TRUNCATE)``) when it goes idle;
- a 4 MB tmpfs filled to ENOSPC, then ~1.2 MB freed: writes resume and keep going (before,
  the WAL refilled the space within seconds and writes stopped for good), and the work done
  while the disk was full ends ``succeeded``, not "interrupted";
- a process under ``ulimit -f`` keeps recording its work (before: "disk I/O error" once the
  WAL reached the limit);
- the headroom check: ``frontdesk doctor`` and ``/api/health``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import faultdisk
import pytest

from frontdesk.core.recording import record
from frontdesk.core.schema import CORE, upgrade
from frontdesk.db import health, walcare
from frontdesk.db.store import TaskStore

pytestmark = pytest.mark.faults

HERE = Path(__file__).parent


async def _open(url: str) -> TaskStore:
    async def prepare(store: TaskStore) -> None:
        await upgrade(store, [CORE])

    return await TaskStore.open(url, prepare=prepare)


async def _until(predicate, timeout: float = 15.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(interval)


async def _job(store: TaskStore, i: int = 0) -> None:
    """One job's rows: queued, running, succeeded with a result (three commits)."""
    task = await store.create(caller=f"c{i % 5}", tool="report", pattern="background", args={})
    await store.transition(task.id, "running")
    await store.transition(task.id, "succeeded", result={"summary": "s" * 300})


def _hog(filler: Path, done: threading.Event) -> None:
    while not done.is_set():
        faultdisk.fill(filler)
        done.wait(0.002)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


async def test_the_wal_stays_small_and_is_emptied_when_the_writer_is_idle(tmp_path):
    db = tmp_path / "fd.db"
    store = await _open(f"sqlite+aiosqlite:///{db}")
    wal = f"{db}-wal"
    try:
        async with store.read_engine.connect() as conn:
            limit = (await conn.exec_driver_sql("PRAGMA journal_size_limit")).scalar()
            pages = (await conn.exec_driver_sql("PRAGMA wal_autocheckpoint")).scalar()
        assert limit == walcare.JOURNAL_SIZE_LIMIT and pages == walcare.WAL_AUTOCHECKPOINT_PAGES
        largest = 0
        for i in range(300):  # 900 commits: about 4 MB of WAL frames without a checkpoint
            await _job(store, i)
            largest = max(largest, _size(wal))
        # A checkpoint at 256 frames of 4 KiB, plus the transaction that crossed it.
        assert largest <= walcare.WAL_AUTOCHECKPOINT_PAGES * 4120 + 64 * 4120, largest
        # The writer's idle TRUNCATE, not SQLite's passive checkpoints, empties the file.
        assert await _until(lambda: _size(wal) == 0 and store._writer.checkpoints >= 1)
    finally:
        await store.close()


async def test_a_full_4mb_disk_recovers_once_space_is_freed_and_work_done_ends_succeeded(
    tmp_path,
):
    with faultdisk.tmpfs(tmp_path / "disk") as disk:
        store = await _open(f"sqlite+aiosqlite:///{disk}/fd.db")
        try:
            for i in range(40):
                await _job(store, i)
            # A job whose work is done when the disk fills up: its end must still be written.
            done_job = await store.create(
                caller="ann", tool="report", pattern="background", status="running"
            )
            # Idle: the writer empties the WAL, so the disk filled now leaves no slack in it.
            assert await _until(lambda: _size(f"{disk}/fd.db-wal") == 0)
            filler = disk / "filler"
            faultdisk.fill(filler)
            with pytest.raises(Exception) as refused:
                await _job(store)
            assert walcare.is_disk_full(refused.value), refused.value
            # Another process takes whatever space shows up (the writer gives back the WAL
            # space a failed transaction took), until the operator frees some.
            hogging = threading.Event()
            hog = asyncio.ensure_future(asyncio.to_thread(_hog, filler, hogging))

            tries = 0
            transition = store.transition

            async def counted(*args, **kwargs):
                nonlocal tries
                tries += 1
                return await transition(*args, **kwargs)

            store.transition = counted  # type: ignore[method-assign]
            finishing = asyncio.ensure_future(
                record(
                    store,
                    done_job.id,
                    "succeeded",
                    retry_seconds=60,
                    result={"summary": "done while the disk was full"},
                )
            )
            assert await _until(lambda: tries >= 3), "the result write was not retried"
            assert not finishing.done()
            assert (await store.get(done_job.id)).status == "running"

            # Free about 1.2 MB, as in the trial.
            hogging.set()
            await hog
            os.truncate(filler, filler.stat().st_size - 1_200_000)
            freed = time.monotonic()
            row = await asyncio.wait_for(finishing, 60)
            recovered = time.monotonic() - freed
            assert row is not None and row.status == "succeeded", row
            # ... and keeps going: the WAL no longer eats the space it was given back.
            # (Before issue 23, 12 jobs went through and then the disk was full for good.)
            largest = 0
            for i in range(300):
                await _job(store, i)
                largest = max(largest, _size(f"{disk}/fd.db-wal"))
                if i % 25 == 24:
                    await asyncio.sleep(0.4)  # idle moments, as between calls: WAL truncated
            assert largest < 1_200_000, largest
            counts = await store.status_counts()
            assert counts.get("running", 0) == 0 and counts.get("queued", 0) == 0, counts
            print(
                f"\nrecovered {recovered:.2f} s after space was freed; 300 more jobs; "
                f"largest WAL {largest} bytes; free now {faultdisk.free_bytes(disk)} bytes"
            )
            problems = health.problems(store, health.DEFAULT_MIN_FREE_BYTES)
            assert any("MB free on the filesystem of" in p for p in problems), problems
        finally:
            await store.close()


def test_a_process_under_ulimit_f_keeps_recording_its_work(tmp_path):
    limit = 2_000_000  # bytes any one file of the child may hold; SQLite's old WAL needs 4 MB
    url = f"sqlite+aiosqlite:///{tmp_path}/fd.db"
    done = subprocess.run(
        [sys.executable, str(HERE / "diskchild.py"), url, "300"],
        preexec_fn=faultdisk.file_limit(limit),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["succeeded"] == 300 and outcome["running"] == 0, outcome
    assert outcome["gave_up"] == 0 and outcome["largest_wal"] < limit, outcome
    print(f"\nulimit -f {limit}: {outcome}")


# -- headroom ------------------------------------------------------------------------------


def test_headroom_is_measured_where_the_database_lives(tmp_path):
    room = health.headroom(str(tmp_path / "not-yet" / "fd.db"), 1)
    assert room.ok and room.path == str(tmp_path) and room.free_bytes > 0
    short = health.headroom(str(tmp_path / "fd.db"), room.free_bytes * 4)
    assert not short.ok and "free some space" in short.line()
    assert health.sqlite_path("postgresql+asyncpg://u@h/db") is None
    assert health.sqlite_path("sqlite+aiosqlite:///x/fd.db") == "x/fd.db"


def test_doctor_fails_when_the_database_disk_is_nearly_full(tmp_path, monkeypatch):
    import typer
    from typer.testing import CliRunner

    from frontdesk.agents.programs import cli_voice

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FRONTDESK_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/fd.db")
    app = typer.Typer()
    cli_voice.register(app)
    roomy = CliRunner().invoke(app, ["doctor"])
    assert "free space:" in roomy.output and "MB free on the filesystem of" in roomy.output
    monkeypatch.setenv("FRONTDESK_MIN_FREE_MB", str(10**9))  # a petabyte: never there
    tight = CliRunner().invoke(app, ["doctor"])
    assert tight.exit_code != 0, tight.output
    line = next(x for x in tight.output.splitlines() if "free space:" in x)
    assert "FAIL" in line and "free some space" in line, line


async def test_console_health_is_green_then_red_on_low_headroom(tmp_path, monkeypatch):
    from webclient import console

    url = f"sqlite+aiosqlite:///{tmp_path}/fd.db"
    store = await _open(url)
    try:
        async with console(url, store=store) as (_, c):
            ok = await c.get("/api/health")
            assert ok.status_code == 200, ok.text
            assert ok.json()["status"] == "ok"
            spec = (await c.get("/openapi.json")).json()
            assert {"200", "503"} <= set(spec["paths"]["/api/health"]["get"]["responses"])
        # As `frontdesk web` runs it: no settings passed, the threshold from the environment.
        monkeypatch.setenv("FRONTDESK_MIN_FREE_MB", str(10**9))
        async with console(url, store=store) as (_, c):
            red = await c.get("/api/health")
            assert red.status_code == 503 and red.headers["Retry-After"]
            assert any("free some space" in r for r in red.json()["reasons"]), red.json()
    finally:
        await store.close()
