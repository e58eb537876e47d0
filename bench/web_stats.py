"""§11, stats storm: listings while stats run, at 100,000 tasks on SQLite (issue 22, item 2).

``frontdesk web``'s app runs in its own process (uvicorn on loopback, as the command serves it;
a ``--child`` of bench/run.py so the stats cache can be set). This process opens 40 clients that
ask ``GET /api/stats?window=all`` (every finished task: the full aggregate) back to back for the
whole run, and one client that asks ``GET /api/tasks?limit=50`` one request at a time.
Measured: the listing's latency (median, p99, max), and every stats answer's status (500s
counted; 503 with Retry-After is the allowed worst). Baseline: the same listing client with no
stats running. Three servers:

- ``cached``: as shipped (answers kept 10 s, one computation at a time, on its own connection);
- ``uncached``: the cache off, so the aggregate runs back to back for the whole run: what the
  separate connection alone buys;
- the audit's figures for the code before (read engine of one connection, no cache) are in
  docs/performance.md: 7.3 s for the listing beside 6 stats, 500s at 55.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import BENCH, scratch, sqlite_url, summary
from history import generate

ROWS = 100_000
STATS_CLIENTS = 40


def server_child(argv: list[str]) -> None:
    """``run.py --child web_stats:server_child URL TTL``: the console on a free loopback port;
    prints its base URL, serves until stdin closes."""
    asyncio.run(_server(argv[0], float(argv[1])))


async def _server(url: str, ttl: float) -> None:
    import uvicorn

    from frontdesk.agents.programs.web import stats
    from frontdesk.agents.programs.web.app import create_app

    stats.TTL = ttl
    app = create_app(url)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(json.dumps({"base": f"http://127.0.0.1:{port}"}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # until the bench closes our stdin
    print(json.dumps({"computed": app.state.stats.computed}), flush=True)
    server.should_exit = True
    await task


async def _listing(c: Any, stop: asyncio.Event, times: list[float], codes: Counter) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        r = await c.get("/api/tasks", params={"limit": 50})
        times.append(time.perf_counter() - t0)
        codes[r.status_code] += 1


async def _stats(c: Any, stop: asyncio.Event, times: list[float], codes: Counter) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        r = await c.get("/api/stats", params={"window": "all"})
        times.append(time.perf_counter() - t0)
        codes[r.status_code] += 1
        if r.status_code == 503:
            assert r.headers.get("retry-after"), "a 503 without Retry-After"
            await asyncio.sleep(float(r.headers["retry-after"]))


async def _round(url: str, ttl: float, seconds: float, storm: bool) -> dict[str, Any]:
    import httpx

    server = await asyncio.create_subprocess_exec(
        sys.executable,
        str(BENCH / "run.py"),
        "--child",
        "web_stats:server_child",
        url,
        str(ttl),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "FRONTDESK_WEB_TOKEN": ""},
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        base = json.loads(await asyncio.wait_for(server.stdout.readline(), 60))["base"]
        stop = asyncio.Event()
        listing: list[float] = []
        stats: list[float] = []
        listing_codes: Counter = Counter()
        stats_codes: Counter = Counter()
        # Every client made (and connected) before the clock starts: building 41 clients
        # (an SSL context each) would otherwise stall this process's loop, not the server.
        clients = [httpx.AsyncClient(base_url=base, timeout=120) for _ in range(STATS_CLIENTS + 1)]
        try:
            for c in clients:
                await c.get("/api/tasks", params={"limit": 1})
            tasks = [asyncio.create_task(_listing(clients[0], stop, listing, listing_codes))]
            if storm:
                tasks += [
                    asyncio.create_task(_stats(c, stop, stats, stats_codes)) for c in clients[1:]
                ]
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.gather(*tasks)
        finally:
            for c in clients:
                await c.aclose()
        server.stdin.close()
        computed = json.loads(await asyncio.wait_for(server.stdout.readline(), 60))["computed"]
    finally:
        if server.returncode is None:
            server.kill()
        await server.wait()
    return {
        "listing_ms": summary(listing, 1e3),
        "listing_status": dict(listing_codes),
        "stats_ms": summary(stats, 1e3),
        "stats_status": dict(stats_codes),
        "aggregates_computed": computed,
    }


async def storm(quick: bool) -> dict[str, Any]:
    from frontdesk.core.schema import open_store

    seconds = 10.0 if quick else 30.0
    with scratch("web-stats-") as dir_:
        db: Path = dir_ / "stats.db"
        url = sqlite_url(db)
        store = await open_store(url)
        await store.close()
        load = generate(db, ROWS)
        out: dict[str, Any] = {
            "rows": ROWS,
            "stats_clients": STATS_CLIENTS,
            "seconds": seconds,
            "load_seconds": load,
        }
        out["baseline"] = await _round(url, 10.0, seconds / 2, storm=False)
        out["cached"] = await _round(url, 10.0, seconds, storm=True)
        out["uncached"] = await _round(url, 0.0, seconds, storm=True)
    return out
