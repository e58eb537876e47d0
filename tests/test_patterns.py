"""The four patterns on real AgentSessions, asserting rows and events in the TaskStore."""

from __future__ import annotations

import re

import kit

from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate


async def play(settings, registry, transcript, steps, caller="alice"):
    scenario = parse_scenario({"caller": caller, "steps": steps})
    failures = await simulate([scenario], settings, registry, transcript.append)
    return failures


def to_lab(*replies):
    return {"user": "lab please", "llm": [{"tools": [{"transfer_to_lab": {}}]}, *replies]}


async def test_interrupted_lookup_is_cancelled_and_never_spoken(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "You're at the lab."}),
            {
                "user": "look up argon",
                "llm": [
                    {"tools": [{"lookup": {"query": "argon", "seconds": 3}}]},
                    {"say": "STALE: the lab notes say argon is fine."},
                ],
            },
            {"interrupt": {"after": 0.3}},
            {"user": "never mind", "llm": [{"say": "Sure, what else?"}]},
            {"expect": {"task": "lookup", "status": "cancelled"}},
            {"expect": {"not_said": "STALE"}},
        ],
    )
    assert failures == []
    [task] = await store.list(caller="alice", tool="lookup")
    assert task.status == "cancelled" and task.error == "interrupted by caller"
    assert [e["status"] for e in await store.events(task.id)] == ["running", "cancelled"]
    assert kit.cleanups == [f"lookup:{task.id}"]
    assert not any("STALE" in text for _, text in transcript.said())
    assert ("lab", "Sure, what else?") in transcript.said()


async def test_critical_refuses_interruption_and_completes_once(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab here."}),
            {
                "user": "charge me 5",
                "llm": [
                    {"tools": [{"charge": {"amount": "5.00", "seconds": 0.6}}]},
                    {"say": "Done, charged."},
                ],
            },
            {"interrupt": {"after": 0.2}},
            {
                "user": "charge me 5 again",
                "llm": [
                    {"tools": [{"charge": {"amount": "5.00", "seconds": 0.6}}]},
                    {"say": "That was already charged."},
                ],
            },
            {"expect": {"task": "charge", "status": "succeeded"}},
        ],
    )
    assert failures == []
    assert transcript.of("interrupt_refused")
    assert kit.calls["charge"] == 1  # the repeat was answered from the first task
    rows = await store.list(caller="alice", tool="charge")
    assert [t.status for t in rows] == ["succeeded"]
    assert rows[0].idempotency_key
    assert ("lab", "Done, charged.") in transcript.said()


async def test_fire_and_forget_acks_at_once_and_finishes_later(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "note this",
                "llm": [
                    {"tools": [{"note": {"text": "hello", "seconds": 0.5}}]},
                    {"say": "Noted it."},
                ],
            },
            {"expect": {"task": "note", "status": "running"}},
            {"wait": {"task": "note", "status": "succeeded", "timeout": 5}},
            {
                "user": "note explode",
                "llm": [{"tools": [{"note": {"text": "explode", "seconds": 0}}]}, {"say": "Ok."}],
            },
            {"wait": {"task": "note", "status": "failed", "timeout": 5}},
            {"user": "still there?", "llm": [{"say": "Yes."}]},
        ],
    )
    assert failures == []
    outputs = [e for e in transcript.of("tool_output") if e["name"] == "note"]
    assert outputs[0]["output"] == "Noted." and not outputs[0]["is_error"]
    failed = (await store.list(caller="alice", tool="note", status="failed"))[0]
    # Internals stay in the log; the row carries the reference the log line has.
    assert re.fullmatch(r"internal error: RuntimeError \(ref [0-9a-f]{8}\)", failed.error)
    assert ("lab", "Yes.") in transcript.said()


