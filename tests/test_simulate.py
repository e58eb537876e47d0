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

import crashkit
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
    started = [
        e["note"] for e in shown["events"] if (e["note"] or "").startswith("started by runner ")
    ]
    [(executor,)] = crashkit.query(
        db_url, "SELECT executor_id FROM runners WHERE pid = ?", runner.pid
    )
    assert started == [f"started by runner {executor}"]  # the other process ran it
    assert runner.returncode == 0
    time.sleep(0)


# -- what a new user trips over (issue 16) ----------------------------------------------------

CARD = "4111 1111 1111 1111"
PIN = "4321"


def test_an_unknown_tool_fails_in_text_mode_with_its_reason(tmp_path, db_url):
    path = write(
        tmp_path,
        "spell.yaml",
        {
            "caller": "uma",
            "steps": [
                {"user": "do magic", "llm": [{"tools": [{"cast_a_spell": {}}]}, {"say": "No."}]},
                {"user": "thanks", "llm": [{"say": "Bye."}]},
            ],
        },
    )
    out = simulate(str(path), "--db", db_url)
    assert out.returncode == 1, out.stdout + out.stderr
    reason = f"{path}: step 1 (user): the LLM called unknown tool 'cast_a_spell'"
    assert out.stderr.splitlines() == [f"FAILED {reason}"]
    assert reason in out.stdout.replace("\n", "")  # the transcript shows it where it happened
    assert "Bye." in out.stdout  # the call went on


def test_turns_the_offline_brain_answers_are_reported_and_strict_fails_them(tmp_path, db_url):
    path = write(
        tmp_path,
        "brain.yaml",
        {
            "caller": "ben",
            "steps": [
                {"user": "hello", "llm": [{"say": "Hi, scripted."}]},
                {"user": "what can you do"},  # nothing scripted: the brain answers
            ],
        },
    )
    text = simulate(str(path), "--db", db_url)
    assert text.returncode == 0, text.stderr
    assert "step 2 (user): answered by the offline brain" in text.stdout
    assert "step 1 (user): answered" not in text.stdout

    as_json = simulate(str(path), "--json", "--db", db_url)
    brain = [e for e in events(as_json.stdout) if e["type"] == "brain"]
    assert brain and {e["step"] for e in brain} == {2}, brain

    strict = simulate(str(path), "--strict", "--db", db_url)
    assert strict.returncode == 1
    assert strict.stderr.splitlines() == [
        f"FAILED {path}: step 2 (user): no scripted llm reply left; the offline brain "
        "answered (--strict)"
    ]


def test_voice_mode_reports_brain_turns_and_strict_fails_them(tmp_path, db_url):
    path = write(
        tmp_path,
        "brain_voice.yaml",
        {
            "caller": "bev",
            "steps": [
                {"user": "hello", "llm": [{"say": "Hi, scripted."}]},
                {"user": "what can you do"},  # nothing scripted: the brain answers
            ],
        },
    )
    as_json = simulate(str(path), "--voice", "--json", "--db", db_url)
    assert as_json.returncode == 0, as_json.stderr
    brain = [e for e in events(as_json.stdout) if e["type"] == "brain"]
    assert brain and {e["step"] for e in brain if e["step"] is not None} == {2}, brain

    strict = simulate(str(path), "--voice", "--strict", "--db", db_url)
    assert strict.returncode == 1, strict.stderr
    assert strict.stderr.splitlines() == [
        f"FAILED {path}: step 2 (user): no scripted llm reply left; the offline brain "
        "answered (--strict)"
    ]


def test_an_invalid_said_pattern_is_one_clear_line(tmp_path, db_url):
    path = write(tmp_path, "re.yaml", {"steps": [{"user": "hi"}, {"expect": {"said": "("}}]})
    out = simulate(str(path), "--db", db_url)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"error: {path}: step 2: 'said' '(' is not a valid regular expression (missing ), "
        "unterminated subpattern at position 0); escape ( ) [ ] . * + ? with a backslash to "
        "match them literally"
    ]


async def test_said_is_a_case_insensitive_regular_expression(settings, registry, transcript):
    from frontdesk.agents.programs.scenario import parse_scenario
    from frontdesk.agents.programs.simulate import simulate as run_sim

    steps = [
        {"user": "hi", "llm": [{"say": "I paid $120.00 (in full)."}]},
        {"expect": {"said": r"PAID \$120\.00 \(in full\)"}},
        {"expect": {"not_said": r"\$12\b"}},
    ]
    scenario = parse_scenario({"caller": "rex", "steps": steps})
    assert await run_sim([scenario], settings, registry, transcript.append, runner=False) == []


