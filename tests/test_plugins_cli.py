"""``frontdesk plugins list/install/uninstall`` in-process (pip itself is faked here; the real
pip runs in test_plugins_external)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from importlib.metadata import EntryPoint

import pytest
from typer.testing import CliRunner

from frontdesk.agents.programs import cli_plugins
from frontdesk.core import host


@pytest.fixture
def pip_calls(monkeypatch):
    calls: list[list[str]] = []

    def fake_call(command: list[str]) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(cli_plugins.subprocess, "call", fake_call)
    return calls


def run(*args: str):
    return CliRunner().invoke(cli_plugins.app, list(args))


def test_list_json_exits_0_with_a_plugin_that_fails_to_import(monkeypatch):
    eps = [EntryPoint(name="ghost", value="fd_not_installed_anywhere", group="frontdesk")]
    monkeypatch.setattr(host, "entry_points", lambda group: eps)
    monkeypatch.delenv("FRONTDESK_LOAD_PLUGINS", raising=False)
    monkeypatch.setenv("FRONTDESK_DISABLE_PLUGINS", "analytics")
    result = run("list", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    plugins = {p["name"]: p for p in data["plugins"]}
    assert plugins["ghost"]["status"] == "failed"
    assert "failed to import" in plugins["ghost"]["errors"][0]
    assert plugins["analytics"]["status"] == "skipped"
    assert plugins["search"]["source"] == "builtin" and plugins["search"]["tools"]
    assert data["conflicts"] == []


def test_list_table_shows_columns_and_errors(monkeypatch):
    eps = [EntryPoint(name="ghost", value="fd_nope", group="frontdesk")]
    monkeypatch.setattr(host, "entry_points", lambda group: eps)
    monkeypatch.delenv("FRONTDESK_LOAD_PLUGINS", raising=False)  # conftest sets it empty
    monkeypatch.setenv("COLUMNS", "300")
    result = run("list")
    assert result.exit_code == 0
    for word in ("name", "version", "source", "hooks", "tools per department", "errors"):
        assert word in result.stdout
    assert "failed to import: ModuleNotFoundError" in result.stdout, result.stdout
    assert "entry point" in result.stdout and "builtin" in result.stdout


def test_install_passes_options_through_to_pip_in_this_environment(pip_calls, tmp_path):
    result = run("install", str(tmp_path), "-U", "--no-deps", "--index-url", "http://x/simple")
    assert result.exit_code == 0, result.output
    assert pip_calls == [
        [sys.executable, "-m", "pip", "install", "--upgrade", "--no-deps", "--index-url",
         "http://x/simple", str(tmp_path.resolve())],
    ]  # fmt: skip
    run("install", "-e", str(tmp_path))
    assert pip_calls[1][-2:] == ["--editable", str(tmp_path.resolve())]


def test_pip_failure_is_one_line_and_exit_2(monkeypatch):
    monkeypatch.setattr(cli_plugins.subprocess, "call", lambda command: 1)
    result = run("install", "frontdesk-nothing")
    assert result.exit_code == 2
    assert result.stderr == "error: pip install failed with exit code 1 (see pip's output above)\n"


def test_uninstall_maps_the_plugin_name_to_its_package(monkeypatch, pip_calls):
    ep = types.SimpleNamespace(name="weather", dist=types.SimpleNamespace(name="frontdesk-weather"))
    monkeypatch.setattr(cli_plugins, "entry_points", lambda group: [ep])
    result = run("uninstall", "weather")
    assert result.exit_code == 0, result.output
    assert pip_calls == [[sys.executable, "-m", "pip", "uninstall", "--yes", "frontdesk-weather"]]


@pytest.mark.parametrize("name", ["billing", "frontdesk"])
def test_uninstall_refuses_builtins(name, pip_calls):
    result = run("uninstall", name)
    assert result.exit_code == 2 and "is built in" in result.stderr
    assert pip_calls == []


def test_uninstall_unknown_name_is_exit_2(pip_calls):
    result = run("uninstall", "frontdesk-never-installed")
    assert result.exit_code == 2
    assert "no installed plugin or package named 'frontdesk-never-installed'" in result.stderr
    assert pip_calls == []


def test_the_plugins_command_module_does_not_import_livekit():
    code = (
        "import sys\n"
        "import frontdesk.agents.programs.cli_plugins, frontdesk.core.host\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'livekit'], 'livekit imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("name", ["sqlalchemy", "typer", "livekit-agents"])
def test_uninstall_never_removes_a_package_that_is_not_a_plugin(name, pip_calls):
    result = run("uninstall", name)
    assert result.exit_code == 2 and pip_calls == []