async def test_background_result_spoken_by_department_active_after_two_handoffs(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "run experiment x",
                "llm": [
                    {"tools": [{"experiment": {"name": "x", "seconds": 1.0}}]},
                    {"say": "Started, I'll let you know."},
                ],
            },
            {
                "user": "take me to the archive",
                "llm": [{"tools": [{"transfer_to_archive": {}}]}, {"say": "Archive here."}],
            },
            {
                "user": "back to the front desk",
                "llm": [{"tools": [{"transfer_to_triage": {}}]}, {"say": "Front desk again."}],
            },
            {"wait": {"task": "experiment", "status": "succeeded", "timeout": 10}},
            {"wait": {"seconds": 0.5}},
            {"expect": {"task": "experiment", "delivered": True}},
            {"expect": {"said": "Experiment x finished"}},
        ],
    )
    assert failures == [], failures
    [job] = await store.list(caller="alice", tool="experiment")
    assert job.status == "succeeded" and job.delivered_at is not None and job.progress == 1.0
    notes = [e["note"] or "" for e in await store.events(job.id)]
    assert any(n.startswith("started by runner ") for n in notes)
    assert "delivered by triage" in notes
    handoffs = [(e["from"], e["to"]) for e in transcript.of("handoff")]
    assert handoffs == [("triage", "lab"), ("lab", "archive"), ("archive", "triage")]
    spoken_by = [a for a, text in transcript.said() if "Experiment x finished" in text]
    assert spoken_by == ["triage"]


async def test_job_running_at_hangup_is_delivered_after_reconnect(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "run experiment y",
                "llm": [
                    {"tools": [{"experiment": {"name": "y", "seconds": 1.0}}]},
                    {"say": "Started."},
                ],
            },
            {"hangup": {}},
            {"wait": {"task": "experiment", "status": "succeeded", "timeout": 10}},
            {"expect": {"task": "experiment", "delivered": False}},
            {"reconnect": {}},
            {"wait": {"seconds": 0.5}},
            {"expect": {"task": "experiment", "delivered": True}},
            {"expect": {"said": "Experiment y finished"}},
        ],
    )
    assert failures == [], failures
    [job] = await store.list(caller="alice", tool="experiment")
    assert job.delivered_at is not None
    starts = transcript.of("session_start")
    assert len(starts) == 2 and starts[0]["session_id"] != starts[1]["session_id"]
    delivered = [e for e in transcript.of("followup") if e["task_id"] == job.id]
    assert delivered and delivered[-1]["agent"] == "triage"


async def test_timeout_and_exception_give_clean_messages_and_failed_rows(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {"user": "break", "llm": [{"tools": [{"boom": {}}]}]},
            {"user": "slow", "llm": [{"tools": [{"sluggish": {}}]}]},
            {"user": "closed?", "llm": [{"tools": [{"refuse": {}}]}]},
        ],
    )
    assert failures == []
    rows = {t.tool: t for t in await store.list(caller="alice")}
    assert rows["boom"].status == "failed"
    assert re.fullmatch(r"internal error: ValueError \(ref [0-9a-f]{8}\)", rows["boom"].error)
    assert rows["sluggish"].status == "failed" and rows["sluggish"].error == "timeout"
    assert rows["refuse"].status == "failed" and rows["refuse"].error == "That lab is closed today."
    spoken = " ".join(text for _, text in transcript.said())
    assert "hunter2" not in spoken
    assert "took too long" in spoken and "That lab is closed today." in spoken
    errors = [e for e in transcript.of("tool_output") if e["is_error"]]
    assert len(errors) == 3


async def test_task_status_shows_progress_and_hides_other_callers(
    settings, registry, store, transcript
):
    other = await store.create(
        caller="mallory", tool="experiment", pattern="background", args={"name": "m"}
    )
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "run experiment z",
                "llm": [
                    {"tools": [{"experiment": {"name": "z", "seconds": 2.0}}]},
                    {"say": "Started."},
                ],
            },
            # The job reports its first step as it starts: wait for the runner, not the clock.
            {"wait": {"task": "experiment", "status": "running", "timeout": 30}},
            {"user": "how is it going", "llm": [{"tools": [{"task_status": {}}]}]},
            {
                "user": "and that other one",
                "llm": [{"tools": [{"task_status": {"task_id": other.id}}]}],
            },
            {"user": "cancel it", "llm": [{"tools": [{"cancel_task": {"task_id": other.id}}]}]},
        ],
        caller="alice",
    )
    assert failures == []
    outputs = [
        e["output"]
        for e in transcript.of("tool_output")
        if e["name"] in ("task_status", "cancel_task")
    ]
    assert "% done" in outputs[0] and "step" in outputs[0]
    assert "couldn't find a task" in outputs[1] and "couldn't find a task" in outputs[2]
    assert (await store.get(other.id)).status in ("queued", "running", "succeeded")
    assert (await store.get(other.id)).caller == "mallory"


