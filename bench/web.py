"""§11 The web console: ``GET /api/tasks`` at 1,000,000 rows, 50 SSE clients, and listings
during a stats storm (bench/web_stats.py).

1. The listing: 1M task rows (bench/history.py's generator, indexes rebuilt from the
   migrations, so 0003's per-filter indexes included), then the first page (50 rows) of
   ``GET /api/tasks`` with each single filter, through the whole app (httpx's ASGI transport:
   routing, validation, the query, JSON), median and p99 per filter. The query plan of each is
   recorded to show which index serves it. Baseline: the same SELECT on raw sqlite3.
2. Live events: ``frontdesk web`` as its own process, 50 SSE clients in this one, and a writer
   process that commits one task at a time through the TaskStore and prints the monotonic
   clock after each commit (CLOCK_MONOTONIC is system-wide, so the two processes' clocks
   agree). Measured: commit -> event at each client, and for each commit the time until the
   last of the 50 had it (p95 of that is the target); and the server process's CPU while the
   50 clients sit idle, from /proc.
3. Stats storm (web_stats.py): at 100,000 tasks, 40 clients asking ``/api/stats`` back to back
   while one asks ``/api/tasks?limit=50``: the listing's p99 and every stats answer's status.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from common import BENCH, ratio, scratch, sqlite_url, summary
from history import CALLERS, DEPARTMENTS, FMT, PATTERNS, TOOLS, generate
from web_stats import storm

CLIENTS = 50
BASE = datetime(2025, 1, 1)  # history.generate's first created_at; row i is 30 s later each


def _filters(rows: int, rng: random.Random) -> dict[str, Any]:
    """Each single filter, as a function of the repetition (varying the value where the
    column has many)."""
    middle = (BASE + timedelta(seconds=rows // 2 * 30)).isoformat()
    recent = (BASE + timedelta(seconds=(rows - 100) * 30)).isoformat()
    return {
        "none": lambda i: {},
        "caller": lambda i: {"caller": f"caller-{rng.randrange(CALLERS)}"},
        "status (running, 2.5%)": lambda i: {"status": "running"},
        "status (succeeded, 80%)": lambda i: {"status": "succeeded"},
        "department": lambda i: {"department": DEPARTMENTS[i % len(DEPARTMENTS)]},
        "tool": lambda i: {"tool": TOOLS[i % len(TOOLS)]},
        "pattern": lambda i: {"pattern": PATTERNS[i % len(PATTERNS)]},
        "session_id": lambda i: {"session_id": f"call-{rng.randrange(rows // 4)}"},
        "since (last 100 rows)": lambda i: {"since": recent},
        "until (the middle)": lambda i: {"until": middle},
    }


def _raw(rows: int) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """The same queries as SQL on raw sqlite3 (times in SQLAlchemy's SQLite format)."""
    middle = (BASE + timedelta(seconds=rows // 2 * 30)).strftime(FMT)
    recent = (BASE + timedelta(seconds=(rows - 100) * 30)).strftime(FMT)
    return {
        "none": ("", ()),
        "caller": ("WHERE caller = ?", ("caller-7",)),
        "status (running, 2.5%)": ("WHERE status = ?", ("running",)),
        "status (succeeded, 80%)": ("WHERE status = ?", ("succeeded",)),
        "department": ("WHERE department = ?", ("lab",)),
        "tool": ("WHERE tool = ?", ("charge",)),
        "pattern": ("WHERE pattern = ?", ("critical",)),
        "session_id": ("WHERE session_id = ?", ("call-7",)),
        "since (last 100 rows)": ("WHERE created_at >= ?", (recent,)),
        "until (the middle)": ("WHERE created_at < ?", (middle,)),
    }


async def _time_listing(url: str, rows: int, reps: int) -> dict[str, dict[str, Any]]:
    """Median and p99 ms of GET /api/tasks per single filter, through the whole app."""
    import httpx

    from frontdesk.agents.programs.web import create_app

    app = create_app(url)
    rng = random.Random(9)
    out: dict[str, dict[str, Any]] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            for name, params in _filters(rows, rng).items():
                times: list[float] = []
                cpu: list[float] = []  # every thread's CPU: what a request costs, load aside
                for i in range(reps + 5):
                    c0, t0 = time.process_time(), time.perf_counter()
                    r = await c.get("/api/tasks", params=params(i))
                    elapsed, spent = time.perf_counter() - t0, time.process_time() - c0
                    assert r.status_code == 200, r.text
                    if i >= 5:  # warm-up
                        times.append(elapsed)
                        cpu.append(spent)
                out[name] = {
                    "ms": summary(times, 1e3),
                    "cpu_ms": summary(cpu, 1e3),
                    "rows_returned": len(r.json()["tasks"]),
                }
    return out


_PG_LOAD = """
INSERT INTO tasks (caller, session_id, department, tool, plugin, pattern, status, args, result,
                   error, attempts, created_at, started_at, finished_at, delivered_at)
SELECT 'caller-' || (i % {callers}), 'call-' || (i / 4), (ARRAY{departments})[i % 5 + 1],
       (ARRAY{tools})[i % 8 + 1], 'kit', (ARRAY{patterns})[i % 4 + 1], status,
       '{{"q": "x"}}'::json, CASE WHEN status = 'succeeded' THEN '{{"summary": "ok"}}'::json END,
       CASE WHEN status = 'failed' THEN 'boom' END, 0, created,
       CASE WHEN status <> 'queued' THEN created + interval '50 ms' END,
       CASE WHEN status IN ('succeeded', 'failed', 'cancelled')
            THEN created + interval '50 ms' + (i % 5000) * interval '1 ms' END,
       CASE WHEN status IN ('succeeded', 'failed', 'cancelled') THEN created END
FROM (SELECT i, timestamptz '2025-01-01 00:00:00+00' + i * interval '30 seconds' AS created,
             CASE WHEN r < 0.80 THEN 'succeeded' WHEN r < 0.90 THEN 'failed'
                  WHEN r < 0.95 THEN 'cancelled' WHEN r < 0.975 THEN 'queued'
                  ELSE 'running' END AS status
      FROM (SELECT i, random() AS r FROM generate_series(0, {rows} - 1) AS i) AS g) AS s
"""


async def listing_postgres(quick: bool) -> dict[str, Any]:
    """The same listing on Postgres (a throwaway database on FRONTDESK_TEST_POSTGRES_URL's
    server), rows generated in SQL with indexes dropped and rebuilt, then ANALYZE."""
    sys.path.insert(0, str(BENCH.parent / "tests"))
    import asyncpg
    import pgtest
    from sqlalchemy.engine import make_url

    from frontdesk.core.schema import open_store

    if pgtest.check_server() is not None:
        return {"skipped": pgtest.check_server()}
    rows = 200_000 if quick else 1_000_000
    reps = 40 if quick else 300
    with pgtest.fresh_database("bench_web") as url:
        store = await open_store(url)
        await store.close()
        u = make_url(url)
        conn = await asyncpg.connect(
            host=u.host, port=u.port, user=u.username, password=u.password, database=u.database
        )
        try:
            t0 = time.perf_counter()
            indexes = await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'tasks' "
                "AND indexname LIKE 'ix_%'"
            )
            for ix in indexes:
                await conn.execute(f'DROP INDEX "{ix["indexname"]}"')
            arr = lambda xs: "[" + ", ".join(f"'{x}'" for x in xs) + "]"  # noqa: E731
            await conn.execute(
                _PG_LOAD.format(
                    callers=CALLERS,
                    departments=arr(DEPARTMENTS),
                    tools=arr(TOOLS),
                    patterns=arr(PATTERNS),
                    rows=rows,
                )
            )
            for ix in indexes:
                await conn.execute(ix["indexdef"])
            await conn.execute("ANALYZE tasks")
            load = time.perf_counter() - t0
        finally:
            await conn.close()
        filters = await _time_listing(url, rows, reps)
    return {"rows": rows, "load_seconds": load, "filters": filters}


async def listing(quick: bool) -> dict[str, Any]:
    from frontdesk.core.schema import open_store

    rows = 200_000 if quick else 1_000_000
    reps = 40 if quick else 300
    out: dict[str, Any] = {"rows": rows}
    with scratch("web-") as dir_:
        db = dir_ / "web.db"
        url = sqlite_url(db)
        store = await open_store(url)
        await store.close()
        out["load_seconds"] = generate(db, rows)
        out["filters"] = await _time_listing(url, rows, reps)
        raw = sqlite3.connect(db)
        for name, (where, args) in _raw(rows).items():
            sql = f"SELECT * FROM tasks {where} ORDER BY id DESC LIMIT 50"
            base = []
            for _ in range(reps):
                t0 = time.perf_counter()
                raw.execute(sql, args).fetchall()
                base.append(time.perf_counter() - t0)
            entry = out["filters"][name]
            entry["raw_sqlite3_ms"] = summary(base, 1e3)
            entry["ratio_vs_raw"] = ratio(entry["ms"]["median"], entry["raw_sqlite3_ms"]["median"])
            entry["plan"] = [p[-1] for p in raw.execute("EXPLAIN QUERY PLAN " + sql, args)]
        raw.close()
    return out


# -- live events -------------------------------------------------------------------------------


def writer_child(argv: list[str]) -> None:
    """``run.py --child web:writer_child URL``: one task per line read, then its commit time."""
    asyncio.run(_writer_main(argv[0]))


async def _writer_main(url: str) -> None:
    from frontdesk.core.schema import open_store

    store = await open_store(url)
    print(json.dumps({"ready": True}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        n = int(line)
        task = await store.create(caller=f"bench-{n}", tool="experiment", pattern="background")
        print(json.dumps({"task_id": task.id, "at": time.monotonic()}), flush=True)
    await store.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _client(base: str, received: dict[int, list[float]], ready: asyncio.Event) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=None) as c:
        async with c.stream("GET", "/api/events") as response:
            lines = response.aiter_lines()
            await lines.__anext__()  # "retry:", sent once the hub has this client
            ready.set()
            async for line in lines:
                if line.startswith("data: "):
                    at = time.monotonic()
                    received.setdefault(json.loads(line[6:])["task_id"], []).append(at)


async def live(quick: bool) -> dict[str, Any]:
    with scratch("web-live-") as dir_:
        return await _live(sqlite_url(dir_ / "live.db"), quick)


async def live_postgres(quick: bool) -> dict[str, Any]:
    """The same 50 clients on Postgres: the hub wakes on the writer's NOTIFY."""
    sys.path.insert(0, str(BENCH.parent / "tests"))
    import pgtest

    if pgtest.check_server() is not None:
        return {"skipped": pgtest.check_server()}
    with pgtest.fresh_database("bench_live") as url:
        return await _live(url, quick)


async def _live(url: str, quick: bool) -> dict[str, Any]:
    commits = 15 if quick else 60
    idle_seconds = 5.0 if quick else 20.0
    env = {**os.environ, "FRONTDESK_WEB_TOKEN": ""}
    frontdesk = str(Path(sys.executable).parent / "frontdesk")
    server = await asyncio.create_subprocess_exec(
        frontdesk, "web", "--port", "0", "--db", url, env=env, stderr=asyncio.subprocess.PIPE
    )
    writer = None
    tasks: list[asyncio.Task[None]] = []
    try:
        assert server.stderr is not None
        line = (await asyncio.wait_for(server.stderr.readline(), 60)).decode()
        base = line.split()[3]
        received: dict[int, list[float]] = {}
        readies = [asyncio.Event() for _ in range(CLIENTS)]
        tasks = [asyncio.create_task(_client(base, received, r)) for r in readies]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)

        await asyncio.sleep(1.0)  # settle after the connections
        cpu0, t0 = _cpu_seconds(server.pid), time.monotonic()
        await asyncio.sleep(idle_seconds)
        idle_cpu = (_cpu_seconds(server.pid) - cpu0) / (time.monotonic() - t0)

        writer = await asyncio.create_subprocess_exec(
            sys.executable,
            str(BENCH / "run.py"),
            "--child",
            "web:writer_child",
            url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert writer.stdin is not None and writer.stdout is not None
        assert json.loads(await writer.stdout.readline())["ready"]
        rng = random.Random(3)
        committed: dict[int, float] = {}
        for n in range(commits):
            writer.stdin.write(f"{n}\n".encode())
            await writer.stdin.drain()
            done = json.loads(await writer.stdout.readline())
            committed[done["task_id"]] = done["at"]
            deadline = time.monotonic() + 10
            while len(received.get(done["task_id"], [])) < CLIENTS:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.005)
            await asyncio.sleep(rng.uniform(0.1, 0.4))  # not in step with the watch
        writer.stdin.close()
        await writer.wait()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.terminate()
        await server.wait()
        if writer is not None and writer.returncode is None:
            writer.kill()
            await writer.wait()
    every: list[float] = []
    last: list[float] = []
    complete = 0
    for task_id, at in committed.items():
        got = [t - at for t in received.get(task_id, [])]
        every += got
        if len(got) == CLIENTS:
            complete += 1
            last.append(max(got))
    return {
        "clients": CLIENTS,
        "commits": commits,
        "commits_seen_by_every_client": complete,
        "commit_to_each_client_ms": summary(every, 1e3),
        "commit_to_last_client_ms": summary(last, 1e3),
        "idle_seconds": idle_seconds,
        "idle_cpu_percent_of_a_core": idle_cpu * 100,
    }


async def run(quick: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "listing": await listing(quick),
        "listing_postgres": await listing_postgres(quick),
        "live": await live(quick),
        "live_postgres": await live_postgres(quick),
        "stats_storm": await storm(quick),
    }
    filters = result["listing"]["filters"]
    worst = max(filters, key=lambda k: filters[k]["ms"]["p99"])
    lv = result["live"]
    result["targets"] = {
        f"GET /api/tasks first page, worst single-filter p99 ms ({worst})": {
            "target": "<= 20",
            "value": filters[worst]["ms"]["p99"],
        },
        **(
            {
                "GET /api/tasks on Postgres, worst single-filter p99 ms": {
                    "target": "<= 20",
                    "value": max(f["ms"]["p99"] for f in pg["filters"].values()),
                }
            }
            if "filters" in (pg := result["listing_postgres"])
            else {}
        ),
        "SSE commit -> all 50 clients p95 ms": {
            "target": "<= 1000",
            "value": lv["commit_to_last_client_ms"].get("p95"),
        },
        "SSE idle server CPU % of a core (50 clients)": {
            "target": "<= 2",
            "value": lv["idle_cpu_percent_of_a_core"],
        },
        **(
            {
                "SSE on Postgres (NOTIFY) commit -> all 50 clients p95 ms": {
                    "target": "<= 1000",
                    "value": lp["commit_to_last_client_ms"].get("p95"),
                },
                "SSE on Postgres idle server CPU % of a core": {
                    "target": "<= 2",
                    "value": lp["idle_cpu_percent_of_a_core"],
                },
            }
            if "clients" in (lp := result["live_postgres"])
            else {}
        ),
        **_storm_targets(result["stats_storm"]),
        "commits seen by every client": {
            "target": f">= {lv['commits']}",
            "value": lv["commits_seen_by_every_client"],
        },
    }
    return result


def _storm_targets(st: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("cached", "uncached"):
        r = st[name]
        out[f"/api/tasks?limit=50 p99 ms beside {st['stats_clients']} /api/stats ({name})"] = {
            "target": "<= 1000",
            "value": r["listing_ms"].get("p99"),
        }
        out[f"/api/stats answers 500 ({name})"] = {
            "target": "0",
            "value": r["stats_status"].get("500", 0) + r["listing_status"].get("500", 0),
        }
    return out
