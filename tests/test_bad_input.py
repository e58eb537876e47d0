"""Bad input through real sessions: malformed tool-call JSON and unknown tools from the LLM, and
a database that stops accepting writes mid-call. Each is answered with a clear message, the
call goes on, and nothing is lost. (Plugin hooks that hang: tests/test_plugins.py.)"""

from __future__ import annotations

import asyncio
from typing import Annotated

import jobkit
import pytest
from pydantic import Field

from frontdesk.agents.patterns import STORE_DOWN
from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import CallDriver, Environment, simulate
from frontdesk.core import ToolError, tool
from frontdesk.db.models import FINISHED
from frontdesk.db.store import TaskStore

TO_LAB = {"user": "the lab please", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]}


async def test_malformed_tool_json_and_unknown_tools_leave_the_call_going(
    settings, registry, store, transcript
):
    steps = [
        TO_LAB,
        {
            "user": "look it up",
            "llm": [
                {"tools": [{"lookup": '{"query": "argon", '}]},
                {"say": "Let me try that again."},
            ],
        },
        {"user": "status?", "llm": [{"tools": [{"task_status": "[1, 2"}]}, {"say": "Hmm."}]},
        {"user": "do magic", "llm": [{"tools": [{"cast_a_spell": {"x": 1}}]}, {"say": "I can't."}]},
        {
            "user": "and with an empty name",
            "llm": [{"tools": [{"lookup": "null"}]}, {"say": "Still here."}],
        },
        {
            "user": "argon then",
            "llm": [{"tools": [{"lookup": {"query": "argon"}}]}, {"say": "Found."}],
        },
        {"expect": {"task": "lookup", "status": "succeeded"}},
        {"user": "thanks", "llm": [{"say": "You're welcome."}]},
    ]
    scenario = parse_scenario({"caller": "ada", "steps": steps})
    failures = await simulate([scenario], settings, registry, transcript.append, runner=False)
    # The call goes on, but a scripted LLM calling a tool nobody has fails the scenario.
    assert failures == ["scenario: step 4 (user): the LLM called unknown tool 'cast_a_spell'"]
    assert [e["message"] for e in transcript.of("problem")] == failures
    assert not transcript.of("error")
    said = [text for _, text in transcript.said()]
    assert said[-1] == "You're welcome." and "Found." in said
    errors = [e for e in transcript.of("tool_output") if e["is_error"]]
    assert errors, "malformed calls must come back to the LLM as errors"
    # LiveKit repairs a truncated object, refuses a non-object and names an unknown tool to the
    # LLM; arguments that parse but do not fit the schema get our own short sentence.
    assert any("Unknown function: cast_a_spell" in e["output"] for e in errors)
    # ...spoken as a sentence that never names the tool.
    assert any(e["output"] == "I need the query." for e in errors), [e["output"] for e in errors]
    assert not any("lookup" in e["output"] for e in errors if e["name"] == "lookup")
    for e in errors:
        assert "Traceback" not in e["output"] and len(e["output"]) < 1000
    rows = await store.list(caller="ada", limit=None)
    assert all(t.status in FINISHED for t in rows)
    assert not any(t.tool == "cast_a_spell" for t in rows)


async def set_writable(store: TaskStore, writable: bool) -> None:
    """Make the store's write connection read-only, or writable again.

    Tests run as root here, where chmod cannot stop a write, so the fault is injected in
    SQLite itself: with ``query_only`` every write fails with "attempt to write a readonly
    database", exactly what a read-only file or mount gives. Reads keep working."""
    async with store.write_engine.connect() as conn:
        raw = await conn.get_raw_connection()
        await raw.driver_connection.execute(f"PRAGMA query_only={0 if writable else 1}")


@pytest.fixture
async def call(settings, registry, transcript):
    env = await Environment.open(settings, registry, runner=False)
    scenario = parse_scenario({"caller": "bo", "steps": [TO_LAB]})
    driver = CallDriver(env, scenario, "bo", transcript.append)
    await driver.connect()
    await driver.play(scenario.steps[0], None)
    yield env, driver
    await driver.hangup()
    await env.close()


def turn(text: str, *replies: dict) -> object:
    return parse_scenario({"steps": [{"user": text, "llm": list(replies)}]}).steps[0]


async def test_unwritable_database_apology_then_writes_resume(call, transcript):
    env, driver = call
    store = env.store
    await set_writable(store, False)
    await driver.play(
        turn(
            "look up argon", {"tools": [{"lookup": {"query": "argon"}}]}, {"say": "Sorry, later."}
        ),
        None,
    )
    [out] = [e for e in transcript.of("tool_output") if e["name"] == "lookup"]
    assert out["is_error"] and out["output"] == STORE_DOWN  # the short apology
    assert await store.count(tool="lookup") == 0  # nothing half-written

    # The database comes back: the call goes on and writes resume.
    await set_writable(store, True)
    await driver.play(
        turn("try again", {"tools": [{"lookup": {"query": "argon"}}]}, {"say": "Found it."}), None
    )
    [row] = await store.list(caller="bo", tool="lookup")
    assert row.status == "succeeded" and row.delivered_at is not None
    assert ("lab", "Found it.") in transcript.said()


