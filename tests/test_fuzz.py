"""Hostile tool arguments, fuzzed with hypothesis against every built-in tool.

The LLM chooses tool arguments from what an untrusted caller says, so any JSON can arrive:
wrong types, missing or extra keys, 1 MB strings, unicode, SQL-injection-shaped text, card
numbers, malformed JSON. Every case must end in a result or a short caller-safe ToolError,
never an unhandled exception, and never a half-written row.

Two levels, each over every built-in tool:
- ``validate``: ``ToolSpec.validate`` alone, FUZZ_VALIDATE examples per tool (default 1,000);
- ``run_tool``: the full pattern wrapper on a real store (rows, events, the tool body, the
  runner for background jobs), FUZZ_EXAMPLES per tool (default 100).

The long run adds 1,000 end-to-end examples per tool (75 s on 2 cores)::

    FRONTDESK_FUZZ_LONG=1 .venv/bin/pytest -m slow tests/test_fuzz.py
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jobkit
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from livekit.agents import llm

from frontdesk.agents.patterns import run_tool
from frontdesk.agents.runtime import CallRuntime
from frontdesk.core import host
from frontdesk.core.errors import ToolError
from frontdesk.core.recording import invalid_input_sentence
from frontdesk.core.runner import Runner
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.db.models import FINISHED
from frontdesk.db.store import TaskStore

FUZZ_VALIDATE = int(os.environ.get("FRONTDESK_FUZZ_VALIDATE", "1000"))
FUZZ_EXAMPLES = int(os.environ.get("FRONTDESK_FUZZ_EXAMPLES", "100"))
FUZZ_SLOW_EXAMPLES = int(os.environ.get("FRONTDESK_FUZZ_LONG_EXAMPLES", "1000"))

BUILTINS = host.load(Settings(load_plugins="")).tools
TOOLS = sorted(BUILTINS)

MEGABYTE = "x" * 1_000_000
CARD = "4111 1111 1111 1111"
NASTY = [
    MEGABYTE,
    "日本語のテキスト 🎉👩‍👩‍👧 \u202eevil\u202c \u0000 \ud7ff",
    "'; DROP TABLE tasks; --",
    "1 OR 1=1",
    "INV-1001' OR '1'='1",
    "PAY-%",
    "%_\\",
    f"my card is {CARD}, cvv 123",
    "99999999999999999999999999",
    "-1",
    "0",
    "NaN",
    "1e309",
    "",
    " ",
    "\n\t",
    "{not json",
    "2026-03",
    "last-month",
    "statement",
    "activity",
    "INV-1001",
    "358.40",
]
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(NASTY),
)
# Kept shallow: hypothesis' own cost per example grows with the strategy, and breadth (many
# examples) finds more here than depth (nested JSON is refused by type before anything runs).
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=3,
)


def raw_arguments(name: str) -> st.SearchStrategy[Any]:
    """What an LLM might send for tool ``name``: mostly its own parameter names with any
    values, sometimes extra keys, sometimes not an object or not JSON at all."""
    params = list(BUILTINS[name].model().model_fields)
    own = st.fixed_dictionaries({}, optional={p: VALUES for p in params})
    extra = st.dictionaries(
        st.sampled_from([*params, "__proto__", "id", CARD, MEGABYTE[:5000]]), VALUES, max_size=3
    )
    as_json = st.builds(lambda d: json.dumps(d, default=str), own)
    broken = st.sampled_from(['{"a": ', "[1, 2", "null", "42", '"text"', "{}", "", MEGABYTE])
    return st.one_of(own, own, own, extra, as_json, broken)


def caller_safe(message: str) -> None:
    assert 0 < len(message) <= 600, len(message)
    for leak in (
        "Traceback",
        "sqlalchemy",
        "sqlite3",
        "asyncpg",
        "Error:",
        MEGABYTE[:1000],
        "4111111111111111",
    ):
        assert leak not in message, (leak, message[:200])


# -- level 1: validation only ----------------------------------------------------------------


@pytest.mark.parametrize("name", TOOLS)
def test_validate_answers_every_input_with_args_or_a_clean_tool_error(name):
    spec = BUILTINS[name]

    @hsettings(max_examples=FUZZ_VALIDATE, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(raw=raw_arguments(name))
    def check(raw: Any) -> None:
        try:
            args = spec.validate(raw)
        except ToolError as exc:
            # What the caller hears: run_tool passes validation messages through this.
            caller_safe(invalid_input_sentence(spec, str(exc)))
            return
        assert set(args) == set(spec.model().model_fields)
        json.dumps(args, default=str)  # what a background row would store

    check()


# -- level 2: the whole wrapper on a real store ------------------------------------------------


class Harness:
    """A call runtime with no voice session (``run_ctx`` None), as the fuzz drives tools
    directly; the store, runner and plugin registry are the real ones."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.settings = Settings(
            database_url=f"sqlite+aiosqlite:///{tmp}/fuzz.db", load_plugins="",
            job_lease_seconds=5,
        )  # fmt: skip
        self.registry = host.load(self.settings)
        self.store: TaskStore = self.run(open_store(self.settings.database_url))
        self.runtime = CallRuntime(
            None,  # type: ignore[arg-type]
            store=self.store, registry=self.registry, settings=self.settings, caller="fuzzer",
        )  # fmt: skip
        # A real runner (a DBOS executor) on this loop: it runs while the harness runs the loop.
        self.runner = Runner(self.store, self.registry, self.settings)
        self.stop = asyncio.Event()
        self.runner_task = self.loop.create_task(self.runner.run(self.stop))
        self.run(self.runner.started.wait())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.stop.set()
        self.run(self.runner_task)
        self.run(self.store.close())
        self.loop.close()

    async def call(self, name: str, raw: Any) -> None:
        spec = self.registry.tools[name]
        before = await self.store.count()
        try:
            result = await run_tool(spec, self.runtime, "fuzz", raw, None)
        except llm.ToolError as exc:
            caller_safe(exc.message)
        else:
            assert result is None or isinstance(result, str)
        # Fire-and-forget work finishes on its own; then its end is recorded in the background.
        for _ in range(100):
            pending = {w for _, w in self.runtime.inflight.values()} | self.runtime._background
            if not pending:
                break
            await asyncio.wait(pending, timeout=10)
        rows = await self.store.list(caller="fuzzer", limit=(await self.store.count()) - before)
        for task in rows:
            if task.pattern == "background" and not task.finished:
                task = await jobkit.finished(self.store, task.id)
            assert task.status in FINISHED, (task.id, task.tool, task.status)
            assert task.finished_at is not None and task.lease_owner is None
            stored = json.dumps([task.args, task.error], default=str)
            assert "4111111111111111" not in stored.replace(" ", "") and len(stored) < 100_000


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("fuzz"))
    yield h
    h.close()


