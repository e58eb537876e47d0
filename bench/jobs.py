"""§12 Background jobs: what the runner costs per job, on SQLite and Postgres.

A runner PROCESS (``core.runner.serve``, as ``frontdesk runner`` runs it) executes no-op jobs
queued by this process exactly as a call's background tool queues them (a ``tasks`` row, plus,
with DBOS, the enqueue through ``JobClient``). Measured:

- enqueue to final commit: the row's ``finished_at - created_at`` (both stamped on this
  machine's clock), median and p95, with 1 job at a time and with 200 queued at once;
  delivery to the caller adds §4's commit-to-follow-up;
- the call side's enqueue: event-loop CPU per queued job in this (the call's) process, and
  the loop's lag (how late a 5 ms sleeper wakes) while jobs are queued and run;
- runner CPU per job: the runner process's user+system CPU over the batch, divided by jobs;
- per-step overhead (DBOS only): a 3-step no-op job against a no-step one, per step.

Run it on a branch before and after a change to compare runners: it uses only names both
have (``serve``, ``open_store``; ``JobClient`` when it exists).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from common import BENCH, LoopLag, bench_settings, scratch, sqlite_url, summary

from frontdesk.core import Department, ToolContext, hookimpl, tool

# -- the jobs, as a plugin both processes load --------------------------------------------


@tool(pattern="background")
async def bench_noop(ctx: ToolContext) -> dict[str, Any]:
    """A job that does nothing: its cost is the runner's."""
    return {"summary": "done"}


@tool(pattern="background")
async def bench_steps(ctx: ToolContext, steps: int = 3) -> dict[str, Any]:
    """A job of ``steps`` durable no-op steps."""

    def nothing(i: int) -> int:
        return i

    step = getattr(ctx, "step", None)
    for i in range(steps):
        if step is not None:
            await step(f"s{i}", nothing, i)
    return {"summary": "done"}


@hookimpl
def register_departments(register: Any) -> None:
    register(
        Department(
            name="benchjobs",
            description="bench jobs",
            instructions="-",
            tools=[bench_noop, bench_steps],
        )
    )


PLUGIN = [("benchjobs", sys.modules[__name__])]


def _settings(url: str, concurrency: int) -> Any:
    return bench_settings(url, runner_concurrency=concurrency, runner_poll_seconds=0.05)


def _registry(settings: Any) -> Any:
    from frontdesk.core import host

    return host.load(settings, extra=PLUGIN)


# -- the runner process -------------------------------------------------------------------


def runner_child(argv: list[str]) -> None:
    """``run.py --child jobs:runner_child URL CONCURRENCY``."""
    url, concurrency = argv[0], int(argv[1])

    async def main() -> None:
        from frontdesk.core.runner import serve

        settings = _settings(url, concurrency)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

        def ready() -> None:
            sys.stdout.write(json.dumps({"ready": True}) + "\n")
            sys.stdout.flush()

        await serve(settings, _registry(settings), stop, ready)

    asyncio.run(main())


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- this process: the call side ----------------------------------------------------------


async def _batch(store: Any, client: Any, tool_name: str, args: dict, n: int) -> list[float]:
    """Queue ``n`` jobs at once; the event-loop seconds each enqueue took here."""
    spent: list[float] = []

    async def one(i: int) -> int:
        start = time.thread_time()
        row = await store.create(
            caller=f"b{i}", tool=tool_name, pattern="background", department="benchjobs",
            plugin="benchjobs", args=args, note="queued for the runner",
        )  # fmt: skip
        if client is not None:
            await client.enqueue(row.id)
        spent.append(time.thread_time() - start)
        return row.id

    ids = await asyncio.gather(*(one(i) for i in range(n)))
    return spent, ids


async def _wait_done(store: Any, ids: list[int], timeout: float = 300.0) -> list[Any]:
    from sqlalchemy import text

    deadline = time.monotonic() + timeout
    count = text("SELECT count(*) FROM tasks WHERE id >= :lo AND status = 'succeeded'")
    while True:
        async with store.read_engine.connect() as conn:
            done = (await conn.execute(count, {"lo": min(ids)})).scalar_one()
        if done >= len(ids) or time.monotonic() > deadline:
            return [await store.get(i) for i in ids]
        await asyncio.sleep(0.005)