# A plugin that handles a PIN and echoes card numbers into its notes, results and errors.
from frontdesk.core import Department, ToolContext, ToolError, hookimpl, tool  # noqa: E402


@tool(pattern="interruptible", sensitive=["pin"])
async def verify_pin(ctx: ToolContext, account: str, pin: str) -> str:
    """Check the caller's PIN."""
    return "Your PIN is correct."


@tool(pattern="interruptible")
async def card_on_file(ctx: ToolContext, card: str) -> dict:
    """Say which card is on file."""
    await ctx.progress(0.5, f"checking card {card}")
    return {"card": card, "message": f"The card {card} is on file."}


@tool(pattern="interruptible")
async def decline(ctx: ToolContext, card: str) -> str:
    """Try a card."""
    raise ToolError(f"The card {card} was declined.")


class Vault:
    @hookimpl
    def register_departments(self, register) -> None:  # noqa: ANN001
        register(
            Department(
                name="vault",
                description="checks PINs and cards",
                instructions="You are the vault.",
                tools=[verify_pin, card_on_file, decline],
            )
        )


async def test_secrets_never_reach_the_store_the_llm_or_the_output(settings, store):
    import io

    from rich.console import Console

    from frontdesk.agents.programs import render
    from frontdesk.agents.programs.scenario import parse_scenario
    from frontdesk.agents.programs.simulate import CallDriver, Environment
    from frontdesk.core import host

    registry = host.load(settings, extra=[("vault", Vault())])
    steps = [
        {"user": "the vault", "llm": [{"tools": [{"transfer_to_vault": {}}]}, {"say": "Vault."}]},
        {
            "user": f"my pin is {PIN}",
            "llm": [{"tools": [{"verify_pin": {"account": "A1", "pin": PIN}}]}, {"say": "Ok."}],
        },
        {"user": "my card", "llm": [{"tools": [{"card_on_file": {"card": CARD}}]}, {"say": "Ok."}]},
        {"user": "charge it", "llm": [{"tools": [{"decline": {"card": CARD}}]}, {"say": "No."}]},
    ]
    scenario = parse_scenario({"caller": "val", "steps": steps})
    seen: list[dict] = []
    env = await Environment.open(settings, registry, runner=False)
    try:
        driver = CallDriver(env, scenario, "val", seen.append)
        env.routes["val"] = driver.emit
        await driver.connect()
        model = driver.llm
        for step in scenario.steps:
            await driver.play(step, None)
        await driver.hangup()
    finally:
        await env.close()

    calls = {e["name"]: e["arguments"] for e in seen if e["type"] == "tool_call"}
    assert json.loads(calls["verify_pin"]) == {"account": "A1", "pin": "[redacted]"}
    assert json.loads(calls["card_on_file"]) == {"card": "****1111"}
    # What simulate prints, in --json and in text: no PIN, no card number.
    as_json = "\n".join(json.dumps(e, default=str) for e in seen)
    buffer = io.StringIO()
    real = render.console
    render.console = Console(file=buffer, width=300)
    try:
        for event in seen:
            render.transcript_line(event)
    finally:
        render.console = real
    as_text = buffer.getvalue()
    assert "verify_pin" in as_text and '"pin": "[redacted]"' in as_text
    for output in (as_json, as_text):
        assert PIN not in output.replace("my pin is 4321", "")  # the caller's own words aside
        assert "1111 1111 1111" not in output  # the caller never says it; only a tool could
    assert "****1111" in as_text and "The card ****1111 is on file." in as_json
    assert "The card ****1111 was declined." in as_json  # the error, masked

    # What the LLM read back from each tool.
    outputs = [
        item.output
        for request in model.requests
        for item in request.items
        if item.type == "function_call_output"
    ]
    assert any("The card ****1111 is on file." in o for o in outputs), outputs
    assert any(o == "The card ****1111 was declined." for o in outputs), outputs
    assert not any("1111 1111 1111" in o for o in outputs)

    # What the store keeps: the row, its progress note and every event.
    rows = {t.tool: t for t in await store.list(caller="val")}
    assert rows["verify_pin"].args == {"account": "A1", "pin": "[redacted]"}
    assert rows["card_on_file"].result == {
        "card": "****1111",
        "message": "The card ****1111 is on file.",
    }
    assert rows["card_on_file"].progress_note == "checking card ****1111"
    assert rows["decline"].error == "The card ****1111 was declined."
    notes = [e["note"] or "" for t in rows.values() for e in await store.events(t.id)]
    assert "progress 50%: checking card ****1111" in notes
    assert not any("1111 1111 1111" in n for n in notes)
