"""An installed plugin ships a department, a table and settings, exactly as docs/plugins.md says.

With frontdesk-weather pip-installed (a real wheel install, so its migrations must be in the
package data; a plugin that raises at import is installed beside it):
- ``frontdesk simulate examples/calls/weather.yaml`` hands off from triage to ``weather``, the
  ``forecast`` task succeeds, its row records the plugin's name, and the plugin's
  ``on_task_event`` observer saw the task's transitions;
- ``frontdesk db upgrade`` creates its ``weather_lookups`` table on its own branch and
  ``db current`` shows that branch;
- ``FRONTDESK_WEATHER_UNITS`` and a profile's ``[plugins.weather]`` table reach its tool, and a
  bad value stops the call before it starts with one line naming the variable (exit 2).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_plugins_venv import ROOT, WEATHER_SRC, PluginVenv, broken_package, copy_package

SCENARIO = ROOT / "examples" / "calls" / "weather.yaml"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("weather-call")
    env = PluginVenv(base / "venv")
    try:
        result = env.install(copy_package(WEATHER_SRC, base / "weather"))
        assert result.returncode == 0, result.stdout + result.stderr
        # Installed, but `plugins install` says it fails to import (exit 1).
        result = env.install(broken_package(base / "broken"))
        assert result.returncode == 1 and "fails to import" in result.stderr, result.stderr
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


def _db(tmp_path, name):
    path = tmp_path / name
    return path, f"sqlite+aiosqlite:///{path}"


def test_db_upgrade_creates_the_plugin_table_and_current_shows_its_branch(venv, tmp_path):
    path, db = _db(tmp_path, "m.db")
    up = venv.frontdesk("db", "upgrade", "--db", db)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "weather: upgraded to head" in up.stdout.splitlines()
    current = venv.frontdesk("db", "current", "--db", db)
    assert current.returncode == 0, current.stderr
    lines = current.stdout.splitlines()
    assert "weather: weather_0001 (head)" in lines
    assert any(line.startswith("frontdesk: ") and line.endswith("(head)") for line in lines)
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = conn.execute("SELECT version_num FROM alembic_version_weather").fetchone()
    assert {"weather_lookups", "alembic_version_weather"} <= tables and version == ("weather_0001",)

    # The branch can be taken down on its own; core is untouched.
    down = venv.frontdesk("db", "downgrade", "base", "--branch", "weather", "--db", db)
    assert down.returncode == 0, down.stderr
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "weather_lookups" not in tables and "tasks" in tables


def _forecast_rows(path):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT caller, city, units, summary FROM weather_lookups").fetchall()


def test_units_from_the_environment_reach_the_tool_and_its_table(venv, tmp_path):
    path, db = _db(tmp_path, "env.db")
    sim = venv.frontdesk("simulate", str(SCENARIO), "--db", db, FRONTDESK_WEATHER_UNITS="imperial")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert _forecast_rows(path) == [
        ("wendy", "Lisbon", "imperial", "Lisbon: sunny, high 50°F, low 43°F")
    ]


def test_units_from_a_profile_reach_the_tool(venv, tmp_path):
    profile = tmp_path / "frontdesk.toml"
    profile.write_text(
        '[business]\nname = "Bayside Dental"\n\n[plugins.weather]\nunits = "imperial"\n'
    )
    path, db = _db(tmp_path, "profile.db")
    sim = venv.frontdesk("simulate", str(SCENARIO), "--db", db, FRONTDESK_PROFILE=str(profile))
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert [r[2] for r in _forecast_rows(path)] == ["imperial"]


def test_a_bad_setting_is_one_line_naming_the_variable_and_exit_2(venv, tmp_path):
    path, db = _db(tmp_path, "bad.db")
    sim = venv.frontdesk("simulate", str(SCENARIO), "--db", db, FRONTDESK_WEATHER_UNITS="kelvin")
    assert sim.returncode == 2, sim.stdout + sim.stderr
    # The error is one line (the loader's own WARNING log may precede it).
    errors = [x for x in sim.stderr.strip().splitlines() if x.startswith("error:")]
    assert errors == [sim.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith("error: FRONTDESK_WEATHER_UNITS: ") and "imperial" in errors[0]
    assert not path.exists() or not _forecast_rows(path)  # no call was run

    doctor = venv.frontdesk("doctor", "--json", FRONTDESK_WEATHER_UNITS="kelvin")
    assert doctor.returncode != 0
    report = json.loads(doctor.stdout)
    assert not report["ok"]
    assert any(
        row["status"] == "error" and row["detail"].startswith("FRONTDESK_WEATHER_UNITS: ")
        for row in report["sections"]["plugins"]
    )
