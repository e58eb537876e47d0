"""`frontdesk simulate` as a subprocess: JSON events, a failing expect, concurrent callers,
and a separate `frontdesk runner` process executing a job a call queued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from clirun import FRONTDESK, tasks_json

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "FRONTDESK_LOAD_PLUGINS": "", "PYTHONPATH": str(ROOT / "tests")}


def write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def simulate(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*FRONTDESK, "simulate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**ENV, **(env or {})},
    )


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_json_events_and_a_passing_scenario(tmp_path, db_url):
    path = write(
        tmp_path,
        "ok.yaml",
        {
            "caller": "sam",
            "steps": [
                {
                    "user": "what are my tasks",
                    "llm": [{"tools": [{"my_tasks": {}}]}, {"say": "You have none."}],
                },
                {"expect": {"task": "my_tasks", "status": "succeeded"}},
                {"expect": {"said": "none"}},
            ],
        },
    )
    out = simulate(str(path), "--json", "--db", db_url)
    assert out.returncode == 0, out.stderr
    evs = events(out.stdout)
    assert all(isinstance(e["t"], float | int) and "type" in e for e in evs)
    kinds = [e["type"] for e in evs]
    assert kinds[0] == "session_start" and kinds[-1] == "session_end"
    assert {"user", "agent", "tool_call", "tool_output", "task"} <= set(kinds)
    agent_lines = [e for e in evs if e["type"] == "agent"]
    assert {e["agent"] for e in agent_lines} == {"triage"}
    tasks = [e for e in evs if e["type"] == "task"]
    assert [t["status"] for t in tasks] == ["running", "succeeded"] and tasks[0][
        "tool"
    ] == "my_tasks"


def test_failing_expect_exits_1_and_names_the_step(tmp_path, db_url):
    path = write(
        tmp_path,
        "fail.yaml",
        {
            "caller": "sam",
            "steps": [
                {"user": "hello", "llm": [{"say": "Hi there."}]},
                {"expect": {"agent": "triage"}},
                {"expect": {"said": "goodbye"}},
                {"user": "never reached"},
            ],
        },
    )
    out = simulate(str(path), "--json", "--db", db_url)
    assert out.returncode == 1
    assert "step 3 (expect) failed" in out.stderr and "goodbye" in out.stderr
    assert not any(e["type"] == "user" and e["text"] == "never reached" for e in events(out.stdout))


def test_concurrent_callers_in_one_process(tmp_path, db_url):
    path = write(
        tmp_path,
        "many.yaml",
        {
            "caller": "load",
            "steps": [
                {"user": "my tasks", "llm": [{"tools": [{"my_tasks": {}}]}, {"say": "None yet."}]},
                {"expect": {"task": "my_tasks", "status": "succeeded"}},
            ],
        },
    )
    out = simulate(str(path), str(path), "--callers", "5", "--json", "--db", db_url)
    assert out.returncode == 0, out.stderr
    starts = {e["caller"] for e in events(out.stdout) if e["type"] == "session_start"}
    assert starts == {f"load-{i}" for i in range(1, 6)} | {f"load-{i}~2" for i in range(1, 6)}
    rows = tasks_json(db_url, env=ENV)
    assert len(rows) == 10 and {r["status"] for r in rows} == {"succeeded"}


def test_standalone_runner_process_runs_a_job_a_call_queued(tmp_path, db_url):
    """The call side queues; a separate `frontdesk runner` process (loading the same plugins)
    runs the job; the scenario, with its own runner disabled, sees it succeed and delivers it."""
    env = {"FRONTDESK_TEST_PLUGIN": "kit", "FRONTDESK_JOB_LEASE_SECONDS": "3"}
    runner = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "run_with_kit.py"), "runner", "--db", db_url],
        env={**ENV, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        path = write(
            tmp_path,
            "bg.yaml",
            {
                "caller": "rita",
                "steps": [
                    {"user": "lab", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]},
                    {
                        "user": "run experiment q",
                        "llm": [
                            {"tools": [{"experiment": {"name": "q", "seconds": 0.4}}]},
                            {"say": "Started."},
                        ],
                    },
                    {"wait": {"task": "experiment", "status": "succeeded", "timeout": 30}},
                    {"wait": {"seconds": 0.5}},
                    {"expect": {"task": "experiment", "delivered": True}},
                ],
            },
        )
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "run_with_kit.py"),
                "simulate",
                str(path),
                "--json",
                "--db",
                db_url,
                "--no-runner",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**ENV, **env},
        )
        assert out.returncode == 0, out.stderr + out.stdout
    finally:
        runner.send_signal(signal.SIGTERM)
        try:
            runner.wait(15)
        except subprocess.TimeoutExpired:
            runner.kill()
    rows = tasks_json(db_url, "--tool", "experiment", env=ENV)
    assert len(rows) == 1 and rows[0]["status"] == "succeeded" and rows[0]["delivered_at"]
    shown = json.loads(
        subprocess.run(
            [*FRONTDESK, "tasks", "show", str(rows[0]["id"]), "--json", "--db", db_url],
            capture_output=True,
            text=True,
            env=ENV,
        ).stdout
    )
    claimed = [
        e["note"] for e in shown["events"] if (e["note"] or "").startswith("claimed by runner:")
    ]
    assert claimed and f":{runner.pid}:" in claimed[0]  # the other process ran it
    assert runner.returncode == 0
    time.sleep(0)