async def _measure(url: str, concurrency: int, plan: list[tuple[str, str, dict, int, int]]):
    from frontdesk.core.schema import open_store

    try:
        from frontdesk.core.jobs import JobClient
    except ImportError:  # the runner before DBOS: a row is the whole enqueue
        JobClient = None  # noqa: N806
    if os.environ.get("FRONTDESK_BENCH_JOBS_BASELINE"):
        JobClient = None  # noqa: N806

    settings = _settings(url, concurrency)
    registry = _registry(settings)
    store = await open_store(url, registry)
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / "run.py"), "--child", "jobs:runner_child", url,
         str(concurrency)],
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(BENCH), os.environ.get("PYTHONPATH")) if p
        )},
    )  # fmt: skip
    client = JobClient(settings) if JobClient is not None else None
    out: dict[str, Any] = {}
    try:
        assert json.loads(proc.stdout.readline()).get("ready")
        await asyncio.sleep(1.0)  # the runner's first poll and recovery pass
        for label, tool_name, args, n, rounds in plan:
            latencies, enqueue, cpu = [], [], 0.0
            lag = LoopLag()
            lag.start()
            for _ in range(rounds):
                await store.count()  # the previous round's rows settled
                before = _cpu(proc.pid)
                spent, ids = await _batch(store, client, tool_name, args, n)
                rows = await _wait_done(store, ids)
                cpu += _cpu(proc.pid) - before
                enqueue += spent
                latencies += [
                    (r.finished_at - r.created_at).total_seconds()
                    for r in rows
                    if r.finished_at is not None
                ]
            jobs = n * rounds
            lags = await lag.stop()
            out[label] = {
                "call_loop_lag_ms": summary(lags, 1e3),
                "jobs": jobs,
                "finished": len(latencies),
                "enqueue_to_commit_ms": summary(latencies, 1e3),
                "call_side_enqueue_ms": summary(enqueue, 1e3),
                "runner_cpu_ms_per_job": cpu / jobs * 1e3,
            }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        if client is not None:
            await client.aclose()
        await store.close()
    return out


def _plan(quick: bool) -> list[tuple[str, str, dict, int, int]]:
    singles = 20 if quick else 60
    plan = [
        ("one job at a time", "bench_noop", {}, 1, singles),
        ("200 at once", "bench_noop", {}, 200, 1 if quick else 3),
    ]
    plan.append(("one job at a time, 3 steps", "bench_steps", {"steps": 3}, 1, singles))
    return plan


def _postgres_url() -> str | None:
    admin = os.environ.get("FRONTDESK_TEST_POSTGRES_URL")
    if not admin:
        return None
    sys.path.insert(0, str(BENCH.parent / "tests"))
    import pgtest

    name = f"bench_jobs_{uuid.uuid4().hex[:8]}"
    pgtest._run(pgtest._admin(admin, f'CREATE DATABASE "{name}" TEMPLATE template0'))
    from sqlalchemy.engine import make_url

    return make_url(admin).set(database=name).render_as_string(hide_password=False)


def _drop_postgres(url: str) -> None:
    import pgtest
    from sqlalchemy.engine import make_url

    admin = os.environ["FRONTDESK_TEST_POSTGRES_URL"]
    name = make_url(url).database
    pgtest._run(pgtest._admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def run(quick: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with scratch("jobs-") as tmp:
        url = sqlite_url(tmp / "jobs.db")
        result["sqlite"] = asyncio.run(_measure(url, 200, _plan(quick)))
    pg = _postgres_url()
    if pg is not None:
        try:
            result["postgres"] = asyncio.run(_measure(pg, 200, _plan(quick)))
        finally:
            _drop_postgres(pg)
    for backend in result.values():
        steps, plain = backend.get("one job at a time, 3 steps"), backend.get("one job at a time")
        if steps and plain:
            extra = (
                steps["enqueue_to_commit_ms"]["median"] - plain["enqueue_to_commit_ms"]["median"]
            )
            backend["per_step_ms"] = extra / 3
            backend["per_step_cpu_ms"] = (
                steps["runner_cpu_ms_per_job"] - plain["runner_cpu_ms_per_job"]
            ) / 3
    return result


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(json.dumps(run(quick), indent=2))