async def test_an_interrupt_before_critical_work_starts_leaves_no_row_and_no_charge(
    settings, registry, store, transcript
):
    """The caller cuts in while the model is still deciding (its reply is held back): the
    charge never starts, so there is no row and no charge."""
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "charge me 7",
                "llm": [
                    {"tools": [{"charge": {"amount": "7.00"}}], "delay": 0.5},
                    {"say": "Charged."},
                ],
            },
            {"interrupt": {"after": 0.1}},
            {"user": "hello?", "llm": [{"say": "Still here."}]},
        ],
    )
    assert failures == []
    assert await store.list(caller="alice", tool="charge") == []
    assert kit.calls.get("charge", 0) == 0
    assert ("lab", "Still here.") in transcript.said()


async def test_an_interrupt_once_critical_work_has_started_is_refused_and_it_runs_once(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "charge me 7",
                "llm": [
                    {"tools": [{"charge": {"amount": "7.00", "seconds": 0.6}}]},
                    {"say": "Charged."},
                ],
            },
            {"interrupt": {"after": 0.3}},
            {"user": "hello?", "llm": [{"say": "Still here."}]},
        ],
    )
    assert failures == []
    rows = await store.list(caller="alice", tool="charge")
    assert [t.status for t in rows] == ["succeeded"] and kit.calls["charge"] == 1
    assert transcript.of("interrupt_refused")
    assert ("lab", "Still here.") in transcript.said()


async def test_duplicate_parallel_critical_calls_run_once(settings, registry, store, transcript):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_lab({"say": "Lab."}),
            {
                "user": "charge me 9",
                "llm": [
                    {
                        "tools": [
                            {"charge": {"amount": "9.00", "seconds": 0.3}},
                            {"charge": {"amount": "9.00", "seconds": 0.3}},
                        ]
                    },
                    {"say": "Charged once."},
                ],
            },
        ],
    )
    assert failures == []
    assert kit.calls["charge"] == 1
    rows = await store.list(caller="alice", tool="charge")
    assert [t.status for t in rows] == ["succeeded"]
    outputs = [e for e in transcript.of("tool_output") if e["name"] == "charge"]
    assert len(outputs) == 2 and not any(o["is_error"] for o in outputs)
    assert outputs[0]["output"] == outputs[1]["output"]


async def test_the_same_payment_spelled_differently_is_charged_once(
    settings, registry, store, transcript
):
    failures = await play(
        settings,
        registry,
        transcript,
        [
            {
                "user": "billing",
                "llm": [{"tools": [{"transfer_to_billing": {}}]}, {"say": "Billing."}],
            },
            {
                "user": "pay the spa invoice",
                "llm": [
                    {
                        "tools": [
                            {
                                "pay_invoice": {
                                    "invoice_id": "INV-1002",
                                    "amount": "120",
                                    "confirmed": True,
                                }
                            }
                        ]
                    }
                ],
            },
            {
                "user": "did it go through? pay it again",
                "llm": [
                    {
                        "tools": [
                            {
                                "pay_invoice": {
                                    "invoice_id": "inv 1002",
                                    "amount": 120.0,
                                    "confirmed": True,
                                }
                            }
                        ]
                    }
                ],
            },
        ],
    )
    assert failures == []
    rows = await store.list(caller="alice", tool="pay_invoice")
    assert [t.status for t in rows] == [
        "succeeded"
    ]  # the second spelling was answered from the first
    outputs = [e["output"] for e in transcript.of("tool_output") if e["name"] == "pay_invoice"]
    assert len(outputs) == 2 and outputs[0] == outputs[1] and "$120.00" in outputs[0]


def test_results_are_masked_where_they_are_stored_and_where_the_llm_reads_them():
    from frontdesk.agents.patterns import for_llm
    from frontdesk.core.recording import to_jsonable

    result = {"card": "4111 1111 1111 1111", "items": ["cvv 123", 5], "n": 4111111111111111}
    stored = to_jsonable(result)
    assert stored == {"card": "****1111", "items": ["cvv ***", 5], "n": 4111111111111111}
    assert for_llm("paid with 4111-1111-1111-1111") == "paid with ****1111"
    # A row stored before results were masked is masked when it is replayed to the LLM.
    assert for_llm({"card": "4111111111111111"}) == '{"card": "****1111"}'
