"""``frontdesk doctor``, ``start`` and ``dev``: plain words, no secrets, nothing started offline."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from frontdesk.agents.programs import cli_voice, worker
from frontdesk.db.engine import mask_url

pytestmark = pytest.mark.usefixtures("no_network")

SECRETS = {
    "OPENAI_API_KEY": "sk-SECRET123",
    "DEEPGRAM_API_KEY": "dg-SECRET234",
    "ELEVEN_API_KEY": "el-SECRET345",
    "LIVEKIT_API_KEY": "APIkeySECRET456",
    "LIVEKIT_API_SECRET": "lk-SECRET567",
}
ENV_VARS = (
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DEEPGRAM_API_KEY",
    "ELEVEN_API_KEY",
    "LIVEKIT_URL",
    "LIVEKIT_API_KEY",
    "LIVEKIT_API_SECRET",
    "LIVEKIT_AGENT_NAME",
    "FRONTDESK_LLM",
    "FRONTDESK_STT",
    "FRONTDESK_TTS",
    "GOOGLE_GENAI_USE_VERTEXAI",
)


@pytest.fixture
def app():
    a = typer.Typer()
    cli_voice.register(a)
    return a


@pytest.fixture
def bare(monkeypatch, tmp_path, db_url):
    """A machine with no keys, in an empty directory."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FRONTDESK_DATABASE_URL", db_url)
    return monkeypatch


def run(app, *args):
    return CliRunner().invoke(app, list(args))


def test_doctor_on_a_machine_with_no_keys(app, bare, db_url, tmp_path):
    result = run(app, "doctor")
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        "LLM: offline (auto: the offline brain, because none of OPENAI_API_KEY, GOOGLE_API_KEY is set)"
        in out
    )
    assert "STT: none (auto: text only" in out and "TTS: none (auto: text only" in out
    assert "voice: text only" in out
    assert "OPENAI_API_KEY: not set" in out and "ELEVEN_API_KEY: not set" in out
    assert "LIVEKIT_URL: not set" in out
    assert "`frontdesk start` needs LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET" in out
    assert "PortAudio:" in out
    assert "does not exist yet" in out
    assert not (tmp_path / "frontdesk.db").exists()  # doctor looks, it does not create
    assert "plugins" in out and "departments: triage" in out
    assert out.rstrip().endswith("all good")


def test_doctor_never_prints_secrets(app, bare, store, tmp_path):
    for k, v in SECRETS.items():
        bare.setenv(k, v)
    bare.setenv(
        "LIVEKIT_URL", "wss://user:pw-SECRET678@demo.livekit.cloud:7880/?token=tok-SECRET789"
    )
    (tmp_path / ".env").write_text("GOOGLE_API_KEY=g-SECRET890\n")
    text = run(app, "doctor")
    as_json = run(app, "doctor", "--json")
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output
    leaked = [*SECRETS.values(), "pw-SECRET678", "tok-SECRET789", "g-SECRET890"]
    for out in (text.output, as_json.output):
        for value in leaked:
            assert value not in out and value.split("-")[-1] not in out
    assert "LIVEKIT_URL: set (wss://demo.livekit.cloud:7880)" in text.output
    assert (
        "OPENAI_API_KEY: set" in text.output and "GOOGLE_API_KEY: set" in text.output
    )  # .env counts
    assert (
        "LLM: openai:gpt-4.1-mini@https://api.openai.com/v1 (auto: OPENAI_API_KEY is set)"
        in text.output
    )
    assert "STT: deepgram:nova-3" in text.output and "TTS: elevenlabs" in text.output
    assert "voice: STT and TTS are both available" in text.output
    assert "`frontdesk start` can register with LiveKit" in text.output
    assert "reachable: yes" in text.output and "schema frontdesk: at the head" in text.output
    report = json.loads(as_json.output)
    assert report["ok"] is True and set(report["sections"]) == {
        "providers",
        "livekit",
        "audio",
        "database",
        "profile",
        "plugins",
    }


def test_doctor_reports_a_missing_key_for_an_explicit_choice(app, bare):
    bare.setenv("FRONTDESK_TTS", "elevenlabs:V1")
    result = run(app, "doctor")
    assert result.exit_code == 1
    assert "[FAIL] TTS: FRONTDESK_TTS=elevenlabs:V1 needs ELEVEN_API_KEY to be set" in result.output
    assert "problems found" in result.output


def test_doctor_reports_an_unreachable_database(app, bare, tmp_path):
    bare.setenv("FRONTDESK_DATABASE_URL", "mysql://root:pw-SECRET@db/x")
    result = run(app, "doctor")
    assert result.exit_code == 1
    assert "unsupported database" in result.output and "pw-SECRET" not in result.output


