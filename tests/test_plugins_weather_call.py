"""A simulated call reaches a department that only an installed plugin provides.

With frontdesk-weather pip-installed (and a plugin that raises at import installed beside it),
``frontdesk simulate examples/calls/weather.yaml`` hands off from triage to ``weather``, the
``forecast`` task succeeds, its row records the plugin's name, and the plugin's
``on_task_event`` observer saw the task's transitions.
"""

from __future__ import annotations

import json

import pytest
from test_plugins_venv import ROOT, WEATHER_SRC, PluginVenv, broken_package, copy_package

SCENARIO = ROOT / "examples" / "calls" / "weather.yaml"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("weather-call")
    env = PluginVenv(base / "venv")
    try:
        for source in (
            copy_package(WEATHER_SRC, base / "weather"),
            broken_package(base / "broken"),
        ):
            result = env.install(source)
            assert result.returncode == 0, result.stdout + result.stderr
        yield env
    finally:
        env.uninstall_quietly("frontdesk-weather", "frontdesk-broken")


def test_triage_hands_off_to_the_plugin_department_and_the_task_row_names_the_plugin(
    venv, tmp_path
):
    db = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    events_file = tmp_path / "events.jsonl"
    sim = venv.frontdesk(
        "simulate",
        str(SCENARIO),
        "--json",
        "--db",
        db,
        FRONTDESK_WEATHER_EVENTS_FILE=str(events_file),
    )
    # The broken plugin is installed too: the call still works.
    assert sim.returncode == 0, sim.stdout + sim.stderr
    lines = [json.loads(line) for line in sim.stdout.splitlines() if line.startswith("{")]
    assert lines, sim.stdout

    listed = venv.frontdesk("tasks", "list", "--json", "--db", db)
    assert listed.returncode == 0, listed.stderr
    rows = [t for t in json.loads(listed.stdout) if t["tool"] == "forecast"]
    assert len(rows) == 1
    row = rows[0]
    assert row["plugin"] == "weather"
    assert row["department"] == "weather"
    assert row["status"] == "succeeded"
    assert row["caller"] == "wendy"
    assert "Lisbon" in json.dumps(row["result"])

    # The plugin's on_task_event observer ran in the call's process.
    seen = [json.loads(line) for line in events_file.read_text().splitlines()]
    statuses = [e["status"] for e in seen if e["task_id"] == row["id"]]
    assert statuses[-1] == "succeeded" and "running" in statuses
