"""Screenshots of the console's pages for docs/web.md, in Debian's headless chromium against
demo data (a Harbor Light evening: calls, handoffs, background reports, a failed payment).

    .venv/bin/python tests/web/screenshots.py docs/web

The caller page runs against the same LiveKit stand-in as the browser test.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobkit import start_job  # noqa: E402
from sqlalchemy import select, update  # noqa: E402
from webkit import chromium, run_async, serve  # noqa: E402

from frontdesk.agents.programs.web.app import create_app  # noqa: E402
from frontdesk.agents.programs.web.call import CallAccess  # noqa: E402
from frontdesk.core.schema import open_store  # noqa: E402
from frontdesk.db.models import (  # noqa: E402
    FINISHED,  # noqa: E402
    Call,
    utcnow,
)
from frontdesk.db.models import Task as TaskRow  # noqa: E402
from frontdesk.db.models import TaskEvent as TaskEventRow  # noqa: E402

HERE = Path(__file__).parent
CALLERS = ["+1 555 0142", "+1 555 0199", "maria.k", "room-214", "+44 20 7946 0958"]
WORK = [  # department, tool, pattern, args, seconds, outcome weights (ok, failed, cancelled)
    ("search", "search_knowledge", "interruptible", {"query": "late checkout"}, 0.4, (9, 0, 1)),
    ("search", "search_web", "interruptible", {"query": "ferry times tomorrow"}, 1.8, (7, 2, 2)),
    ("billing", "account_balance", "critical", {}, 0.3, (10, 0, 0)),
    ("billing", "pay_invoice", "critical", {"invoice_id": "INV-1042", "card": "****1111"}, 2.5, (8, 2, 0)),
    ("reports", "generate_report", "background", {"kind": "occupancy", "period": "march"}, 42.0, (6, 1, 1)),
    ("triage", "record_call_outcome", "fire_and_forget", {}, 0.1, (10, 0, 0)),
]  # fmt: skip


def backdate_call(sid: str, start: datetime, ended: bool) -> Any:
    """Spread a demo call over minutes (it was written in milliseconds)."""
    c = Call.__table__

    async def write(conn: Any, events: list[Any]) -> None:
        row = (await conn.execute(select(c.c.handoffs).where(c.c.session_id == sid))).one()
        moved = [
            {**h, "at": (start + timedelta(seconds=5 + 70 * i)).isoformat()}
            for i, h in enumerate(row.handoffs)
        ]
        end = start + timedelta(seconds=70 * len(moved) + 95) if ended else None
        await conn.execute(
            update(c)
            .where(c.c.session_id == sid)
            .values(started_at=start, ended_at=end, handoffs=moved)
        )

    return write


async def seed(url: str) -> dict[str, int]:
    rng = random.Random(7)
    store = await open_store(url)
    t = TaskRow.__table__
    e = TaskEventRow.__table__
    now = utcnow()
    keep: dict[str, int] = {}
    try:
        for n in range(8):
            sid = f"RM_{n + 1:03d}"
            caller = CALLERS[n % len(CALLERS)]
            await store.call_started(sid, caller)
            await store.call_handoff(sid, None, "triage")
            for dept in rng.sample(["search", "billing", "reports"], k=rng.randint(1, 2)):
                await store.call_handoff(sid, "triage", dept)
            if n < 7:
                await store.call_ended(sid)
            await store.run_write(backdate_call(sid, now - timedelta(minutes=64 - 7 * n), n < 7))
        for i in range(48):
            dept, tool, pattern, args, secs, weights = WORK[i % len(WORK)]
            sid = f"RM_{i % 8 + 1:03d}"
            task = await store.create(
                caller=CALLERS[i % 8 % len(CALLERS)], session_id=sid, department=dept,
                tool=tool, plugin=dept, pattern=pattern, args=args,
                status="running" if pattern != "background" else "queued",
            )  # fmt: skip
            if pattern == "background":
                await start_job(store, task.id, "harbor-1")
            if i >= 44:  # the newest stay in flight
                if pattern == "background":
                    await store.set_progress(task.id, 0.6, "drawing charts")
                    keep["running"] = task.id
                continue
            status = rng.choices(["succeeded", "failed", "cancelled"], weights)[0]
            if status == "succeeded":
                result = {"path": f"reports/{sid}.pdf"} if pattern == "background" else "done"
                await store.transition(task.id, "succeeded", result=result)
                keep.setdefault("succeeded", task.id) if pattern == "background" else None
            elif status == "failed" and pattern == "background":
                # What core/execution.py stores for an unexpected exception: its type and the
                # reference its log line carries.
                error = "internal error: FileNotFoundError (ref 3f9a1c2e)"
                await store.transition(task.id, "failed", error=error)
                keep["failed"] = task.id
            elif status == "failed":
                await store.transition(task.id, "failed", error="the payment gateway timed out")
            else:
                await store.transition(task.id, "cancelled", error="caller interrupted")
            started = now - timedelta(minutes=60 - i)
            took = timedelta(seconds=secs * rng.uniform(0.5, 1.8))

            async def times(conn, events, task_id=task.id, started=started, took=took):
                await conn.execute(
                    update(t)
                    .where(t.c.id == task_id)
                    .values(created_at=started, started_at=started, finished_at=started + took)
                )
                # The timeline tells the same story as the row: started, then finished.
                for statuses, at in ((("queued", "running"), started), (FINISHED, started + took)):
                    await conn.execute(
                        update(e)
                        .where(e.c.task_id == task_id, e.c.status.in_(statuses))
                        .values(at=at)
                    )

            await store.run_write(times)
        queued = await store.create(
            caller=CALLERS[0], session_id="RM_008", department="reports", tool="generate_report",
            plugin="reports", pattern="background", args={"kind": "revenue", "period": "q1"},
        )  # fmt: skip
        keep["queued"] = queued.id
    finally:
        await store.close()
    return keep


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    url = f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/demo.db"
    keep = run_async(lambda: seed(url))
    script = {
        "agent": "agent-1",
        "tasks": {"v": 1, "tasks": [], "truncated": False},
        "steps": [
            {"transcript": {"from": "agent", "stream": "s1", "chunks": ["Good evening, Harbor Light front desk. How can I help?"], "attributes": {"lk.segment_id": "a1"}}},
            {"transcript": {"from": "caller", "stream": "s2", "chunks": ["Could you put together the March occupancy report?"], "attributes": {"lk.segment_id": "u1"}}},
            {"rpc": {"v": 1, "task_id": 51, "tool": "generate_report", "department": "reports", "pattern": "background", "status": "queued", "progress": None, "note": "queued", "at": "2026-03-01T19:02:11+00:00"}},
            {"transcript": {"from": "agent", "stream": "s3", "chunks": ["I've started it; I'll tell you when it's ready."], "attributes": {"lk.segment_id": "a2"}}},
            {"rpc": {"v": 1, "task_id": 51, "tool": "generate_report", "department": "reports", "pattern": "background", "status": "running", "progress": 0.6, "note": "progress 60%: drawing charts", "at": "2026-03-01T19:02:30+00:00"}},
            {"rpc": {"v": 1, "task_id": 50, "tool": "account_balance", "department": "billing", "pattern": "critical", "status": "succeeded", "progress": None, "note": None, "at": "2026-03-01T19:01:40+00:00"}},
        ],
    }  # fmt: skip
    import os

    os.environ.update(
        LIVEKIT_URL="wss://livekit.example", LIVEKIT_API_KEY="demo", LIVEKIT_API_SECRET="d" * 32
    )
    with serve(create_app(url, call_access=CallAccess("open"))) as base, chromium() as browser:
        page = browser.new_page()
        shots = {
            "tasks": "/tasks",
            "task": f"/tasks/{keep.get('failed', keep['succeeded'])}",
            "calls": "/calls",
            "stats": "/stats",
        }
        for name, path in shots.items():
            page.goto(base + path)
            page.wait_for_load_state("networkidle") if name == "stats" else None
            page.screenshot(path=str(out / f"{name}.png"), full_page=name != "tasks")
        page.route(
            "**/static/vendor/livekit-client.umd.js",
            lambda r: r.fulfill(
                body=(HERE / "fake_livekit.js").read_text(), content_type="application/javascript"
            ),
        )
        page.add_init_script(f"window.__FAKE_LIVEKIT = {json.dumps(script)};")
        page.goto(base + "/call")
        page.click("#join button[type=submit]")
        page.wait_for_selector("html[data-replayed=yes]", state="attached")
        page.screenshot(path=str(out / "call.png"))
        page.close()
    print("\n".join(str(p) for p in sorted(out.glob("*.png"))))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/web"))