def test_doctor_reports_an_empty_schema(app, bare, tmp_path):
    import sqlite3

    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    bare.setenv("FRONTDESK_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    result = run(app, "doctor")
    assert result.exit_code == 0
    assert (
        "reachable: yes" in result.output
        and "schema frontdesk: empty; migrated to" in result.output
    )


def test_mask_url_hides_passwords():
    assert mask_url("postgresql+asyncpg://fd:pw-SECRET@db.internal:5432/frontdesk") == (
        "postgresql+asyncpg://fd:***@db.internal:5432/frontdesk"
    )
    masked = mask_url("postgresql://fd@db/x?sslpassword=SECRET&sslmode=require")
    assert "SECRET" not in masked and "sslmode=require" in masked
    assert mask_url("sqlite+aiosqlite:///frontdesk.db") == "sqlite+aiosqlite:///frontdesk.db"


def test_doctor_does_not_import_livekit(tmp_path):
    code = (
        "import sys, typer\n"
        "from frontdesk.agents.programs import cli_voice\n"
        "app = typer.Typer(); cli_voice.register(app)\n"
        "try:\n    app(['doctor'])\nexcept SystemExit:\n    pass\n"
        "print('LIVEKIT', sorted(m for m in sys.modules if m.startswith('livekit')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FRONTDESK_LOAD_PLUGINS": ""},
    )
    assert "LIVEKIT []" in out.stdout, out.stdout + out.stderr


# -- start / dev ----------------------------------------------------------------------------


def test_start_without_livekit_settings_is_one_line_and_exit_2(app, bare):
    result = run(app, "start")
    assert result.exit_code == 2
    assert "LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET not set" in result.output
    assert "Traceback" not in result.output


def test_start_with_a_missing_provider_key_is_exit_2(app, bare):
    for var in ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"):
        bare.setenv(var, "dummy")
    bare.setenv("FRONTDESK_LLM", "openai:gpt-4.1-mini")
    result = run(app, "start")
    assert result.exit_code == 2 and "needs OPENAI_API_KEY" in result.output


class FakeRunnerThread:
    instances: list[FakeRunnerThread] = []

    def __init__(self, settings, registry=None):
        self.started = self.stopped = False
        FakeRunnerThread.instances.append(self)

    def start(self):
        self.started = True

    def stop(self, timeout=30.0):
        self.stopped = True
        return True


@pytest.fixture
def no_worker(bare, monkeypatch):
    for var in ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"):
        bare.setenv(var, "dummy")
    served: list[dict] = []
    FakeRunnerThread.instances.clear()
    monkeypatch.setattr(
        worker, "run_server", lambda server, **kw: served.append({"server": server, **kw})
    )
    monkeypatch.setattr(worker, "RunnerThread", FakeRunnerThread)
    return served


def test_start_builds_the_server_and_runs_the_runner(app, no_worker):
    result = run(app, "start", "--agent-name", "frontdesk-phone")
    assert result.exit_code == 0, result.output
    (call,) = no_worker
    assert call["dev"] is False and call["log_level"] == "INFO" and call["log_format"] == "json"
    server = call["server"]
    assert server._agent_name == "frontdesk-phone"
    assert server.setup_fnc is worker.prewarm and server._entrypoint_fnc is worker.entrypoint
    (runner,) = FakeRunnerThread.instances
    assert runner.started and runner.stopped
    assert "text only" in result.output  # no STT/TTS keys: said, not hidden


def test_start_no_runner_and_dev(app, no_worker):
    assert run(app, "start", "--no-runner").exit_code == 0
    assert FakeRunnerThread.instances == []
    assert run(app, "dev").exit_code == 0
    assert no_worker[-1]["dev"] is True and no_worker[-1]["log_format"] == "colored"
    assert no_worker[-1]["server"]._agent_name == ""  # automatic dispatch
    assert len(FakeRunnerThread.instances) == 1


def test_doctor_db_looks_at_the_database_it_names(app, bare, tmp_path):
    bare.setenv("FRONTDESK_DATABASE_URL", "mysql://root:pw-SECRET@db/x")  # not this one
    path = tmp_path / "other.db"
    result = run(app, "doctor", "--json", "--db", f"sqlite+aiosqlite:///{path}")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["sections"]["database"]
    assert rows[0] == {"item": "URL", "status": "ok", "detail": f"sqlite+aiosqlite:///{path}"}
    assert not path.exists()  # doctor only looks
