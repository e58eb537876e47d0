"""Schemathesis fuzzes every operation in /openapi.json against a real server, the pages'
parameters included (they are in the schema, tag "pages"): whatever the input, the answer is
never a 5xx, its status is one the operation documents, and its content type is the one
documented for that status. Bounded and derandomized, so a run is repeatable.

The server runs on loopback in its own thread and event loop (schemathesis calls are
synchronous); /api/events is left out because a stream that stays open has no answer to check.
Both backends: Postgres refuses inputs SQLite accepts (NUL bytes, ids past 32 bits).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    status_code_conformance,
)
from webclient import served

from frontdesk.core.schema import open_store

pytestmark = pytest.mark.backends("sqlite", "postgres")

EXAMPLES = 10  # per operation and mode (valid input, and input the schema forbids)


async def _seed(url: str) -> None:
    store = await open_store(url)
    try:
        await store.call_started("room-1", "ann")
        for i in range(6):
            job = await store.create(
                caller="ann",
                tool="experiment",
                pattern=("background", "critical")[i % 2],
                session_id="room-1",
                args={},
            )
            if i % 3 == 0:
                await store.transition(job.id, "running")
                await store.transition(job.id, "failed", error="x")
    finally:
        await store.close()


@pytest.fixture
def server(db_url: str) -> Iterator[str]:
    """A base URL served by uvicorn from another thread until the test ends."""
    started = threading.Event()
    stop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
    base: list[str] = []
    failure: list[BaseException] = []

    async def main() -> None:
        await _seed(db_url)
        async with served(db_url) as (_, url):
            base.append(url)
            stop.append((asyncio.get_running_loop(), asyncio.Event()))
            started.set()
            await stop[0][1].wait()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced below, not lost in the thread
            failure.append(exc)
            started.set()

    thread = threading.Thread(target=run, name="web-fuzz-server")
    thread.start()
    assert started.wait(60) and not failure, failure
    loop, done = stop[0]
    try:
        yield base[0]
    finally:
        loop.call_soon_threadsafe(done.set)
        thread.join(30)
    assert not failure, failure


def test_no_input_makes_a_server_error(server: str) -> None:
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    operations = [r.ok() for r in schema.get_all_operations()]
    fuzzed = [op for op in operations if op.path != "/api/events"]
    assert {op.path for op in fuzzed} >= {
        "/api/tasks",
        "/api/tasks/{task_id}/retry",
        "/tasks",
        "/tasks/{task_id}",
        "/calls",
        "/stats",
    }
    calls = 0
    for operation, mode in itertools.product(fuzzed, GenerationMode):

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(mode))
        def check(case: schemathesis.Case) -> None:
            nonlocal calls
            response = case.call(base_url=server, timeout=30, headers={"Origin": server})
            calls += 1
            case.validate_response(
                response,
                checks=[not_a_server_error, status_code_conformance, content_type_conformance],
            )

        try:
            check()
        except Unsatisfiable:
            # No input the schema forbids can be sent (no parameters, or a free-form string).
            assert mode is GenerationMode.NEGATIVE, operation.path
    assert calls >= len(fuzzed) * 6
