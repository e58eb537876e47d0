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
        result = env.install(env.weather_copy)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip().splitlines()[-1] == "installed plugin(s): weather"
        # Installed, but it raises at import: said plainly, and exit 1.
        env.broken_install = env.install(broken_package(base / "broken"))
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
    # names the plugin the package provides, and pip's "already satisfied" lines are hidden.
    result = venv.install(venv.weather_copy)
    assert result.returncode == 0, result.stderr
    assert "installed plugin(s): weather" in result.stdout
    assert "Requirement already satisfied" not in result.stdout


def test_install_of_a_plugin_that_fails_to_import_says_why_and_exits_1(venv):
    result = venv.broken_install
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1] == (
        "plugin broken was installed but fails to import: RuntimeError: the broken plugin fails "
        "at import; fix or uninstall it (`frontdesk plugins uninstall broken`)"
    )
    assert "installed plugin(s)" not in result.stdout


def test_install_of_a_package_with_no_plugin_exits_1(venv, tmp_path):
    project = tmp_path / "not_a_plugin"
    (project / "not_a_plugin").mkdir(parents=True)
    (project / "not_a_plugin" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "not-a-plugin"\nversion = "0.1"\n'
    )
    result = venv.frontdesk(
        "plugins", "install", str(project), "--no-build-isolation", "--no-index"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "adds no frontdesk plugin" in result.stderr


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
    only = by_name(plugins_json(venv, FRONTDESK_LOAD_PLUGINS="weather"))
    assert only["broken"]["status"] == "skipped" and only["weather"]["status"] == "loaded"
    assert only["broken"]["skipped"] and "FRONTDESK_LOAD_PLUGINS" in only["broken"]["skipped"]
    assert only["broken"]["tools"] == {} and only["weather"]["skipped"] in (None, "")
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


def test_uninstall_removes_the_plugin_and_says_which_tables_stay(venv, tmp_path):
    # Last in this module: the plugin name is mapped to its package, frontdesk-weather.
    db = f"sqlite+aiosqlite:///{tmp_path / 'u.db'}"
    assert venv.frontdesk("db", "upgrade", "--db", db).returncode == 0
    result = venv.frontdesk("plugins", "uninstall", "weather", "--db", db)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert "uninstalled frontdesk-weather" in lines
    assert (
        f"weather's tables stay in {db}: weather_lookups, alembic_version_weather (branch "
        "weather at weather_0001). To drop them, reinstall it and run `frontdesk db downgrade "
        "base --branch weather`"
    ) in lines[-1]
    current = venv.frontdesk("db", "current", "--db", db)
    assert "weather: weather_0001 (orphaned: no installed plugin has this branch" in current.stdout
    plugins = by_name(plugins_json(venv))
    assert "weather" not in plugins and "broken" in plugins
    again = venv.frontdesk("plugins", "uninstall", "weather")
    assert (
        again.returncode == 2 and "no installed plugin or package named 'weather'" in again.stderr
    )