def _fuzz_tool(harness: Harness, name: str, examples: int) -> None:
    @hsettings(max_examples=examples, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(raw=raw_arguments(name))
    def check(raw: Any) -> None:
        harness.run(harness.call(name, raw))

    check()
    counts = harness.run(harness.store.count(tool=name))
    assert counts >= 1
    assert harness.run(harness.store.count(status="running")) == 0


@pytest.mark.parametrize("name", TOOLS)
def test_run_tool_ends_every_input_cleanly_with_every_row_finished(harness, name):
    _fuzz_tool(harness, name, FUZZ_EXAMPLES)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("FRONTDESK_FUZZ_LONG"),
    reason="the long fuzz runs on request: FRONTDESK_FUZZ_LONG=1 pytest -m slow tests/test_fuzz.py",
)
@pytest.mark.parametrize("name", TOOLS)
def test_run_tool_long_fuzz(harness, name):
    _fuzz_tool(harness, name, FUZZ_SLOW_EXAMPLES)


def test_every_builtin_tool_is_fuzzed():
    # New built-in tools join the fuzz automatically; this pins that the list is not empty.
    assert {
        "task_status",
        "cancel_task",
        "pay_invoice",
        "generate_report",
        "search_knowledge",
    } <= set(TOOLS)


def test_ci_runs_hypothesis_derandomized():
    """CI loads the "ci" profile (tests/conftest.py), whose examples are the same every run;
    the tests' own settings inherit it."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    assert hsettings.get_profile("ci").derandomize is True
    assert "export HYPOTHESIS_PROFILE=ci" in (root / ".ci" / "run").read_text()
    code = (
        "import sys; sys.path.insert(0, 'tests'); import conftest\n"
        "from hypothesis import settings\n"
        "print(settings.default.derandomize, settings(max_examples=5).derandomize)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "HYPOTHESIS_PROFILE": "ci"},
        timeout=120,
    )
    assert out.stdout.split() == ["True", "True"], out.stderr
