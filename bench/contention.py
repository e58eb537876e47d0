"""§5 Many call processes on one SQLite file: 16 call processes and one runner process.

Each call process writes what a call writes, through its own TaskStore (its own GroupWriter):
- realistic: a turn every ~0.5 s (jittered): an in-turn tool (create running -> succeeded),
  a fire-and-forget one finishing ~0.1 s later, and every fourth turn a background job for the
  runner (which claims it, writes four progress updates and finishes it);
- burst: 20 writers per process, each creating and finishing tasks back to back.
Every process starts on a shared monotonic deadline, so start-up is not measured. Afterwards the
parent checks every row: each task a call created exists with the status it expects and its
events, every background job was finished by the runner, nothing is left queued or running.
The baseline is one call process alone with the realistic load.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from common import BENCH, ratio, scratch, sqlite_url, summary

from frontdesk.core.schema import open_store

# -- a call process ---------------------------------------------------------------------------


def call_child(argv: list[str]) -> None:
    """``run.py --child contention:call_child URL MODE SECONDS START SEED``"""
    url, mode, seconds, start, seed = argv[0], argv[1], float(argv[2]), float(argv[3]), int(argv[4])
    result = asyncio.run(_call_main(url, mode, seconds, start, seed))
    sys.stdout.write(json.dumps(result) + "\n")


async def _call_main(
    url: str, mode: str, seconds: float, start: float, seed: int
) -> dict[str, Any]:

    from frontdesk.core.jobs import client_for
    from frontdesk.core.settings import Settings

    rng = random.Random(seed)
    store = await open_store(url)
    jobs_client = client_for(Settings(database_url=url))
    latencies: list[float] = []
    errors: list[str] = []
    expected: dict[int, tuple[str, int]] = {}  # task id -> (final status, events we wrote)
    jobs: list[int] = []
    caller = f"caller-{seed}"

    async def timed(coro: Any) -> Any:
        t0 = time.perf_counter()
        try:
            out = await coro
        except Exception as exc:  # counted: lock errors are the result we are after
            errors.append(f"{type(exc).__name__}: {exc}")
            return None
        latencies.append(time.perf_counter() - t0)
        return out

    async def in_turn() -> None:
        task = await timed(
            store.create(caller=caller, tool="lookup", pattern="interruptible", status="running")
        )
        if task is None:
            return
        expected[task.id] = ("running", 1)
        if await timed(store.transition(task.id, "succeeded", result={"ok": True})):
            expected[task.id] = ("succeeded", 2)

    async def forget() -> None:
        task = await timed(
            store.create(caller=caller, tool="note", pattern="fire_and_forget", status="running")
        )
        if task is None:
            return
        expected[task.id] = ("running", 1)
        await asyncio.sleep(0.1)
        if await timed(store.transition(task.id, "succeeded", result="logged")):
            expected[task.id] = ("succeeded", 2)

    async def background() -> None:
        task = await timed(
            store.create(
                caller=caller,
                tool="experiment",
                pattern="background",
                args={"name": "x", "seconds": 0.2},
            )
        )
        if task is not None:
            jobs.append(task.id)
            # As a call's background tool does (agents/patterns.py): the row, then DBOS (its
            # own file and thread; not counted as a write of ours).
            try:
                await jobs_client.enqueue(task.id)
            except Exception as exc:
                errors.append(f"enqueue: {type(exc).__name__}: {exc}")

    await asyncio.sleep(max(0.0, start - time.monotonic()))
    began = time.monotonic()
    pending: set[asyncio.Task[Any]] = set()
    if mode == "burst":

        async def writer() -> None:
            while time.monotonic() - began < seconds:
                await in_turn()

        await asyncio.gather(*(writer() for _ in range(20)))
    else:
        turn = 0
        while time.monotonic() - began < seconds:
            turn += 1
            await in_turn()
            t = asyncio.ensure_future(forget())
            pending.add(t)
            t.add_done_callback(pending.discard)
            if turn % 4 == 0:
                await background()
            await asyncio.sleep(rng.uniform(0.3, 0.7))
    if pending:
        await asyncio.wait(pending)
    elapsed = time.monotonic() - began
    await store.close()
    return {
        "latencies": latencies,
        "errors": errors,
        "lock_errors": sum("locked" in e or "busy" in e for e in errors),
        "expected": {str(k): v for k, v in expected.items()},
        "jobs": jobs,
        "seconds": elapsed,
    }


# -- the parent -------------------------------------------------------------------------------


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(BENCH / "run.py"),
        "--child",
        *args,
        stdout=asyncio.subprocess.PIPE,
    )


async def scenario(url: str, db: Path, procs: int, mode: str, seconds: float) -> dict[str, Any]:
    from delivery import start_runner, stop_runner

    runner, _committed, reader = await start_runner(url)
    try:
        # Interpreter start-up on 2 cores is slow with 17 processes; start together later.
        start = time.monotonic() + 1.0 + 0.15 * procs
        children = [
            await _spawn("contention:call_child", url, mode, str(seconds), str(start), str(k))
            for k in range(procs)
        ]
        outs = await asyncio.gather(*(c.communicate() for c in children))
        results = []
        failures = []
        for child, (out, _) in zip(children, outs, strict=True):
            if child.returncode != 0 or not out:
                failures.append(f"call process exit {child.returncode}")
                continue
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
        # Let the runner finish every job the calls queued.
        jobs = [j for r in results for j in r["jobs"]]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not _unfinished(db, jobs):
                break
            await asyncio.sleep(0.2)
    finally:
        await stop_runner(runner, reader)

    latencies = [x for r in results for x in r["latencies"]]
    accounted = _account(db, results, jobs)
    elapsed = max((r["seconds"] for r in results), default=0.0)
    return {
        "processes": procs,
        "mode": mode,
        "seconds": elapsed,
        "writes": len(latencies),
        "writes_per_second": len(latencies) / elapsed if elapsed else None,
        "latency_ms": summary(latencies, 1e3),
        "errors": sum(len(r["errors"]) for r in results) + len(failures),
        "lock_errors": sum(r["lock_errors"] for r in results),
        "error_samples": [e for r in results for e in r["errors"]][:3] + failures[:3],
        "background_jobs": len(jobs),
        **accounted,
    }


def _unfinished(db: Path, jobs: list[int]) -> int:
    if not jobs:
        return 0
    conn = sqlite3.connect(db, timeout=30)
    try:
        marks = ",".join("?" * len(jobs))
        return conn.execute(
            f"SELECT count(*) FROM tasks WHERE id IN ({marks}) AND status IN ('queued', 'running')",
            jobs,
        ).fetchone()[0]
    finally:
        conn.close()


def _account(db: Path, results: list[dict[str, Any]], jobs: list[int]) -> dict[str, Any]:
    """Compare the file with what every process says it wrote."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = {
            r[0]: (r[1], r[2])
            for r in conn.execute(
                "SELECT t.id, t.status, (SELECT count(*) FROM task_events e WHERE e.task_id = t.id) "
                "FROM tasks t"
            )
        }
    finally:
        conn.close()
    expected = {int(k): tuple(v) for r in results for k, v in r["expected"].items()}
    missing = [i for i in expected if i not in rows]
    wrong = [
        i for i, (status, events) in expected.items() if i in rows and rows[i] != (status, events)
    ]
    unknown = [i for i in rows if i not in expected and i not in set(jobs)]
    jobs_done = sum(1 for j in jobs if rows.get(j, ("?",))[0] == "succeeded")
    jobs_events_ok = sum(
        1 for j in jobs if rows.get(j, ("?", 0))[1] == 7
    )  # queued, claim, 4 x progress, done
    stuck = sum(1 for s, _ in rows.values() if s in ("queued", "running"))
    return {
        "rows": len(rows),
        "rows_expected": len(expected) + len(jobs),
        "rows_missing": len(missing),
        "rows_wrong_status_or_events": len(wrong),
        "rows_unexpected": len(unknown),
        "jobs_succeeded": jobs_done,
        "jobs_with_all_7_events": jobs_events_ok,
        "left_queued_or_running": stuck,
        "all_accounted_for": not missing
        and not wrong
        and not unknown
        and jobs_done == len(jobs)
        and stuck == 0,
    }


