"""§7 History: 1,000,000 task rows in a migrated SQLite file.

The rows are written with raw sqlite3 executemany (indexes dropped during the load and rebuilt
from the migration's own definitions afterwards, which is much faster than maintaining them row
by row). 20,000 callers, each caller's 50 tasks spread through the table; 95% finished.
Measured: a caller's last 20 tasks through ``TaskStore.list`` (with the query plan, to show the
index serves it; baseline the same query on raw sqlite3), ``TaskStore.stats`` and
``frontdesk tasks stats``, and the wall time of ``frontdesk tasks list`` against
``python -c pass``, both as subprocesses.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from common import ratio, scratch, sqlite_url, summary

from frontdesk.core.schema import open_store

CALLERS = 20_000
TOOLS = ("lookup", "charge", "note", "experiment", "search_kb", "pay_invoice", "report", "my_tasks")
DEPARTMENTS = ("search", "billing", "reports", "triage", "lab")
PATTERNS = ("interruptible", "critical", "fire_and_forget", "background")
FMT = "%Y-%m-%d %H:%M:%S.%f"  # SQLAlchemy's SQLite DateTime storage format


def generate(db: Path, rows: int) -> float:
    start = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    indexes = [
        r[0]
        for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL"
        )
    ]
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL"
        )
    ]
    for name in names:
        conn.execute(f'DROP INDEX "{name}"')
    rng = random.Random(8)
    base = datetime(2025, 1, 1)

    def make() -> Any:
        for i in range(rows):
            created = base + timedelta(seconds=i * 30)
            r = rng.random()
            status = (
                "succeeded"
                if r < 0.80
                else "failed"
                if r < 0.90
                else "cancelled"
                if r < 0.95
                else "queued"
                if r < 0.975
                else "running"
            )
            finished = status in ("succeeded", "failed", "cancelled")
            started = created + timedelta(milliseconds=50)
            yield (
                f"caller-{i % CALLERS}",
                f"call-{i // 4}",
                DEPARTMENTS[i % 5],
                TOOLS[i % 8],
                "kit",
                PATTERNS[i % 4],
                status,
                '{"q": "x"}',
                '{"summary": "ok"}' if status == "succeeded" else None,
                "boom" if status == "failed" else None,
                0,
                created.strftime(FMT),
                started.strftime(FMT) if status != "queued" else None,
                (started + timedelta(milliseconds=rng.randint(20, 5000))).strftime(FMT)
                if finished
                else None,
                created.strftime(FMT) if finished else None,
            )

    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO tasks (caller, session_id, department, tool, plugin, pattern, status, args, "
        "result, error, attempts, created_at, started_at, finished_at, delivered_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        make(),
    )
    conn.execute("COMMIT")
    for sql in indexes:
        conn.execute(sql)
    conn.execute("ANALYZE")
    conn.close()
    return time.perf_counter() - start


def _walls(cmds: dict[str, list[str]], env: dict[str, str], n: int) -> dict[str, list[float]]:
    """Wall seconds of each command, ``n`` times, interleaved round by round."""
    out: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(n):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            out[name].append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise RuntimeError(f"{cmd} failed: {proc.stderr[-500:]}")
    return out


# What `tasks list` cannot avoid importing, given the libraries it is built on (typer and rich
# for the CLI, pydantic-settings for config, SQLAlchemy's ORM models and async engine).
FLOORS = {
    "import typer": "import typer",
    "import sqlalchemy.orm": "import sqlalchemy.orm",
    "every library tasks list uses": (
        "import typer, rich.table, pydantic_settings, sqlalchemy.orm, "
        "sqlalchemy.ext.asyncio, aiosqlite, stamina"
    ),
}


async def run(quick: bool) -> dict[str, Any]:

    rows = 1_000_000
    lookups = 100 if quick else 300
    reps = 3 if quick else 7
    with scratch("history-") as dir_:
        db = dir_ / "history.db"
        url = sqlite_url(db)
        store = await open_store(url)  # migrate
        await store.close()
        load_seconds = generate(db, rows)

        store = await open_store(url)
        rng = random.Random(1)
        callers = [f"caller-{rng.randrange(CALLERS)}" for _ in range(lookups + 20)]
        ours: list[float] = []
        for i, caller in enumerate(callers):
            t0 = time.perf_counter()
            got = await store.list(caller=caller, limit=20)
            if i >= 20:  # warm-up
                ours.append(time.perf_counter() - t0)
            assert len(got) == 20 and all(t.caller == caller for t in got)

        raw = sqlite3.connect(db)
        query = "SELECT * FROM tasks WHERE caller = ? ORDER BY id DESC LIMIT 20"
        plan = [r[-1] for r in raw.execute("EXPLAIN QUERY PLAN " + query, ("caller-1",))]
        base: list[float] = []
        for caller in callers[20:]:
            t0 = time.perf_counter()
            raw.execute(query, (caller,)).fetchall()
            base.append(time.perf_counter() - t0)
        raw.close()

        stats_times = []
        stats: list[Any] = []
        # A full scan of the finished rows (~14 s here): only in a full run, to keep quick quick.
        for _ in range(0 if quick else 3):
            t0 = time.perf_counter()
            stats = await store.stats()
            stats_times.append(time.perf_counter() - t0)
        await store.close()

        env = {**os.environ, "FRONTDESK_DATABASE_URL": url}
        frontdesk = str(Path(sys.executable).parent / "frontdesk")
        walls = _walls(
            {
                "pass": [sys.executable, "-c", "pass"],
                "tasks list": [frontdesk, "tasks", "list"],
                **{name: [sys.executable, "-c", code] for name, code in FLOORS.items()},
            },
            env,
            reps,
        )
        python_pass, tasks_list = walls["pass"], walls["tasks list"]
        # The same scan as TaskStore.stats plus process start; once, and only in a full run.
        tasks_stats = (
            None if quick else _walls({"s": [frontdesk, "tasks", "stats"]}, env, 1)["s"][0]
        )

    last20 = summary(ours, 1e3)
    raw20 = summary(base, 1e3)
    py = summary(python_pass, 1e3)
    tl = summary(tasks_list, 1e3)
    return {
        "rows": rows,
        "load_seconds": load_seconds,
        "last_20": {
            "frontdesk_ms": last20,
            "raw_sqlite3_ms": raw20,
            "ratio_vs_raw": ratio(last20["median"], raw20["median"]),
            "query_plan": plan,
        },
        "stats": {
            "store_stats_seconds": summary(stats_times),
            "cli_tasks_stats_seconds": tasks_stats,
            "groups": len(stats),
        },
        "cli": {
            "python_c_pass_ms": py,
            "frontdesk_tasks_list_ms": tl,
            "ratio": ratio(tl["median"], py["median"]),
            "floors": {
                name: {"code": code, "ms": ms, "ratio": ratio(ms["median"], py["median"])}
                for name, code in FLOORS.items()
                for ms in [summary(walls[name], 1e3)]
            },
        },
        "targets": {
            "last_20_median_ms": {"target": "<= 5", "value": last20["median"]},
            "tasks_list_vs_python_c_pass": {
                "target": "<= 3",
                "value": ratio(tl["median"], py["median"]),
            },
            "tasks_stats_seconds": {
                "target": "report",
                "value": summary(stats_times).get("median"),
            },
        },
    }
