"""Issue 23 item 5: a live SQLite database whose -wal is deleted, or whose file is replaced,
is noticed within seconds: the process stops writing (``StoreUnavailable``), logs one
critical line naming the file, and the console's health answers 503 with the reason.

Before: 5 of 5 trials lost 6-19 committed rows silently, running processes logged nothing and
the console kept answering 200.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frontdesk.core.schema import CORE, upgrade
from frontdesk.db import fileguard
from frontdesk.db.errors import StoreUnavailable
from frontdesk.db.store import TaskStore

pytestmark = pytest.mark.faults

HERE = Path(__file__).parent
# Generous for a loaded 2-core machine; the guard looks every fileguard.INTERVAL (1 s).
DETECT_WITHIN = 10.0


async def _open(url: str) -> TaskStore:
    async def prepare(store: TaskStore) -> None:
        await upgrade(store, [CORE])

    return await TaskStore.open(url, prepare=prepare)


async def _tripped(store: TaskStore) -> float:
    """Seconds until the guard's own watch (not a write) noticed; fails past the deadline."""
    guard = store.file_guard
    assert guard is not None
    started = time.monotonic()
    while guard.problem is None:
        assert time.monotonic() - started < DETECT_WITHIN, "not noticed"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def _critical(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.CRITICAL]


async def test_a_deleted_wal_stops_writes_with_one_critical_line_and_turns_health_red(
    tmp_path, caplog
):
    from webclient import console

    caplog.set_level(logging.WARNING)
    db = tmp_path / "fd.db"
    url = f"sqlite+aiosqlite:///{db}"
    store = await _open(url)
    try:
        async with console(url, store=store) as (_, c):
            for _ in range(5):
                task = await store.create(caller="ann", tool="report", pattern="background")
                await store.transition(task.id, "running")
            assert (await c.get("/api/health")).status_code == 200

            os.unlink(f"{db}-wal")
            seconds = await _tripped(store)

            with pytest.raises(StoreUnavailable, match="fd.db-wal was (deleted|replaced)"):
                await store.create(caller="ann", tool="report", pattern="background")
            for _ in range(5):  # every later write is refused too, without another line
                with pytest.raises(StoreUnavailable):
                    await store.transition(task.id, "succeeded", result={})
            red = await c.get("/api/health")
            assert red.status_code == 503 and red.headers["Retry-After"]
            assert any(f"{db}-wal was " in r for r in red.json()["reasons"]), red.json()
            # A write through the console is refused the same way: 503, not 500.
            refused = await c.post(f"/api/tasks/{task.id}/cancel")
            assert refused.status_code == 503, refused.text
        lines = _critical(caplog)
        assert len(lines) == 1 and f"{db}-wal was " in lines[0], lines
        print(f"\nthe deleted -wal was noticed in {seconds:.2f} s")
    finally:
        await store.close()


async def test_a_replaced_database_file_is_noticed(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    db = tmp_path / "fd.db"
    store = await _open(f"sqlite+aiosqlite:///{db}")
    try:
        await store.create(caller="ann", tool="report", pattern="background")
        # A "restore" by copying a file over the live one: a new inode under the same name.
        shutil.copy(db, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", db)
        await _tripped(store)
        with pytest.raises(StoreUnavailable, match="fd.db was deleted or replaced"):
            await store.create(caller="ann", tool="report", pattern="background")
        assert len(_critical(caplog)) == 1
    finally:
        await store.close()


async def test_the_guard_is_shared_and_a_closed_store_leaves_no_false_alarm(tmp_path, caplog):
    """Two stores on one file in one process share one guard (one line, one thread); SQLite
    deleting its own -wal when the last connection closes is not an alarm, and a store opened
    afterwards gets a fresh guard."""
    caplog.set_level(logging.WARNING)
    url = f"sqlite+aiosqlite:///{tmp_path}/fd.db"
    first, second = await _open(url), await _open(url)
    try:
        assert first.file_guard is second.file_guard is not None
    finally:
        await first.close()
        await second.close()
    assert not os.path.exists(f"{tmp_path}/fd.db-wal")  # SQLite's own clean close
    again = await _open(url)
    try:
        assert again.file_guard is not None and again.file_guard.look() is None
        await again.create(caller="ann", tool="report", pattern="background")
    finally:
        await again.close()
    assert not _critical(caplog)
    assert not fileguard._guards


def test_a_running_process_stops_writing_when_its_wal_is_deleted(tmp_path):
    db = tmp_path / "fd.db"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "guardchild.py"), f"sqlite+aiosqlite:///{db}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        os.unlink(f"{db}-wal")
        deleted = time.monotonic()
        refused = child.stdout.readline().strip()
        noticed = time.monotonic() - deleted
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err[-3000:]
    assert out.strip().endswith("refused") and "stopped 0" not in out, out
    assert refused.startswith("refused: database file") and "fd.db-wal was " in refused
    assert noticed < DETECT_WITHIN, noticed
    critical = [line for line in err.splitlines() if line.startswith("CRITICAL")]
    assert len(critical) == 1 and f"{db}-wal was " in critical[0], err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    print(f"\nsubprocess: writes refused {noticed:.2f} s after the -wal was deleted")


async def test_a_live_console_and_writer_both_notice_a_deleted_wal(tmp_path):
    """`frontdesk web` and a writing process on one database: the -wal is deleted; the
    writer's writes are refused, the console's health turns 503 naming the file, and each
    process logged one critical line."""
    import httpx

    db = tmp_path / "fd.db"
    url = f"sqlite+aiosqlite:///{db}"
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "guardchild.py"), url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    web = None
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        web = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "frontdesk.agents.programs", "web", "--port", "0", "--db", url,
            env={**os.environ, "FRONTDESK_WEB_TOKEN": "", "FRONTDESK_WEB_CALL": ""},
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert web.stderr is not None
        line = (await asyncio.wait_for(web.stderr.readline(), 60)).decode()
        assert line.startswith("frontdesk web on http://"), line
        async with httpx.AsyncClient(base_url=line.split()[3], timeout=30) as c:
            assert (await c.get("/api/health")).status_code == 200
            os.unlink(f"{db}-wal")
            deleted = time.monotonic()
            while (health := await c.get("/api/health")).status_code == 200:
                assert time.monotonic() - deleted < DETECT_WITHIN, "the console did not notice"
                await asyncio.sleep(0.05)
            noticed = time.monotonic() - deleted
            assert health.status_code == 503, health.text
            assert any(f"{db}-wal was " in r for r in health.json()["reasons"]), health.json()
        web.send_signal(signal.SIGTERM)
        web_err = (await asyncio.wait_for(web.stderr.read(), 30)).decode()
        await asyncio.wait_for(web.wait(), 30)
        out, err = await asyncio.to_thread(writer.communicate, timeout=60)
    finally:
        for proc in (writer, web):
            if proc is not None and proc.returncode is None:
                proc.kill()
        writer.wait()
    assert "refused: database file" in out and out.strip().endswith("refused"), out
    for stderr in (web_err, err):
        alarms = [x for x in stderr.splitlines() if f"{db}-wal was " in x]
        assert len(alarms) == 1, stderr[-3000:]
    print(f"\nfrontdesk web answered 503 {noticed:.2f} s after the -wal was deleted")
