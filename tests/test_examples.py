"""Every scenario under examples/calls/ runs through `frontdesk simulate`, then the rows are
checked in the store: what `make test` promises the patterns do with the built-in plugins."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from clirun import FRONTDESK, tasks_json

ROOT = Path(__file__).resolve().parent.parent
CALLS = ROOT / "examples" / "calls"
DEMO = ROOT / "examples" / "demo"  # the hotel: profile, knowledge base, slow web search


def _demo_search_server():
    """examples/demo/search_server.py: the search plugin's test double, shared with the demo."""
    spec = importlib.util.spec_from_file_location("demo_search_server", DEMO / "search_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


serve = _demo_search_server().serve
PATTERN_SCENARIOS = [
    "interrupted_search.yaml",
    "critical_payment.yaml",
    "fire_and_forget.yaml",
    "background_handoffs.yaml",
    "hangup_reconnect.yaml",
    "bad_input.yaml",
]


# On voice the scenarios' invoices would be numbered by whichever caller reaches billing
# first, so the payment runs on its own first; the others follow in one run.
VOICE_BATCHES = [
    ["critical_payment.yaml"],
    [s for s in PATTERN_SCENARIOS if s != "critical_payment.yaml"],
]


@pytest.fixture(scope="module", params=["text", "voice"])
def ran(request, tmp_path_factory):
    mode = request.param
    db = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('examples')}/examples.db"
    env = {
        **os.environ,
        "FRONTDESK_LOAD_PLUGINS": "",
        "FRONTDESK_REPORTS_PATH": str(tmp_path_factory.mktemp("reports")),
        "FRONTDESK_BILLING_SANDBOX_SECONDS": "0.6",
        # The scenarios are the demo hotel's calls: its knowledge base and invoices.
        "FRONTDESK_PROFILE": str(DEMO / "frontdesk.toml"),
    }
    batches = [PATTERN_SCENARIOS] if mode == "text" else VOICE_BATCHES
    flags = ["--voice"] if mode == "voice" else []
    runs = []
    with serve(delay=3.0) as url:
        env["FRONTDESK_SEARCH_WEB_URL"] = url
        for batch in batches:
            runs.append(
                subprocess.run(
                    [
                        *FRONTDESK,
                        "simulate",
                        *(str(CALLS / s) for s in batch),
                        "--json",
                        "--db",
                        db,
                        *flags,
                    ],
                    capture_output=True,
                    text=True,
                    timeout=180,
                    env=env,
                )
            )
    out = next((r for r in runs if r.returncode != 0), runs[-1])
    rows = tasks_json(db, "--limit", "500", env=env)
    events = [json.loads(line) for r in runs for line in r.stdout.splitlines() if line.strip()]
    return out, rows, events, db, env, mode


def tasks(rows, caller, tool=None):
    return [
        r for r in reversed(rows) if r["caller"] == caller and (tool is None or r["tool"] == tool)
    ]


def test_all_pattern_scenarios_pass(ran):
    out, *_ = ran
    assert out.returncode == 0, out.stderr


def test_interrupted_search_rows(ran):
    _, rows, events, *_, mode = ran
    [web] = tasks(rows, "ivy", "search_web")
    assert (
        web["status"] == "cancelled"
        and web["error"] == "interrupted by caller"
        and web["result"] is None
    )
    assert not any(e["type"] == "agent" and "STALE" in e["text"] for e in events)


def test_critical_payment_charged_once(ran):
    _, rows, events, *_, mode = ran
    pays = tasks(rows, "carl", "pay_invoice")
    assert [p["status"] for p in pays] == ["succeeded"] and pays[0]["idempotency_key"]
    if mode == "text":
        assert any(e["type"] == "interrupt_refused" and e["caller"] == "carl" for e in events)
    else:  # the caller's words over the payment never cut its result short
        paid = [e for e in events if e["type"] == "agent" and e["caller"] == "carl"]
        assert any("I paid $358.40" in e["text"] for e in paid)


def test_fire_and_forget_outcome_row(ran):
    _, rows, events, *_, mode = ran
    [row] = tasks(rows, "fay", "record_call_outcome")
    assert row["status"] == "succeeded" and row["result"]["departments"] == ["triage"]
    ack = [e for e in events if e["type"] == "tool_output" and e["caller"] == "fay"]
    assert ack and "Goodbye" in ack[0]["output"]


def test_background_spoken_after_two_handoffs(ran):
    _, rows, events, *_, mode = ran
    [job] = tasks(rows, "bea", "generate_report")
    assert (
        job["status"] == "succeeded"
        and job["delivered_at"]
        and Path(job["result"]["files"]["csv"]).exists()
    )
    # The report is quick, so which desk was idle first may vary, and a follow-up cut short by
    # a handoff is offered again; tests/test_patterns.py pins the after-two-handoffs case with
    # a job that outlasts them. What must hold: it was delivered, once.
    followups = [e for e in events if e["type"] == "followup" and e["caller"] == "bea"]
    assert followups and {f["agent"] for f in followups} <= {"reports", "billing", "triage"}
    delivered = [
        e
        for e in events
        if e["type"] == "task"
        and e["caller"] == "bea"
        and (e["note"] or "").startswith("delivered by")
    ]
    assert len(delivered) == 1
    spoken = [
        e
        for e in events
        if e["type"] == "agent" and e["caller"] == "bea" and "is ready" in e["text"]
    ]
    # Never said twice in full. On voice the caller may talk over a follow-up: one cut short is
    # not marked delivered, and is said again, whole, by the desk they are at.
    assert len([e for e in spoken if not e.get("interrupted")]) == 1, spoken


def test_hangup_then_delivered_on_reconnect(ran):
    _, rows, events, *_, mode = ran
    [job] = tasks(rows, "hal", "generate_report")
    assert job["delivered_at"]
    sessions = [
        e["session_id"] for e in events if e["type"] == "session_start" and e["caller"] == "hal"
    ]
    delivered_in = [e for e in events if e["type"] == "followup" and e["caller"] == "hal"]
    assert len(sessions) == 2 and delivered_in


def test_bad_input_failed_rows(ran):
    _, rows, events, *_, mode = ran
    failed = [(r["tool"], r["error"]) for r in tasks(rows, "bo") if r["status"] == "failed"]
    assert [t for t, _ in failed] == [
        "pay_invoice",
        "pay_invoice",
        "generate_report",
        "search_knowledge",
    ]
    assert all(err and "Traceback" not in err and len(err) < 200 for _, err in failed)
    spoken = [e["text"] for e in events if e["type"] == "agent" and e["caller"] == "bo"]
    assert any("balance" in s.lower() for s in spoken)  # the call went on


def test_task_status_and_cross_caller(ran):
    out, rows, events, db, env, mode = ran
    if mode == "voice":
        pytest.skip("task_status is a text-mode check on the text run's rows")
    result = subprocess.run(
        [*FRONTDESK, "simulate", str(CALLS / "task_status.yaml"), "--json", "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    outputs = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    status = [
        e["output"] for e in outputs if e["type"] == "tool_output" and e["name"] == "task_status"
    ]
    assert "is done" in status[0] and "couldn't find a task with reference 1" in status[1]
