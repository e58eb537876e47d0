"""The example plugin's own behaviour, in-process (loaded with ``extra=``, no install): its
tools, its table and migration, its settings, its command and observer. How it installs and
runs in a call is in test_plugins_external / test_plugins_weather_call."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import sqlalchemy as sa
import typer
from test_plugins_venv import WEATHER_SRC
from typer.testing import CliRunner

from frontdesk.core import ToolContext, ToolError, host
from frontdesk.core.errors import ConfigError
from frontdesk.core.profile import load_profile
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings

LISBON = "Lisbon: sunny, high 10°C, low 6°C"


@pytest.fixture(scope="module")
def weather():
    sys.path.insert(0, str(WEATHER_SRC))
    try:
        import frontdesk_weather

        yield frontdesk_weather
    finally:
        sys.path.remove(str(WEATHER_SRC))
        for name in [m for m in sys.modules if m.split(".")[0] == "frontdesk_weather"]:
            sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def _no_weather_env(monkeypatch):
    for name in ("UNITS", "SERVICE_URL", "CACHE_MINUTES", "EVENTS_FILE"):
        monkeypatch.delenv(f"FRONTDESK_WEATHER_{name}", raising=False)


def load(weather, **settings):
    return host.load(
        Settings(_env_file=None, load_plugins="", **settings), extra=[("weather", weather)]
    )


@pytest.fixture
async def store(weather, tmp_path):
    # open_store with the registry upgrades core and every loaded plugin's branch: weather's too.
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path}/w.db", load(weather))
    yield store
    await store.close()


async def make_ctx(store, weather, caller="wendy", **config):
    row = await store.create(
        caller=caller, tool="forecast", pattern="interruptible", status="running"
    )
    return ToolContext(
        caller=caller,
        session_id="s1",
        task_id=row.id,
        department="weather",
        idempotency_key=f"k{row.id}",
        store=store,
        config=weather.WeatherSettings(_env_file=None, **config),
    )


class FakeContext:
    def __init__(self) -> None:
        self.progress_notes: list[tuple[float, str]] = []

    async def progress(self, fraction: float, note: str = "") -> None:
        self.progress_notes.append((fraction, note))


def test_forecasts_are_deterministic_and_depend_on_the_city(weather):
    assert weather.forecast_for("lisbon") == weather.forecast_for("  Lisbon ")
    assert weather.forecast_for("Lisbon").summary == LISBON
    assert weather.forecast_for("Paris") != weather.forecast_for("Lisbon")
    for city in ("Oslo", "Lima", "Cairo", ""):
        f = weather.forecast_for(city)
        assert f.low_c < f.high_c and f.conditions in weather.CONDITIONS


# -- its table ------------------------------------------------------------------------------


async def test_its_migration_creates_its_table_on_its_own_branch(weather, store):
    async with store.read_engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
        version = (
            await conn.execute(sa.text("SELECT version_num FROM alembic_version_weather"))
        ).scalar()
    assert {"weather_lookups", "alembic_version_weather", "alembic_version"} <= tables
    assert version == "weather_0001"
    assert load(weather).migrations["weather"] == weather.MIGRATIONS


async def test_without_the_plugin_there_is_no_weather_table(tmp_path):
    store = await open_store(
        f"sqlite+aiosqlite:///{tmp_path}/plain.db",
        host.load(Settings(_env_file=None, load_plugins="")),
    )
    try:
        async with store.read_engine.connect() as conn:
            tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
    finally:
        await store.close()
    assert "weather_lookups" not in tables and "alembic_version_weather" not in tables


async def test_forecast_records_progress_and_writes_its_table(weather, store):
    ctx = await make_ctx(store, weather)
    assert await weather.forecast.fn(ctx, "lisbon") == LISBON
    row = await store.get(ctx.task_id)
    assert (row.progress, row.progress_note) == (pytest.approx(0.6), "reading the forecast")
    # Written with ctx.database.write, read back with ctx.database.read.
    assert await weather.lookups.for_caller(ctx.database, "wendy") == [LISBON]
    async with ctx.database.read() as conn:
        [stored] = (await conn.execute(sa.select(weather.lookups.weather_lookups))).mappings()
    assert (stored["caller"], stored["city"], stored["units"]) == ("wendy", "Lisbon", "metric")


async def test_a_repeat_lookup_is_answered_from_the_table(weather, store):
    first = await make_ctx(store, weather)
    await weather.forecast.fn(first, "Lisbon")
    again = await make_ctx(store, weather, caller="other")
    assert await weather.forecast.fn(again, "LISBON ") == LISBON
    row = await store.get(again.task_id)
    assert row.progress == 1.0 and "a moment ago" in row.progress_note
    assert await weather.lookups.for_caller(again.database, "other") == []  # no new row
    fresh = await make_ctx(store, weather, caller="other", cache_minutes=0)
    await weather.forecast.fn(fresh, "Lisbon")
    assert await weather.lookups.for_caller(fresh.database, "other") == [LISBON]


async def test_units_setting_changes_the_forecast(weather, store):
    ctx = await make_ctx(store, weather, units="imperial")
    assert await weather.forecast.fn(ctx, "Lisbon") == "Lisbon: sunny, high 50°F, low 43°F"
    # Cached per units: metric is looked up afresh, not answered in Fahrenheit.
    assert await weather.forecast.fn(await make_ctx(store, weather), "Lisbon") == LISBON


async def test_forecast_can_be_interrupted(weather, store):
    ctx = await make_ctx(store, weather)
    task = asyncio.ensure_future(weather.forecast.fn(ctx, "Lisbon"))
    await asyncio.sleep(weather.LOOKUP_SECONDS / 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await weather.lookups.for_caller(ctx.database, "wendy") == []  # nothing half-written


class _Service(BaseHTTPRequestHandler):
    body = b'{"conditions": "foggy", "high_c": 15, "low_c": 9}'
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/forecast"
    finally:
        server.shutdown()
        server.server_close()


async def test_forecast_from_the_configured_service(weather, store, service, monkeypatch):
    monkeypatch.setattr(weather, "LOOKUP_SECONDS", 0)
    ctx = await make_ctx(store, weather, service_url=service)
    assert await weather.forecast.fn(ctx, "porto") == "Porto: foggy, high 15°C, low 9°C"
    assert _Service.seen[-1] == "/forecast?city=porto"
    broken = await make_ctx(store, weather, service_url=service + "x", cache_minutes=0)
    monkeypatch.setattr(_Service, "body", b"not json")
    with pytest.raises(ToolError, match="weather service isn't answering"):
        await weather.forecast.fn(broken, "Faro")


async def test_packing_tips(weather):
    tips = await weather.packing_tips.fn(FakeContext(), "Lisbon")
    assert tips.startswith("For Lisbon (sunny), pack comfortable shoes, a light jacket")


# -- its settings ---------------------------------------------------------------------------


def test_settings_are_registered_and_handed_to_its_tools(weather):
    registry = load(weather)
    config = registry.configs["weather"]
    assert isinstance(config, weather.WeatherSettings)
    assert (config.units, config.service_url, config.cache_minutes) == ("metric", None, 10)


def test_settings_from_the_environment(weather, monkeypatch):
    monkeypatch.setenv("FRONTDESK_WEATHER_UNITS", "imperial")
    monkeypatch.setenv("FRONTDESK_WEATHER_CACHE_MINUTES", "0")
    registry = load(weather)
    assert registry.config_errors == []
    assert (registry.configs["weather"].units, registry.configs["weather"].cache_minutes) == (
        "imperial",
        0,
    )


def test_settings_from_the_profile_and_the_environment_beats_it(weather, tmp_path, monkeypatch):
    profile = tmp_path / "frontdesk.toml"
    profile.write_text(
        '[business]\nname = "Bayside Dental"\n\n'
        '[plugins.weather]\nunits = "imperial"\ncache_minutes = 3\n'
    )
    registry = host.load(
        Settings(_env_file=None, load_plugins=""),
        extra=[("weather", weather)],
        profile=load_profile(profile),
    )
    assert registry.config_errors == []
    assert (registry.configs["weather"].units, registry.configs["weather"].cache_minutes) == (
        "imperial",
        3,
    )
    monkeypatch.setenv("FRONTDESK_WEATHER_UNITS", "metric")
    again = host.load(
        Settings(_env_file=None, load_plugins=""),
        extra=[("weather", weather)],
        profile=load_profile(profile),
    )
    assert again.configs["weather"].units == "metric"


def test_a_bad_value_is_one_line_naming_the_variable(weather, monkeypatch):
    monkeypatch.setenv("FRONTDESK_WEATHER_UNITS", "kelvin")
    registry = load(weather)
    [line] = registry.config_errors
    assert line.startswith("FRONTDESK_WEATHER_UNITS: ") and "\n" not in line
    assert "metric" in line and "imperial" in line
    assert "weather" not in registry.configs
    with pytest.raises(ConfigError, match="^FRONTDESK_WEATHER_UNITS: "):
        registry.require_valid_config()


def test_a_bad_profile_value_names_the_file_and_key(weather, tmp_path):
    profile = tmp_path / "frontdesk.toml"
    profile.write_text('[plugins.weather]\nservice_url = "ftp://example.org"\n')
    registry = host.load(
        Settings(_env_file=None, load_plugins=""),
        extra=[("weather", weather)],
        profile=load_profile(profile),
    )
    [line] = registry.config_errors
    assert line.startswith(f"{profile}: plugins.weather.service_url: ") and "http" in line


# -- its department, as the offline brain sees it -------------------------------------------


def test_registers_a_department_and_joins_search(weather):
    registry = load(weather)
    assert registry.plugins["weather"].errors == []
    dept = registry.departments["weather"]
    assert dept.plugin == "weather" and "forecast" in dept.description
    assert {"weather", "forecast", "rain"} <= set(dept.keywords)
    assert [t.name for t in registry.tools_for("weather")][0] == "forecast"
    assert "packing_tips" in [t.name for t in registry.tools_for("search")]
    assert registry.tools["packing_tips"].plugin == "weather"


def test_the_city_argument_is_described_in_the_schema(weather):
    # All an argument filler gets: the type, a description and examples, and that it is required.
    schema = weather.forecast.json_schema()
    assert schema["required"] == ["city"]
    city = schema["properties"]["city"]
    assert city["type"] == "string" and city["description"]
    assert "Lisbon" in city["examples"] and city["maxLength"] <= 100
    assert weather.packing_tips.json_schema()["properties"]["city"] == city
    assert weather.forecast.pattern == "interruptible"


# -- its command and observer ---------------------------------------------------------------


def test_weather_check_command(weather, monkeypatch):
    app = typer.Typer()
    weather.register_commands(cli=app)

    @app.callback()
    def root() -> None:
        pass

    result = CliRunner().invoke(app, ["weather-check", "lisbon", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["conditions"] == "sunny"
    monkeypatch.setenv("FRONTDESK_WEATHER_UNITS", "imperial")
    result = CliRunner().invoke(app, ["weather-check", "lisbon"])
    assert result.output.strip() == "Lisbon: sunny, high 50°F, low 43°F"


def test_on_task_event_counts_and_appends_to_the_file(weather, tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv("FRONTDESK_WEATHER_EVENTS_FILE", str(path))
    event = types.SimpleNamespace(status="succeeded", to_json=lambda: {"status": "succeeded"})
    before = weather.events_seen["succeeded"]
    weather.on_task_event(event=event)
    assert weather.events_seen["succeeded"] == before + 1
    assert json.loads(path.read_text()) == {"status": "succeeded"}


# -- in a call ------------------------------------------------------------------------------


async def test_a_scripted_conversation_reaches_the_weather_desk(weather, tmp_path, monkeypatch):
    # The example from docs/plugins.md, "Testing a plugin": a real AgentSession, a ScriptedLLM.
    from livekit.agents import AgentSession

    from frontdesk.agents.runtime import start_call
    from frontdesk.agents.testing import ScriptedLLM

    monkeypatch.setenv("FRONTDESK_WEATHER_UNITS", "imperial")
    settings = Settings(
        _env_file=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/t.db", load_plugins=""
    )
    registry = host.load(settings, extra=[("weather", weather)])
    store = await open_store(settings.database_url, registry)
    llm = ScriptedLLM(
        [
            {"say": "Transferring you.", "tools": [{"transfer_to_weather": {}}]},
            {"tools": [{"forecast": {"city": "Lisbon"}}]},
            {"say": "Lisbon will be sunny."},
        ]
    )
    session = AgentSession(llm=llm)
    runtime = await start_call(
        session, store=store, registry=registry, settings=settings, caller="wendy"
    )
    try:
        await session.run(user_input="what's the weather in Lisbon")
        [task] = await store.list(caller="wendy", tool="forecast")
        assert (task.status, task.plugin, task.department) == ("succeeded", "weather", "weather")
        # ctx.config (imperial, from the environment) and ctx.database reached the tool.
        assert task.result == "Lisbon: sunny, high 50°F, low 43°F"
        async with store.read_engine.connect() as conn:
            rows = (await conn.execute(sa.text("SELECT caller, units FROM weather_lookups"))).all()
        assert [tuple(r) for r in rows] == [("wendy", "imperial")]
    finally:
        await runtime.shutdown()
        await session.aclose()
        await store.close()


async def test_a_scenario_runs_in_process(weather, tmp_path):
    # The other example from docs/plugins.md: the simulator's engine, without a subprocess.
    from frontdesk.agents.programs.scenario import parse_scenario
    from frontdesk.agents.programs.simulate import simulate

    scenario = parse_scenario(
        {
            "caller": "wendy",
            "steps": [
                {
                    "user": "what's the weather in Lisbon",
                    "llm": [
                        {"say": "Transferring you.", "tools": [{"transfer_to_weather": {}}]},
                        {"tools": [{"forecast": {"city": "Lisbon"}}]},
                        {"say": "Lisbon will be sunny."},
                    ],
                },
                {"expect": {"agent": "weather"}},
                {"expect": {"task": "forecast", "status": "succeeded"}},
            ],
        }
    )
    settings = Settings(
        _env_file=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/s.db", load_plugins=""
    )
    registry = host.load(settings, extra=[("weather", weather)])
    events: list[dict] = []
    assert await simulate([scenario], settings, registry, events.append) == []
    assert {"type": "handoff", "from": "triage", "to": "weather"}.items() <= next(
        e for e in events if e["type"] == "handoff"
    ).items()


def test_the_examples_own_tests_pass():
    # The example ships its own suite, written only with frontdesk.core and frontdesk.testing,
    # as a plugin author's would be (pytest set up in its pyproject.toml).
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTDESK_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=WEATHER_SRC,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "PYTHONPATH": str(WEATHER_SRC)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "6 passed" in done.stdout
