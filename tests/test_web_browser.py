"""The console in a real headless chromium (Debian's, driven by Playwright) against a real
uvicorn server on loopback:

- the tasks page shows a task created by another process live (SSE), without a reload, and
  cancels a queued background job through the UI (confirmation accepted): the row in the
  database is ``cancelled`` and the cancel is in its events;
- the caller page, with the LiveKit room replaced at the network edge by a stand-in
  (tests/web/fake_livekit.js) that replays real ``frontdesk.task`` payloads recorded from
  TaskRpc and transcript text streams, renders the task cards and the transcript.

Without chromium these skip, unless FRONTDESK_REQUIRE_BROWSER=1 (set by .ci/run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jwt
import webkit
from jobkit import start_job
from test_rpc import StandInParticipant
from webkit import run_async, serve, write_from_another_process

from frontdesk.agents.programs.web.app import create_app
from frontdesk.agents.programs.web.call import CallAccess
from frontdesk.agents.rpc import TaskRpc
from frontdesk.core.schema import open_store

FAKE_LIVEKIT = Path(__file__).parent / "web" / "fake_livekit.js"
browser, sqlite_url = webkit.browser, webkit.sqlite_url  # the fixtures


def test_tasks_page_is_live_and_cancels_a_job(browser, sqlite_url):
    job_id = int(
        write_from_another_process(
            sqlite_url,
            """
            t = await store.create(caller="alice", session_id="call-1", department="reports",
                                   tool="generate_report", pattern="background",
                                   args={"kind": "occupancy", "period": "march"})
            print(t.id)
            """,
        )
    )
    with serve(create_app(sqlite_url)) as base:
        page = browser.new_page()
        dialogs: list[str] = []

        def accept(dialog: Any) -> None:
            dialogs.append(dialog.message)
            dialog.accept()

        page.on("dialog", accept)
        page.goto(f"{base}/tasks")
        page.wait_for_selector(f"#task-{job_id}")
        page.wait_for_selector("#live[data-live=on]")  # the SSE stream is open

        new_id = int(
            write_from_another_process(
                sqlite_url,
                """
                t = await store.create(caller="carol", department="search", tool="search_web",
                                       pattern="interruptible", status="running",
                                       args={"query": "late checkout"})
                print(t.id)
                """,
            )
        )
        row = page.wait_for_selector(f"#task-{new_id}")  # no reload: pushed over SSE
        assert "carol" in row.inner_text() and "search_web" in row.inner_text()
        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        assert navigations == 1

        page.click(f"#task-{job_id} button[data-action=cancel]")
        page.wait_for_selector(f"#task-{job_id}[data-status=cancelled]")
        assert dialogs == [f"Cancel task {job_id} (generate_report for alice)?"]
        assert "cancelled" in page.inner_text("#flash")
        page.close()

    async def check() -> tuple[str, list[dict[str, Any]]]:
        store = await open_store(sqlite_url)
        try:
            return (await store.get(job_id)).status, await store.events(job_id)
        finally:
            await store.close()

    status, events = run_async(check)
    assert status == "cancelled"
    assert events[-1]["status"] == "cancelled"
    assert "cancelled by operator (web)" in (events[-1]["note"] or "")


async def real_rpc_traffic(db_url: str) -> dict[str, Any]:
    """``frontdesk.task`` payloads and a ``frontdesk.tasks`` answer from the real TaskRpc,
    for alice's tasks moving through the store."""
    store = await open_store(db_url)
    local = StandInParticipant()
    rpc = TaskRpc(local, store, "alice")
    rpc.register()
    store.observers.append(rpc.on_event)
    try:
        earlier = await store.create(
            caller="alice", department="billing", tool="pay_invoice", pattern="critical",
            status="running",
        )  # fmt: skip
        await store.transition(earlier.id, "succeeded", result="paid")
        answer = await local.call("frontdesk.tasks", {})
        report = await store.create(
            caller="alice", department="reports", tool="generate_report", pattern="background",
            args={"kind": "occupancy"},
        )  # fmt: skip
        await start_job(store, report.id, "runner-1")
        await store.set_progress(report.id, 0.6, "drawing charts")
        await store.transition(report.id, "succeeded", result={"path": "reports/march.pdf"})
        queued = await store.create(
            caller="alice", department="reports", tool="generate_report", pattern="background",
        )  # fmt: skip
        await rpc.flush()
    finally:
        await rpc.aclose()
        await store.close()
    payloads = [s["payload"] for s in local.sent if s["method"] == "frontdesk.task"]
    return {
        "tasks": answer,
        "payloads": payloads,
        "earlier": earlier.id,
        "report": report.id,
        "queued": queued.id,
    }


