"""The real third-party plugin, examples/frontdesk-weather, pip-installed and driven through
the ``frontdesk`` CLI in subprocesses, next to a package that raises at import."""

from __future__ import annotations

import json

import pytest
from test_plugins_venv import WEATHER_SRC, PluginVenv, broken_package, copy_package

BUILTINS_OFF = "tasks,search,billing,reports,analytics"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("plugins")
    env = PluginVenv(base / "venv")
    try:
        # Reinstalled from this copy later; building never touches the repository.
        env.weather_copy = copy_package(WEATHER_SRC, base / "weather")
        for source in (env.weather_copy, broken_package(base / "broken")):
            result = env.install(source)
            assert result.returncode == 0, result.stdout + result.stderr
        yield env
    finally:
        # Always leave nothing installed, even if a test failed half-way.
        env.uninstall_quietly("frontdesk-weather", "frontdesk-broken")


def plugins_json(venv: PluginVenv, **env: str) -> dict:
    result = venv.frontdesk("plugins", "list", "--json", **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def by_name(data: dict) -> dict[str, dict]:
    return {p["name"]: p for p in data["plugins"]}


def test_install_reports_the_new_plugin(venv):
    # The fixture installed both packages through `frontdesk plugins install`; reinstalling
    # says there is nothing new rather than failing.
    result = venv.install(venv.weather_copy)
    assert result.returncode == 0
    assert "it added no new frontdesk plugin" in result.stdout


def test_plugins_list_finds_the_weather_plugin(venv):
    weather = by_name(plugins_json(venv))["weather"]
    assert weather["source"] == "entry point"
    assert weather["version"] == "0.1.0" and weather["distribution"] == "frontdesk-weather"
    assert weather["status"] == "loaded" and weather["errors"] == []
    assert weather["departments"] == ["weather"]
    assert weather["tools"] == {"weather": ["forecast"], "search": ["packing_tips"]}
    assert weather["hooks"] == [
        "on_task_event",
        "register_commands",
        "register_departments",
        "register_migrations",
        "register_settings",
        "register_tools",
    ]
    assert weather["commands"] == ["weather-check"]


def test_plugin_that_raises_at_import_is_listed_with_its_error(venv):
    plugins = by_name(plugins_json(venv))
    broken = plugins["broken"]
    assert broken["status"] == "failed" and broken["source"] == "entry point"
    assert "the broken plugin fails at import" in broken["errors"][0]
    assert plugins["weather"]["status"] == "loaded"
    assert plugins["billing"]["source"] == "builtin"


def test_plugins_list_table_exits_0_and_shows_errors(venv):
    result = venv.frontdesk("plugins", "list", COLUMNS="200")
    assert result.returncode == 0, result.stderr
    assert "weather" in result.stdout and "entry point" in result.stdout
    assert "the broken plugin fails at import" in result.stdout


def test_allow_and_deny_lists_apply_to_installed_plugins(venv):
    assert set(by_name(plugins_json(venv, FRONTDESK_LOAD_PLUGINS="weather"))["broken"]) >= {
        "skipped"
    }
    only = by_name(plugins_json(venv, FRONTDESK_LOAD_PLUGINS="weather"))
    assert only["broken"]["status"] == "skipped" and only["weather"]["status"] == "loaded"
    denied = by_name(plugins_json(venv, FRONTDESK_DISABLE_PLUGINS="weather"))
    assert denied["weather"]["status"] == "skipped" and denied["weather"]["tools"] == {}


def test_plugin_command_runs(venv):
    result = venv.frontdesk("weather-check", "Lisbon", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"] == "Lisbon: sunny, high 10°C, low 6°C"
    help_ = venv.frontdesk("--help")
    assert "weather-check" in help_.stdout


def test_listing_plugins_does_not_import_livekit(venv):
    # Built-ins are off here so this checks our code and the weather plugin, not theirs.
    # (-X importtime misses modules loaded by importlib.import_module, so ask sys.modules.)
    code = (
        "import atexit, sys\n"
        "def report():\n"
        "    loaded = sorted({m.split('.')[0] for m in sys.modules})\n"
        "    print('MODULES', ' '.join(loaded), file=sys.stderr)\n"
        "atexit.register(report)\n"
        "from frontdesk.agents.programs.cli import main\n"
        "main()\n"
    )
    result = venv.python_run(
        "-c", code, "plugins", "list", "--json", FRONTDESK_DISABLE_PLUGINS=BUILTINS_OFF
    )
    assert result.returncode == 0, result.stderr
    modules = result.stderr.split("MODULES", 1)[1].split()
    assert "frontdesk_weather" in modules
    assert "livekit" not in modules


def test_install_failure_is_one_clear_line_and_exit_2(venv, tmp_path):
    result = venv.frontdesk("plugins", "install", str(tmp_path), "--no-index")  # not a project
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: pip install failed with exit code 1 (see pip's output above)"
    )


def test_uninstall_removes_the_plugin(venv):
    # Last in this module: the plugin name is mapped to its package, frontdesk-weather.
    result = venv.frontdesk("plugins", "uninstall", "weather")
    assert result.returncode == 0, result.stderr
    assert "uninstalled frontdesk-weather" in result.stdout
    plugins = by_name(plugins_json(venv))
    assert "weather" not in plugins and "broken" in plugins
    again = venv.frontdesk("plugins", "uninstall", "weather")
    assert (
        again.returncode == 2 and "no installed plugin or package named 'weather'" in again.stderr
    )
