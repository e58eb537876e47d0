"""`frontdesk console` driven through stdin, with the offline brain and no keys, walking every
department with ordinary phrasing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from clirun import FRONTDESK, tasks_json

ROOT = Path(__file__).resolve().parent.parent

LINES = [
    "hello",
    "what time is checkout",
    "is there parking",
    "I want to pay my bill",
    "pay INV-1002 120",
    "yes",
    "what is my balance",
    "I need a statement report for last 30 days",
    "take me back to the front desk",
    "blorp zzz",
    "bye",
]


def test_console_walks_every_department(tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path}/console.db"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(FRONTDESK_LOAD_PLUGINS="", FRONTDESK_REPORTS_PATH=str(tmp_path / "reports"))
    # The demo hotel's profile: its knowledge base (checkout, parking) and invoices (INV-1002).
    env["FRONTDESK_PROFILE"] = str(ROOT / "examples" / "demo" / "frontdesk.toml")
    out = subprocess.run(
        [*FRONTDESK, "console", "--caller", "newbie", "--db", db],
        input="\n".join(LINES) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Checkout is at 11 am" in text
    assert "parking" in text.lower()
    assert "Shall I go ahead?" in text and "Done: I paid $120.00" in text
    assert "$405.15" in text
    assert "(transferred search → billing)" in text and "(transferred billing → reports)" in text
    assert "Sorry, I didn't understand that." in text
    assert "Goodbye" in text
    rows = tasks_json(db, "--caller", "newbie", env=env)
    tools = {r["tool"]: r["status"] for r in rows}
    assert tools["search_knowledge"] == "succeeded" and tools["pay_invoice"] == "succeeded"
    assert tools["generate_report"] in ("queued", "running", "succeeded")
    assert not any(r["status"] == "running" and r["pattern"] != "background" for r in rows)


def test_console_mode_says_which_and_why(monkeypatch, tmp_path):
    import ctypes.util

    from frontdesk.agents.programs.console import console_mode
    from frontdesk.core.settings import Settings

    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path}/x.db")
    mode, why = console_mode(settings, env={})
    assert mode == "text" and "STT" in why and "TTS" in why
    keys = {
        "DEEPGRAM_API_KEY": "dg-dummy",
        "ELEVEN_API_KEY": "el-dummy",
        "OPENAI_API_KEY": "sk-dummy",
    }
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    mode, why = console_mode(settings, env=keys)
    assert mode == "text" and "PortAudio" in why and "libportaudio2" in why
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libportaudio.so.2")
    mode, why = console_mode(settings, env=keys)
    assert mode == "voice" and "deepgram" in why and "elevenlabs" in why


def test_console_text_banner_explains_the_mode(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(FRONTDESK_LOAD_PLUGINS="")
    out = subprocess.run(
        [*FRONTDESK, "console", "--db", f"sqlite+aiosqlite:///{tmp_path}/c.db"],
        input="bye\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0
    assert "text (no STT" in out.stdout and "offline brain" in out.stdout
