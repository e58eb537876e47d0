"""A plugin author's path, for real, in one throwaway virtualenv (test_plugins_venv.py):

- every console block of docs/plugins.md runs, in page order: ``frontdesk plugins new
  reservations`` writes a package that, right after ``pip install -e``, passes its own tests
  (frontdesk.testing) and runs its scenario with ``frontdesk simulate``; installing, listing,
  simulating and uninstalling the example plugin;
- docs/plugins.md's Packaging snippet, built into a wheel and installed, ships its migrations:
  ``frontdesk db upgrade`` creates the plugin's table;
- frontdesk's own (non-editable) wheel ships ``frontdesk.testing`` and the scaffold's template.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import docs_blocks
import pytest
from test_plugins_venv import OFFLINE, ROOT, PluginVenv, copy_package


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    env = PluginVenv(tmp_path_factory.mktemp("authoring") / "venv")
    try:
        yield env
    finally:
        env.uninstall_quietly("frontdesk-reservations", "frontdesk-weather")


def pip(venv: PluginVenv, *args: str) -> subprocess.CompletedProcess[str]:
    done = venv.python_run("-m", "pip", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def console(venv: PluginVenv, cwd: Path, command: docs_blocks.Command) -> Path:
    """Run one ``$`` line of a docs console block as an author would, offline; the next cwd."""
    argv = command.argv
    if argv[0] == "cd":
        return cwd / argv[1]
    if argv[0] == "frontdesk":
        extra = list(OFFLINE) if argv[1:3] == ["plugins", "install"] else []
        full = [str(venv.frontdesk_script), *argv[1:], *extra]
    elif argv[0] == "pip":
        full = [str(venv.python), "-m", "pip", *argv[1:], *OFFLINE]
    elif argv[0] == "pytest":
        full = [str(venv.python), "-m", "pytest", "-p", "no:cacheprovider", *argv[1:]]
    else:
        raise AssertionError(f"docs/plugins.md runs {argv[0]!r}, which this test cannot")
    done = subprocess.run(
        full, cwd=cwd, capture_output=True, text=True, timeout=300, env=venv.env()
    )
    shown = f"$ {command.line}\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
    assert done.returncode == 0, shown
    for line in command.expect:
        assert line in done.stdout, shown
    return cwd


def test_every_console_block_of_the_docs_runs(venv, tmp_path):
    """From the template to uninstalling, in page order: `plugins new` writes a package that
    passes its own tests after `pip install -e` and runs its scenario with `simulate`."""
    found = [b for b in docs_blocks.blocks() if b.lang == "console"]
    assert [b.section for b in found] == [
        "Start from the template",
        "Discovery, installing and listing",
        "Testing a plugin",
        "Uninstalling",
    ]
    for n, block in enumerate(found):
        cwd = tmp_path / f"block{n}"  # like the repository's root: the examples are there
        copy_package(docs_blocks.WEATHER, cwd / "examples" / "frontdesk-weather")
        (cwd / "examples" / "calls").mkdir()
        shutil.copy(ROOT / "examples" / "calls" / "weather.yaml", cwd / "examples" / "calls")
        for command in docs_blocks.commands(block):
            cwd = console(venv, cwd, command)
        if block.section == "Start from the template":
            package = cwd
            # The new package's code imports nothing from frontdesk but the public modules.
            for path in package.rglob("*.py"):
                for line in path.read_text().splitlines():
                    words = line.split()
                    if words[:1] in (["import"], ["from"]) and words[1].startswith("frontdesk."):
                        assert words[1] in ("frontdesk.core", "frontdesk.testing"), line
            # It is lint-clean with its own settings (the ruff frontdesk uses, strict rules).
            for args in (["check", "--select", "E,F,I,UP,B", "."], ["format", "--check", "."]):
                lint = subprocess.run(
                    [sys.executable, "-m", "ruff", *args],
                    cwd=package,
                    capture_output=True,
                    text=True,
                )
                assert lint.returncode == 0, lint.stdout + lint.stderr
            again = venv.frontdesk("plugins", "new", "reservations", "--dir", str(package.parent))
            assert again.returncode == 2 and "already exists" in again.stderr
            listed = json.loads(venv.frontdesk("plugins", "list", "--json").stdout)
            [row] = [p for p in listed["plugins"] if p["name"] == "reservations"]
            assert row["status"] == "loaded" and row["errors"] == [], row
            doctor = json.loads(venv.frontdesk("doctor", "--json").stdout)
            wanted = {"item": "reservations", "status": "ok", "detail": "books parties of up to 8"}
            assert wanted in doctor["sections"]["plugins"]
    listed = json.loads(venv.frontdesk("plugins", "list", "--json").stdout)
    assert not {"weather", "reservations"} & {p["name"] for p in listed["plugins"]}


def test_the_packaging_snippet_of_the_docs_ships_its_migrations(venv, tmp_path):
    package = docs_blocks.packaging_project(tmp_path / "weather-from-the-docs")
    wheels = tmp_path / "wheels"
    pip(venv, "wheel", str(package), "-w", str(wheels), *OFFLINE)
    [wheel] = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert any(n.startswith("frontdesk_weather/migrations/") and n.endswith(".py") for n in names)
    pip(venv, "install", str(wheel), *OFFLINE)
    path = tmp_path / "d.db"
    up = venv.frontdesk("db", "upgrade", "--db", f"sqlite+aiosqlite:///{path}")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "weather: upgraded to head" in up.stdout
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"weather_lookups", "alembic_version_weather"} <= tables
    listed = json.loads(venv.frontdesk("plugins", "list", "--json").stdout)
    [row] = [p for p in listed["plugins"] if p["name"] == "weather"]
    assert row["status"] == "loaded" and row["errors"] == [], row
    venv.uninstall_quietly("frontdesk-weather")


def test_frontdesks_own_wheel_ships_the_testing_module_and_the_template(venv, tmp_path):
    source = tmp_path / "frontdesk"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "node_modules", "build", "*.egg-info", "__pycache__", "tests",
            "bench", "docs", "examples", "*.db", ".ruff_cache", ".pytest_cache", ".hypothesis",
        ),
    )  # fmt: skip
    wheels = tmp_path / "wheels"
    pip(venv, "wheel", str(source), "-w", str(wheels), *OFFLINE)
    [wheel] = wheels.glob("frontdesk-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {"frontdesk/testing/__init__.py", "frontdesk/testing/desk.py"} <= names
    assert "frontdesk/agents/programs/plugin_template/pyproject.toml.tmpl" in names
    assert any(
        n.endswith("plugin_template/{{module}}/migrations/{{name}}_0001_bookings.py.tmpl")
        for n in names
    )
    # Not twice: only under its public name.
    assert not any(n.startswith("frontdesk/agents/programs/testing/") for n in names)
