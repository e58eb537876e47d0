"""The CLI as an operator uses it: real subprocesses, real databases, exit codes and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import FRONTDESK
from jobkit import start_job

from frontdesk.core.schema import open_store

ROOT = Path(__file__).resolve().parent.parent


def run(
    *args: str, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "FRONTDESK_LOAD_PLUGINS": "", **(env or {})}
    return subprocess.run(
        [*FRONTDESK, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=120
    )


async def test_tasks_list_and_show_json(db_url):
    store = await open_store(db_url)
    task = await store.create(
        caller="alice",
        tool="search_knowledge",
        pattern="interruptible",
        status="running",
        args={"query": "wifi"},
    )
    await store.transition(task.id, "succeeded", result="The wifi is free.")
    await store.create(caller="bob", tool="generate_report", pattern="background")
    await store.close()

    out = run("tasks", "list", "--json", "--db", db_url)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["caller"] for r in rows] == ["bob", "alice"]
    columns = {
        "id",
        "caller",
        "session_id",
        "department",
        "tool",
        "plugin",
        "pattern",
        "status",
        "args",
        "result",
        "error",
        "progress",
        "progress_note",
        "idempotency_key",
        "attempts",
        "lease_owner",
        "lease_expires_at",
        "created_at",
        "started_at",
        "finished_at",
        "delivered_at",
    }
    assert set(rows[0]) == columns

    filtered = json.loads(
        run(
            "tasks", "list", "--json", "--caller", "alice", "--status", "succeeded", "--db", db_url
        ).stdout
    )
    assert [(r["id"], r["result"]) for r in filtered] == [(task.id, "The wifi is free.")]
    assert json.loads(run("tasks", "list", "--json", "--tool", "nope", "--db", db_url).stdout) == []
    assert (
        len(json.loads(run("tasks", "list", "--json", "--limit", "1", "--db", db_url).stdout)) == 1
    )

    shown = json.loads(run("tasks", "show", str(task.id), "--json", "--db", db_url).stdout)
    assert shown["status"] == "succeeded" and [e["status"] for e in shown["events"]] == [
        "running",
        "succeeded",
    ]
    table = run("tasks", "list", "--db", db_url)
    assert "search_knowledge" in table.stdout and table.returncode == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["tasks", "show", "4242"], "task 4242 not found"),
        (
            ["tasks", "list", "--status", "weird"],
            "unknown status 'weird'; use one of queued, running, succeeded, failed, cancelled",
        ),
        (["tasks", "cancel", "4242"], "task 4242 not found"),
        (["tasks", "show", "99999999999999999999999"], "task 99999999999999999999999 not found"),
    ],
)
async def test_bad_input_gets_one_line_and_exit_2(db_url, args, message):
    await (await open_store(db_url)).close()
    out = run(*args, "--db", db_url)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"error: {message}"]
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "mysql://bob:hunter22@db/y",
        "sqlite+aiosqlite:////nonexistent-dir/x/y.db",
        "postgresql+asyncpg://bob:hunter22@127.0.0.1:1/nope",
    ],
)
@pytest.mark.parametrize("command", [["tasks", "list"], ["demo"], ["runner"], ["db", "current"]])
def test_bad_database_url(url, command):
    out = run(*command, "--db", url)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert "hunter22" not in out.stderr + out.stdout


def test_unreadable_scenario(tmp_path, db_url):
    missing = run("simulate", str(tmp_path / "nope.yaml"), "--db", db_url)
    assert missing.returncode == 2 and "cannot read scenario" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("caller: x\nsteps:\n  - user: hi\n  - dance: {}\n")
    out = run("simulate", str(bad), "--db", db_url)
    assert out.returncode == 2 and "step 2" in out.stderr and "Traceback" not in out.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("caller: [unclosed\n")
    out = run("simulate", str(broken), "--db", db_url)
    assert out.returncode == 2 and "not valid YAML" in out.stderr


def test_db_upgrade_current_downgrade(db_url, tmp_path):
    missing = run("db", "current", "--db", db_url)
    assert missing.returncode == 2 and "no frontdesk database at" in missing.stderr
    assert not (tmp_path / "frontdesk.db").exists()  # reading does not create
    assert run("db", "upgrade", "--db", db_url).returncode == 0
    lines = run("db", "current", "--db", db_url).stdout.splitlines()
    assert {line.split(":")[0] for line in lines} >= {"frontdesk", "billing"}
    assert all(line.endswith(" (head)") for line in lines), lines
    for branch in ("billing", "frontdesk"):
        out = run("db", "downgrade", "base", "--branch", branch, "--db", db_url)
        assert out.returncode == 0, out.stderr
    lines = run("db", "current", "--db", db_url).stdout.splitlines()
    assert {line.split(":")[0] for line in lines} >= {"frontdesk", "billing"}
    # DBOS's tables are not an Alembic branch: a branch's downgrade leaves them be.
    jobs = [line for line in lines if line.startswith("jobs (dbos): ")]
    assert len(jobs) == 1 and jobs[0].endswith(" (head)"), lines
    assert all(": empty (head is " in line for line in lines if line not in jobs), lines


def test_default_database_is_frontdesk_db_in_working_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FRONTDESK_DATABASE_URL"}
    env = {**env, "FRONTDESK_LOAD_PLUGINS": ""}

    def here(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*FRONTDESK, *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
        )

    out = here("tasks", "list", "--json")
    assert out.returncode == 2 and out.stderr.splitlines() == [
        "error: no frontdesk database at frontdesk.db; "
        "`frontdesk db upgrade --db sqlite+aiosqlite:///frontdesk.db` creates one"
    ]
    assert not (tmp_path / "frontdesk.db").exists()
    assert here("db", "upgrade").returncode == 0 and (tmp_path / "frontdesk.db").exists()
    out = here("tasks", "list", "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == []


def test_version():
    from importlib.metadata import version

    out = run("--version")
    assert out.returncode == 0 and out.stdout == f"frontdesk {version('frontdesk')}\n"


def test_a_bad_core_setting_is_one_config_error(monkeypatch, tmp_path):
    from frontdesk.core.errors import ConfigError
    from frontdesk.core.settings import load_settings, load_settings_leniently

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FRONTDESK_JOB_LEASE_SECONDS", "abc")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "FRONTDESK_JOB_LEASE_SECONDS: Input should be a valid number, "
        "unable to parse string as a number (got 'abc')"
    )
    monkeypatch.delenv("FRONTDESK_JOB_LEASE_SECONDS")
    (tmp_path / ".env").write_text(
        "FRONTDESK_RUNNER_CONCURRENCY=0\nFRONTDESK_JOB_LEASE_SECONDS=-1\n"
    )
    settings, problems = load_settings_leniently()
    assert settings.job_lease_seconds == 30.0 and settings.runner_concurrency == 4
    assert sorted(problems) == [
        "FRONTDESK_JOB_LEASE_SECONDS (in .env): Input should be greater than 0 (got '-1')",
        "FRONTDESK_RUNNER_CONCURRENCY (in .env): Input should be greater than or equal to 1 (got '0')",
    ]


def test_logs_are_info_for_frontdesk_and_warning_for_libraries():
    code = (
        "import logging\n"
        "from frontdesk.agents.programs.logs import configure\n"
        "logging.basicConfig(level=logging.DEBUG)\n"  # as `frontdesk dev --log-level DEBUG` does
        "configure()\n"
        "print(logging.getLogger('aiosqlite').isEnabledFor(logging.DEBUG),\n"
        "      logging.getLogger('sqlalchemy.engine').isEnabledFor(logging.INFO),\n"
        "      logging.getLogger('frontdesk.runner').isEnabledFor(logging.INFO),\n"
        "      logging.getLogger('frontdesk.runner').isEnabledFor(logging.DEBUG))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False", "True", "False"], out.stderr


def test_dev_logs_at_info_by_default():
    import inspect

    from frontdesk.agents.programs.cli_voice import dev

    assert inspect.signature(dev).parameters["log_level"].default.default == "INFO"


def test_the_demo_hint_is_a_command_that_runs_as_pasted(monkeypatch, tmp_path):
    from frontdesk.agents.programs import cli_session

    script = tmp_path / ".venv" / "bin" / "frontdesk"
    script.parent.mkdir(parents=True)
    script.write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    assert cli_session._me() == ".venv/bin/frontdesk"
    monkeypatch.setattr(sys, "argv", ["/elsewhere/frontdesk", "demo"])
    assert cli_session._me() == "/elsewhere/frontdesk"
    monkeypatch.setattr(sys, "argv", ["-m", "demo"])
    assert cli_session._me().endswith(" -m frontdesk.agents.programs")


def test_operator_commands_do_not_import_livekit(db_url):
    code = (
        f"import sys; sys.argv=['frontdesk','tasks','list','--json','--db',{db_url!r}];"
        "from frontdesk.agents.programs.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LIVEKIT' if any(m.startswith('livekit') for m in sys.modules) else 'CLEAN', file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FRONTDESK_LOAD_PLUGINS": ""},
    )
    assert out.stderr.strip().endswith("CLEAN"), out.stderr


async def test_tasks_stats_show_artifacts_and_cancel(db_url, tmp_path):
    store = await open_store(db_url)
    a = await store.create(
        caller="a",
        tool="search_knowledge",
        pattern="interruptible",
        status="running",
        department="search",
    )
    await store.transition(a.id, "succeeded")
    b = await store.create(
        caller="a", tool="pay_invoice", pattern="critical", status="running", department="billing"
    )
    await store.transition(b.id, "failed", error="unknown invoice")
    report = await store.create(
        caller="a", tool="generate_report", pattern="background", department="reports"
    )
    await start_job(store, report.id)
    csv_path = tmp_path / "r.csv"
    await store.transition(
        report.id, "succeeded", result={"summary": "ok", "files": {"csv": str(csv_path)}}
    )
    queued = await store.create(
        caller="a", tool="generate_report", pattern="background", department="reports"
    )
    await store.close()

    stats = json.loads(run("tasks", "stats", "--json", "--db", db_url).stdout)
    counts = {(s["department"], s["status"]): s["count"] for s in stats}
    assert counts == {
        ("billing", "failed"): 1,
        ("reports", "succeeded"): 1,
        ("search", "succeeded"): 1,
    }
    assert all(s["median_seconds"] is not None for s in stats)
    assert "billing" in run("tasks", "stats", "--db", db_url).stdout

    shown = run("tasks", "show", str(report.id), "--db", db_url)
    assert shown.returncode == 0 and str(csv_path) in shown.stdout and "artifact" in shown.stdout

    assert (
        run("tasks", "cancel", str(queued.id), "--db", db_url).stdout.strip()
        == f"task {queued.id} cancelled"
    )
    again = run("tasks", "cancel", str(queued.id), "--db", db_url)
    assert again.returncode == 2 and "already cancelled" in again.stderr
    critical = run("tasks", "cancel", str(b.id), "--db", db_url)
    assert critical.returncode == 2 and "only background jobs" in critical.stderr


def readme_commands() -> list[str]:
    """Every `.venv/bin/frontdesk ...` line in the README's sh blocks, comments dropped."""
    import re

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(".venv/bin/frontdesk")]