async def test_outage_mid_tool_records_the_real_outcome_once_the_db_is_back(call, transcript):
    """The row was written, then the database went read-only before the tool finished: the
    caller still gets the answer, and the row's end is written when the database recovers."""
    env, driver = call
    store = env.store
    playing = asyncio.create_task(
        driver.play(
            turn(
                "slow lookup",
                {"tools": [{"lookup": {"query": "neon", "seconds": 0.6}}]},
                {"say": "Here it is."},
            ),  # fmt: skip
            None,
        )
    )
    while await store.count(tool="lookup", status="running") == 0:
        await asyncio.sleep(0.02)
    await set_writable(store, False)
    await playing
    [out] = [e for e in transcript.of("tool_output") if e["name"] == "lookup"]
    assert not out["is_error"] and "neon is fine" in out["output"]
    [row] = await store.list(caller="bo", tool="lookup")
    assert row.status == "running"  # its end could not be written yet
    await asyncio.sleep(0.5)
    await set_writable(store, True)
    for _ in range(100):
        row = await store.get(row.id)
        if row.status != "running":
            break
        await asyncio.sleep(0.05)
    assert row.status == "succeeded" and row.result == "The lab notes say neon is fine."
    assert [e["status"] for e in await store.events(row.id)] == ["running", "succeeded"]


async def test_runner_keeps_a_finished_jobs_result_through_an_outage(store, registry, settings):
    """A background job finishes while the database is read-only: the runner keeps retrying
    the write (it does not drop the result and run the job again) until the database is back."""
    from frontdesk.core.tools import tool

    @tool(pattern="background")
    async def brew(ctx, seconds: float = 0.3) -> dict:
        """Brew something slowly."""
        await asyncio.sleep(seconds)
        return {"summary": "Brewed."}

    registry.tools["brew"] = brew
    async with jobkit.running(store, registry, settings):
        job = await jobkit.queue(store, settings, "brew")
        await jobkit.in_status(store, job.id, "running")
        await set_writable(store, False)
        await asyncio.sleep(0.8)  # finished meanwhile; its end cannot be written yet
        assert (await store.get(job.id)).status == "running"
        await set_writable(store, True)
        row = await jobkit.finished(store, job.id)
    # Written once the store was back, from the same run: not re-run.
    assert row.status == "succeeded" and row.result == {"summary": "Brewed."} and row.attempts == 1


@pytest.mark.backends("sqlite", "postgres")
async def test_results_json_cannot_hold_are_stored_as_null(store, registry, settings):
    """A tool returning NaN or infinity (Postgres JSON refuses both) still ends its row."""
    from frontdesk.agents.patterns import run_tool
    from frontdesk.agents.runtime import CallRuntime
    from frontdesk.core.tools import tool

    @tool(pattern="interruptible")
    async def measure(ctx) -> dict:
        """Measure something that did not work out."""
        return {"mean": float("nan"), "max": float("inf"), "n": 0}

    registry.tools["measure"] = measure
    runtime = CallRuntime(None, store=store, registry=registry, settings=settings, caller="eve")
    answer = await asyncio.wait_for(run_tool(measure, runtime, "lab", {}, None), 10)
    assert answer == '{"mean": null, "max": null, "n": 0}'
    [row] = await store.list(caller="eve")
    assert row.status == "succeeded" and row.result == {"mean": None, "max": None, "n": 0}


@tool(pattern="critical")
async def pay_invoice(
    ctx,
    invoice_id: str,
    amount: float,
    confirmed: Annotated[bool, Field(description="Whether you confirm the payment.")] = False,
    urgent: bool = False,
    approved: bool = False,
) -> str:
    """Pay an invoice."""
    return "paid"


def test_invalid_argument_sentences_are_speakable_and_never_name_the_tool():
    def sentence(raw) -> str:
        with pytest.raises(ToolError) as caught:
            pay_invoice.validate(raw)
        return str(caught.value)

    ok = {"invoice_id": "INV-1", "amount": 5}
    assert (
        sentence({**ok, "confirmed": "maybe"}) == "I need to know whether you confirm the payment."
    )
    assert sentence({"amount": 5}) == "I need the invoice id."
    assert sentence({**ok, "amount": "lots"}) == "I need a valid amount."
    assert sentence({**ok, "approved": "hmm"}) == "I need to know whether it's approved."
    assert sentence({**ok, "urgent": "hmm"}) == "I need a yes or no on urgent."
    assert sentence({**ok, "invented": 1}) == "I got details I can't use."
    assert sentence("{not json") == sentence("[1]") == "I couldn't read those details."
    for raw in ({}, {**ok, "confirmed": "x"}, "nope", {**ok, "x": 1}):
        text = sentence(raw)
        assert "pay_invoice" not in text and "pay invoice" not in text
