"""`frontdesk demo`: the bundled tour passes its own expectations and leaves the promised rows."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from clirun import FRONTDESK, tasks_json

ROOT = Path(__file__).resolve().parent.parent


def test_demo_tour(tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path}/demo.db"
    env = {
        **os.environ,
        "FRONTDESK_LOAD_PLUGINS": "",
        "FRONTDESK_REPORTS_PATH": str(tmp_path / "reports"),
        # What `make demo` does: the hotel's profile (and, through it, its knowledge base).
        "FRONTDESK_PROFILE": str(ROOT / "examples" / "demo" / "frontdesk.toml"),
    }
    out = subprocess.run(
        [*FRONTDESK, "demo", "--db", db],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,  # nothing is found relative to the checkout's working directory
    )
    assert out.returncode == 0, out.stderr + out.stdout[-3000:]
    assert "handoff triage → search" in out.stdout and "report file:" in out.stdout
    # The business is the profile's: the greeting is examples/demo/frontdesk.toml's.
    assert "Hello, you've reached the Harbor Light Hotel front desk." in out.stdout
    rows = tasks_json(db, env=env)
    by_tool: dict[str, list] = {}
    for r in reversed(rows):
        by_tool.setdefault(r["tool"], []).append(r)
    assert [r["status"] for r in by_tool["search_web"]] == ["cancelled"]
    assert [r["status"] for r in by_tool["search_knowledge"]] == ["succeeded"]
    paid = [r for r in by_tool["pay_invoice"] if r["args"]["confirmed"]]
    assert len(paid) == 1 and paid[0]["status"] == "succeeded"  # the retry did not charge again
    reports = by_tool["generate_report"]
    assert [r["status"] for r in reports] == ["succeeded", "succeeded"] and all(
        r["delivered_at"] for r in reports
    )
    for r in reports:
        for path in r["result"]["files"].values():
            assert Path(path).exists()
    assert all(r["status"] != "running" for r in rows)