SECRET = "test-secret-" + "x" * 24


def test_call_page_shows_transcript_and_task_cards(browser, sqlite_url, monkeypatch):
    monkeypatch.setenv("LIVEKIT_URL", "wss://livekit.invalid")
    monkeypatch.setenv("LIVEKIT_API_KEY", "APItest")
    monkeypatch.setenv("LIVEKIT_API_SECRET", SECRET)
    traffic = run_async(lambda: real_rpc_traffic(sqlite_url))
    assert len(traffic["payloads"]) >= 5  # created, claimed, progress, succeeded, queued
    seg = {"lk.transcription_final": "true"}
    steps = [
        {"transcript": {"from": "agent", "stream": "s1", "chunks": ["Good evening, ", "front desk."],
                        "attributes": {**seg, "lk.segment_id": "a1"}}},
        {"transcript": {"from": "caller", "stream": "s2", "chunks": ["I need the March <report>"],
                        "attributes": {**seg, "lk.segment_id": "u1"}}},
        *({"rpc": p} for p in traffic["payloads"]),
        {"transcript": {"from": "agent", "stream": "s3", "chunks": ["Your report is ready."],
                        "attributes": {**seg, "lk.segment_id": "a2"}}},
    ]  # fmt: skip
    script = {"agent": "agent-1", "tasks": traffic["tasks"], "steps": steps}

    with serve(create_app(sqlite_url, call_access=CallAccess("open"))) as base:
        page = browser.new_page()
        page.add_init_script(f"window.__FAKE_LIVEKIT = {json.dumps(script)};")
        page.route(
            "**/static/vendor/livekit-client.umd.js",
            lambda route: route.fulfill(
                body=FAKE_LIVEKIT.read_text(), content_type="application/javascript"
            ),
        )
        page.on("dialog", lambda d: d.accept())
        page.goto(f"{base}/call")
        page.click("#join button[type=submit]")
        page.wait_for_selector("html[data-replayed=yes]", state="attached")

        report = page.wait_for_selector(f"#card-{traffic['report']}[data-status=succeeded]")
        assert "generate_report" in report.inner_text()
        earlier = page.wait_for_selector(f"#card-{traffic['earlier']}[data-status=succeeded]")
        assert "pay_invoice" in earlier.inner_text()  # from the frontdesk.tasks answer
        page.wait_for_selector("#transcript li:nth-child(3)", state="attached")
        page.wait_for_selector("#transcript li.interim", state="detached")
        said = page.locator("#transcript li .text").all_inner_texts()
        who = page.locator("#transcript li .who").all_inner_texts()
        assert list(zip(who, said, strict=True)) == [
            ("Front desk", "Good evening, front desk."),
            ("You", "I need the March <report>"),  # text, not markup
            ("Front desk", "Your report is ready."),
        ]

        # The queued job's card can be cancelled over frontdesk.cancel, after a confirm.
        page.click(f"#card-{traffic['queued']} button")
        page.wait_for_selector(f"#card-{traffic['queued']}[data-status=cancelled]")
        record = page.evaluate("window.__fakeRoom")
        page.close()

    assert record["connected"]["url"] == "wss://livekit.invalid"
    claims = jwt.decode(record["connected"]["token"], SECRET, algorithms=["HS256"])
    assert claims["sub"].startswith("web-") and claims["video"]["roomJoin"] is True
    assert claims["video"]["canPublishSources"] == ["microphone"]
    assert record["micEnabled"] is True
    assert record["rpcReplies"] == ["ok"] * len(traffic["payloads"])
    methods = [(c["method"], c["payload"]) for c in record["rpcCalls"]]
    assert methods == [
        ("frontdesk.tasks", {}),
        ("frontdesk.cancel", {"task_id": traffic["queued"]}),
    ]
