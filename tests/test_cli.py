"""The CLI as an operator uses it: real subprocesses, real databases, exit codes and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import FRONTDESK

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
        (["tasks", "list", "--status", "weird"], "unknown status 'weird'"),
        (["tasks", "cancel", "4242"], "task 4242 not found"),
    ],
)
def test_bad_input_gets_one_line_and_exit_2(db_url, args, message):
    out = run(*args, "--db", db_url)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"error: {message}"] or message in out.stderr
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


def test_db_upgrade_current_downgrade(db_url):
    assert "empty" in run("db", "current", "--db", db_url).stdout
    assert run("db", "upgrade", "--db", db_url).returncode == 0
    assert "(head)" in run("db", "current", "--db", db_url).stdout
    assert run("db", "downgrade", "base", "--db", db_url).returncode == 0
    assert "empty" in run("db", "current", "--db", db_url).stdout


def test_default_database_is_frontdesk_db_in_working_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FRONTDESK_DATABASE_URL"}
    out = subprocess.run(
        [*FRONTDESK, "tasks", "list", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "FRONTDESK_LOAD_PLUGINS": ""},
        timeout=60,
    )
    assert out.returncode == 0 and json.loads(out.stdout) == []
    assert (tmp_path / "frontdesk.db").exists()


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
    await store.claim("r", 30)
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
