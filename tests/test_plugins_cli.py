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

    def fake_pip(command: list[str], verbose: bool) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(cli_plugins, "_run_pip", fake_pip)
    return calls


@pytest.fixture
def adds(monkeypatch):
    """What the next install adds: plugin names, and the import problems of some."""
    state = {"names": set(), "added": [], "broken": {}}

    def names() -> set[str]:
        return set(state["names"])

    def fake_pip(command: list[str], verbose: bool) -> int:
        state["names"] |= set(state["added"])
        return 0

    monkeypatch.setattr(cli_plugins, "_plugin_names", names)
    monkeypatch.setattr(cli_plugins, "_run_pip", fake_pip)
    monkeypatch.setattr(
        cli_plugins,
        "_import_problems",
        lambda added: {n: state["broken"][n] for n in added if n in state["broken"]},
    )
    return state


def run(*args: str):
    return CliRunner().invoke(cli_plugins.app, list(args))


def test_list_json_exits_0_with_a_plugin_that_fails_to_import(monkeypatch):
    # The built-ins are entry points too: keep them, and add one that cannot be imported.
    eps = [
        ep for ep in host.entry_points(group="frontdesk") if ep.dist and ep.dist.name == "frontdesk"
    ]
    eps.append(EntryPoint(name="ghost", value="fd_not_installed_anywhere", group="frontdesk"))
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
    eps = [
        ep for ep in host.entry_points(group="frontdesk") if ep.dist and ep.dist.name == "frontdesk"
    ]
    eps.append(EntryPoint(name="ghost", value="fd_nope", group="frontdesk"))
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
    run("install", str(tmp_path), "-U", "--no-deps", "--index-url", "http://x/simple")
    for call in pip_calls:  # pip reports what it installed into a temporary file
        at = call.index("--report")
        assert call[at + 1].endswith("report.json")
        del call[at : at + 2]
    assert pip_calls == [
        [sys.executable, "-m", "pip", "install", "--upgrade", "--no-deps", "--index-url",
         "http://x/simple", str(tmp_path.resolve())],
    ]  # fmt: skip
    run("install", "-e", str(tmp_path))
    assert pip_calls[1][-2:] == ["--editable", str(tmp_path.resolve())]
    assert "--report" in pip_calls[1]


def test_install_reports_the_plugins_it_added(adds):
    adds["added"] = ["weather"]
    result = run("install", "frontdesk-weather")
    assert result.exit_code == 0, result.output
    assert result.stdout == "installed plugin(s): weather\n"


def test_install_of_a_package_that_adds_no_plugin_exits_1(adds):
    result = run("install", "requests")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "requests was installed, but it adds no frontdesk plugin: a plugin is declared as an "
        'entry point in the "frontdesk" group (see docs/plugins.md); `frontdesk plugins list` '
        "shows the plugins already installed"
    ]


def test_install_of_a_plugin_that_fails_to_import_says_so_and_exits_1(adds):
    adds["added"] = ["weather", "ghost"]
    adds["broken"] = {"ghost": "ModuleNotFoundError: No module named 'fd_ghost'"}
    result = run("install", "frontdesk-ghost")
    assert result.exit_code == 1
    assert result.stdout == "installed plugin(s): weather\n"
    assert result.stderr.splitlines() == [
        "plugin ghost was installed but fails to import: ModuleNotFoundError: No module named "
        "'fd_ghost'; fix or uninstall it (`frontdesk plugins uninstall ghost`)"
    ]
    assert "broken" not in result.output


def test_import_problems_imports_each_new_plugin_in_a_fresh_interpreter(tmp_path, monkeypatch):
    dist = tmp_path / "fd_ghost-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fd-ghost\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[frontdesk]\nghost = fd_ghost_missing\nfine = json\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    problems = cli_plugins._import_problems(["ghost", "fine"])
    assert problems == {"ghost": "ModuleNotFoundError: No module named 'fd_ghost_missing'"}


def test_pip_noise_is_hidden_unless_verbose(capfd):
    code = "print('Requirement already satisfied: x in /y'); print('Successfully installed z')"
    command = [sys.executable, "-c", code]
    assert cli_plugins._run_pip(command, verbose=False) == 0
    assert capfd.readouterr().out == "Successfully installed z\n"
    assert cli_plugins._run_pip(command, verbose=True) == 0
    assert "Requirement already satisfied" in capfd.readouterr().out


def test_pip_failure_is_one_line_and_exit_2(monkeypatch):
    monkeypatch.setattr(cli_plugins, "_run_pip", lambda command, verbose: 1)
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


def test_install_warns_when_the_new_plugin_takes_a_name_already_taken(monkeypatch):
    """The name clash is found at install, not only when `plugins list` shows it skipped."""

    def ep(name: str, dist: str) -> EntryPoint:
        return EntryPoint(name=name, value=f"{dist}_mod", group="frontdesk")._for(
            types.SimpleNamespace(name=dist)
        )

    installed = [
        ep("search", "frontdesk"),
        ep("search", "frontdesk-evil"),
        ep("orders", "frontdesk-evil"),
    ]
    installed += [ep("orders", "frontdesk-aaa-orders")]
    monkeypatch.setattr(cli_plugins, "entry_points", lambda group: installed)
    assert cli_plugins._name_clashes({"frontdesk-evil"}) == [
        "plugin name 'orders' is already taken by frontdesk-aaa-orders, so frontdesk-evil's "
        "'orders' will be skipped; rename its entry point (the [project.entry-points.frontdesk] key)",
        "plugin name 'search' is already taken by a built-in plugin, so frontdesk-evil's "
        "'search' will be skipped; rename its entry point (the [project.entry-points.frontdesk] key)",
    ]
    assert cli_plugins._name_clashes({"frontdesk-other"}) == []
