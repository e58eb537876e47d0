"""The tasks and analytics plugins' tools, through the public ToolContext only (``ctx.tasks``):
each caller sees and cancels only their own tasks, and the call outcome counts this call's."""

from __future__ import annotations

import pytest

from frontdesk.core import ToolContext, ToolError, host
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.plugins import analytics, tasks
from frontdesk.plugins.analytics import record_call_outcome
from frontdesk.plugins.tasks import cancel_task, my_tasks, task_status


@pytest.fixture
async def store(tmp_path):
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path}/t.db")
    yield store
    await store.close()


async def ctx_for(store, caller="alice", session_id="s1", tool="task_status"):
    row = await store.create(
        caller=caller, tool=tool, pattern="interruptible", status="running", session_id=session_id
    )
    return ToolContext(
        caller=caller,
        session_id=session_id,
        task_id=row.id,
        department="triage",
        idempotency_key=f"k{row.id}",
        store=store,
    )


async def job(store, caller="alice", tool="generate_report", pattern="background", **values):
    return await store.create(caller=caller, tool=tool, pattern=pattern, **values)


# -- tasks ----------------------------------------------------------------------------------


async def test_task_status_of_own_task_and_latest(store):
    report = await job(store, status="running")
    await store.set_progress(report.id, 0.5, "adding up")
    ctx = await ctx_for(store)
    assert await task_status.fn(ctx, task_id=report.id) == (
        f"Your report (reference {report.id}) is running, about 50% done, adding up."
    )
    # Without an id: the newest task that is not one of these status tools themselves.
    assert (await task_status.fn(ctx)).startswith(f"Your report (reference {report.id})")


async def test_another_callers_task_is_not_found_like_a_missing_one(store):
    theirs = await job(store, caller="bob")
    ctx = await ctx_for(store)
    for ref in (theirs.id, 9999, "not-a-number"):
        with pytest.raises(ToolError, match="couldn't find a task with reference"):
            await task_status.fn(ctx, task_id=ref)
        with pytest.raises(ToolError, match="couldn't find a task with reference"):
            await cancel_task.fn(ctx, task_id=ref)
    assert (await store.get(theirs.id)).status == "queued"  # untouched


async def test_no_tasks_yet(store):
    ctx = await ctx_for(store, caller="new")
    assert await task_status.fn(ctx) == "You don't have any tasks with us yet."
    assert await my_tasks.fn(ctx) == "You don't have any tasks with us yet."


async def test_my_tasks_lists_only_the_callers_own_work(store):
    await job(store, caller="bob", tool="pay_invoice", pattern="critical")
    done = await job(store, tool="account_balance", pattern="interruptible", status="running")
    await store.transition(done.id, "succeeded", result="Your balance is 10.00.")
    ctx = await ctx_for(store, tool="my_tasks")
    answer = await my_tasks.fn(ctx)
    assert f"reference {done.id}) is done: Your balance is 10.00." in answer
    assert "payment" not in answer and "my_tasks" not in answer


async def test_cancel_a_background_job_but_not_critical_or_finished_work(store):
    ctx = await ctx_for(store, tool="cancel_task")
    report = await job(store)
    assert await cancel_task.fn(ctx, task_id=report.id) == (
        f"I've cancelled your report, reference {report.id}."
    )
    assert (await store.get(report.id)).status == "cancelled"
    with pytest.raises(ToolError, match="has already cancelled"):
        await cancel_task.fn(ctx, task_id=report.id)
    payment = await job(store, tool="pay_invoice", pattern="critical", status="running")
    with pytest.raises(ToolError, match="can't be cancelled; only background jobs"):
        await cancel_task.fn(ctx, task_id=payment.id)
    assert (await store.get(payment.id)).status == "running"


def test_tasks_tools_join_every_desk():
    registry = host.load(Settings(_env_file=None, load_plugins=""))
    for name in tasks.OWN_TOOLS:
        assert registry.tools[name].plugin == "tasks"
        assert "search" in [
            d for d in registry.departments if registry.tools[name] in registry.tools_for(d)
        ]


# -- analytics ------------------------------------------------------------------------------


async def test_call_outcome_counts_this_calls_tasks_and_desks(store):
    await store.call_started("s1", "alice")
    await store.call_handoff("s1", "triage", "billing")
    paid = await job(
        store, tool="pay_invoice", pattern="critical", status="running", session_id="s1"
    )
    await store.transition(paid.id, "succeeded", result="ok")
    await job(store, tool="generate_report", session_id="s1")
    await job(store, tool="generate_report", session_id="earlier-call")  # another call
    await job(store, caller="bob", tool="pay_invoice", pattern="critical", session_id="s1")
    analytics.on_task_event(
        event=type("E", (), {"session_id": "s1", "tool": "packing_tips", "department": "search"})()
    )
    ctx = await ctx_for(store, tool="record_call_outcome")
    outcome = await record_call_outcome.fn(ctx)
    assert outcome == {
        "session_id": "s1",
        "departments": ["billing", "search", "triage"],
        "handoffs": 1,
        "tasks": {"queued": 1, "succeeded": 1},  # not bob's, not another call's, not its own
    }


async def test_call_outcome_without_a_call_record(store):
    ctx = await ctx_for(store, caller="zed", session_id=None, tool="record_call_outcome")
    outcome = await record_call_outcome.fn(ctx)
    assert outcome["handoffs"] == 0 and outcome["departments"] == ["triage"]


def test_the_goodbye_names_no_business():
    assert record_call_outcome.ack == "Thank you for calling. Goodbye!"
