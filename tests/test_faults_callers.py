"""Callers against a Postgres that is full or gone (issue 23 items 6 and 7), on a private
postmaster (tests/pgfault.py).

- ``max_connections`` reached by others: 50 callers wait (bounded) for a slot and all get
  through once one frees, none failing as an internal error; held past the bound, each fails
  as "the database is not answering" (the caller's STORE_DOWN sentence, the console's 503);
- ``frontdesk simulate`` with the postmaster SIGKILLed mid-call and restarted: the run plays
  to its end (no crash, no traceback), later turns work again, and the process logs the
  outage as state changes.
"""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import crashkit
import crashtrials
import pgfault
import pytest

from frontdesk.core.schema import open_store
from frontdesk.db.engine import CONNECT_WAIT_ENV
from frontdesk.db.outage import OUTAGE, from_database, store_down

pytestmark = pytest.mark.faults

CALLERS = 50
SLOTS = 8


async def hog(port: int) -> list[asyncpg.Connection]:
    """Take every slot the server has left, as other processes' pools would."""
    taken = []
    while True:
        try:
            taken.append(
                await asyncpg.connect(
                    host="127.0.0.1", port=port, user="postgres", database="postgres"
                )
            )
        except asyncpg.TooManyConnectionsError:
            return taken


async def one_caller(store, n: int) -> str:  # noqa: ANN001
    """What a caller's turn does to the store: a row, then its end. 'ok', 'store down' (the
    STORE_DOWN sentence) or the unexpected error."""
    try:
        row = await store.create(
            caller=f"c{n}", tool="lookup", pattern="interruptible", status="running"
        )
        await store.transition(row.id, "succeeded", result="ok")
        return "ok"
    except Exception as exc:
        if from_database(exc) and store_down(exc):
            return "store down"
        return f"internal error: {type(exc).__name__}: {exc}"


async def test_a_full_server_makes_callers_wait_then_get_through(monkeypatch) -> None:
    monkeypatch.setenv(CONNECT_WAIT_ENV, "20")
    OUTAGE.reset()
    with pgfault.private_postgres(max_connections=SLOTS) as pg:
        setup = await open_store(pg.url)  # the schema, then its connections go back
        await setup.close()
        store = await open_store(pg.url)
        await store.read_engine.dispose()  # no connection of its own: it must get one
        taken = await hog(pg.port)  # every slot held elsewhere
        try:
            callers = asyncio.gather(*(one_caller(store, n) for n in range(CALLERS)))
            await asyncio.sleep(1.0)  # they are all waiting now, on the pool or a slot
            started = time.monotonic()
            for conn in taken[: len(taken) // 2]:
                await conn.close()  # half the slots free up
            results = await callers
            waited = time.monotonic() - started
        finally:
            for conn in taken:
                if not conn.is_closed():
                    await conn.close()
            await store.close()
    print(f"{CALLERS} callers through {waited:.2f} s after slots freed: {set(results)}")
    assert results == ["ok"] * CALLERS


async def test_a_server_full_past_the_bound_is_store_down_not_an_internal_error(
    monkeypatch,
) -> None:
    monkeypatch.setenv(CONNECT_WAIT_ENV, "1")
    OUTAGE.reset()
    with pgfault.private_postgres(max_connections=SLOTS) as pg:
        setup = await open_store(pg.url)
        await setup.close()
        store = await open_store(pg.url)
        await store.read_engine.dispose()  # no connection of its own: it must get one
        taken = await hog(pg.port)
        try:
            results = await asyncio.gather(*(one_caller(store, n) for n in range(CALLERS)))
            for conn in taken:
                await conn.close()
            after = await one_caller(store, CALLERS)
        finally:
            for conn in taken:
                if not conn.is_closed():
                    await conn.close()
            await store.close()
    assert set(results) == {"store down"}, set(results)
    assert after == "ok"


def test_simulate_plays_through_a_postgres_kill(tmp_path) -> None:
    with pgfault.private_postgres() as pg:
        crashtrials._queue(pg.url, [])  # the schema first
        scenario = crashkit.write_scenario(
            tmp_path / "outage.yaml",
            "ann",
            [
                crashtrials.TO_LAB,
                {"user": "look up argon", "llm": [
                    {"tools": [{"lookup": {"query": "argon", "seconds": 2}}]}, {"say": "Hm."}]},
                {"wait": {"seconds": 4}},
                {"expect": {"task": "lookup"}},
                {"wait": {"seconds": 3}},
                {"user": "look up neon", "llm": [
                    {"tools": [{"lookup": {"query": "neon"}}]}, {"say": "Done."}]},
                {"expect": {"task": "lookup", "status": "succeeded"}},
            ],
        )  # fmt: skip
        call = crashkit.start(
            "simulate", str(scenario), "--json", "--db", pg.url, "--no-runner",
            FRONTDESK_DB_CONNECT_WAIT_SECONDS="1",
        )  # fmt: skip
        try:
            crashkit.wait_until(lambda: "lookup" in crashkit.output(call)[0], timeout=60, proc=call)
            pg.kill()  # mid-lookup: its end is written into the outage
            time.sleep(4.0)
            pg.start()
            code = call.wait(90)
        finally:
            out, err = crashkit.stop(call)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    outputs = [e for e in events if e["type"] == "tool_output" and e["name"] == "lookup"]
    print(f"simulate exit {code}; stderr lines: {len(err.splitlines())}")
    print(err)
    assert "Traceback" not in err, err[-3000:]
    assert code in (0, 1), err[-3000:]
    # The second lookup, after the restart, worked; the run was not cut short.
    assert outputs and "neon is fine" in outputs[-1]["output"], outputs
    assert err.count("not answering (") <= 1, err


async def test_the_console_answers_503_through_a_postgres_kill_and_logs_state_changes():
    """``frontdesk web`` on a private Postgres that is SIGKILLed: 503 with Retry-After (not
    500) while it is down, 200 once it is back, and the outage in its log as one line down
    and one line back, with no traceback."""
    import httpx
    from test_web_live import _frontdesk_web

    with pgfault.private_postgres() as pg:
        await (await open_store(pg.url)).close()  # the schema
        proc, base = await _frontdesk_web(pg.url)
        codes: list[int] = []
        try:
            async with httpx.AsyncClient(base_url=base, timeout=30) as c:
                assert (await c.get("/api/tasks")).status_code == 200
                pg.kill()
                for _ in range(5):
                    for path in ("/api/tasks", "/api/stats", "/tasks", "/calls"):
                        r = await c.get(path)
                        codes.append(r.status_code)
                        assert r.status_code == 503, (path, r.status_code, r.text[:300])
                        assert r.headers["retry-after"] == "5"
                pg.start()
                started = time.monotonic()
                while (await c.get("/api/tasks")).status_code != 200:
                    assert time.monotonic() - started < 30
                    await asyncio.sleep(0.05)
                first_200 = time.monotonic() - started
                await asyncio.sleep(2.5)  # the console's probe (every 2 s) logs "back"
        finally:
            proc.send_signal(2)
            await asyncio.wait_for(proc.wait(), 30)
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
    print(f"console: {len(codes)} requests answered 503, first 200 {first_200:.2f} s after "
          f"the restart; log:\n{err}")  # fmt: skip
    assert "Traceback" not in err, err
    assert err.count("not answering (") == 1, err
    assert err.count("answering again") == 1, err