async def run(quick: bool) -> dict[str, Any]:

    realistic_s, burst_s, base_s = (3.0, 2.0, 3.0) if quick else (10.0, 5.0, 10.0)
    out: dict[str, Any] = {}
    for name, procs, mode, seconds in (
        ("baseline_1_process", 1, "realistic", base_s),
        ("realistic_16_processes", 16, "realistic", realistic_s),
        ("burst_16_processes", 16, "burst", burst_s),
    ):
        with scratch("contention-") as dir_:
            db = dir_ / "shared.db"
            url = sqlite_url(db)
            store = await open_store(url)  # migrate once, before anyone starts
            await store.close()
            out[name] = await scenario(url, db, procs, mode, seconds)
    base = out["baseline_1_process"]["latency_ms"].get("p99")
    for name in ("realistic_16_processes", "burst_16_processes"):
        out[name]["p99_ratio_vs_1_process"] = ratio(out[name]["latency_ms"].get("p99"), base)
    real, burst = out["realistic_16_processes"], out["burst_16_processes"]
    out["targets"] = {
        "lock_errors": {"target": "0", "value": real["lock_errors"] + burst["lock_errors"]},
        "rows_accounted_for": {
            "target": "all",
            "value": real["all_accounted_for"] and burst["all_accounted_for"],
        },
        "p99_write_ms_realistic": {"target": "report", "value": real["latency_ms"].get("p99")},
        "p99_write_ms_burst": {"target": "report", "value": burst["latency_ms"].get("p99")},
    }
    return out