@pytest.mark.slow
def test_every_readme_command_works_after_make_demo(tmp_path):
    """What `make demo` runs, then each README command and the demo's closing hint, pasted."""
    import shlex

    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRONTDESK_", "LIVEKIT_"))}
    env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
    env["FRONTDESK_LOAD_PLUGINS"] = ""  # the demo's desks only: nothing else installed here
    demo_env = {
        **env,
        "FRONTDESK_PROFILE": "examples/demo/frontdesk.toml",
        "FRONTDESK_DATABASE_URL": "sqlite+aiosqlite:///demo.db",
        "FRONTDESK_REPORTS_PATH": "reports",
    }
    demo = subprocess.run(
        [*FRONTDESK, "demo"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=demo_env,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    [hint] = [line for line in demo.stdout.splitlines() if line.startswith("history: ")]
    pasted = subprocess.run(
        shlex.split(hint.removeprefix("history: ")),
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert pasted.returncode == 0 and "alice" in pasted.stdout, pasted.stderr

    commands = readme_commands()
    assert any("--caller alice --status succeeded --db sqlite:///demo.db" in c for c in commands)
    for command in commands:
        argv = shlex.split(command)[1:]
        out = subprocess.run(
            [*FRONTDESK, *argv],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            input="/quit\n",
            timeout=180,
        )
        if argv[0] == "start":  # documented as needing LiveKit's three variables
            assert out.returncode == 2 and out.stderr.startswith("error: LIVEKIT_URL"), out.stderr
            continue
        assert out.returncode == 0, (command, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr, command
        if argv[:2] == ["tasks", "list"]:
            assert "alice" in out.stdout and "succeeded" in out.stdout, out.stdout
