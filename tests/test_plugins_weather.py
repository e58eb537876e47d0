"""The example plugin's own behaviour, in-process (no install): its tools, command and
observer. How it installs and runs in a call is in test_plugins_external / _weather_call."""

from __future__ import annotations

import asyncio
import json
import sys
import types

import pytest
import typer
from test_plugins_venv import WEATHER_SRC
from typer.testing import CliRunner

from frontdesk.core import host
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings


@pytest.fixture(scope="module")
def weather():
    sys.path.insert(0, str(WEATHER_SRC))
    try:
        import frontdesk_weather

        yield frontdesk_weather
    finally:
        sys.path.remove(str(WEATHER_SRC))
        sys.modules.pop("frontdesk_weather", None)


class FakeContext:
    def __init__(self) -> None:
        self.progress_notes: list[tuple[float, str]] = []

    async def progress(self, fraction: float, note: str = "") -> None:
        self.progress_notes.append((fraction, note))


def test_forecasts_are_deterministic_and_depend_on_the_city(weather):
    assert weather.forecast_for("lisbon") == weather.forecast_for("  Lisbon ")
    assert weather.forecast_for("Lisbon").summary == "Lisbon: sunny, high 10°C, low 6°C"
    assert weather.forecast_for("Paris") != weather.forecast_for("Lisbon")
    for city in ("Oslo", "Lima", "Cairo", ""):
        f = weather.forecast_for(city)
        assert f.low_c < f.high_c and f.conditions in weather.CONDITIONS


async def test_forecast_reports_progress_and_returns_the_summary(weather):
    ctx = FakeContext()
    assert await weather.forecast.fn(ctx, "Lisbon") == "Lisbon: sunny, high 10°C, low 6°C"
    assert [f for f, _ in ctx.progress_notes] == [0.1, 0.6]
    assert weather.forecast.pattern == "interruptible"


async def test_forecast_can_be_interrupted(weather):
    task = asyncio.ensure_future(weather.forecast.fn(FakeContext(), "Lisbon"))
    await asyncio.sleep(weather.LOOKUP_SECONDS / 4)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_packing_tips(weather):
    tips = await weather.packing_tips.fn(FakeContext(), "Lisbon")
    assert tips.startswith("For Lisbon (sunny), pack comfortable shoes, a light jacket")


def test_registers_a_department_and_joins_search(weather):
    registry = host.load(Settings(_env_file=None, load_plugins=""), extra=[("weather", weather)])
    assert registry.plugins["weather"].errors == []
    dept = registry.departments["weather"]
    assert dept.description == "forecasts for travel" and dept.plugin == "weather"
    assert [t.name for t in registry.tools_for("weather")][0] == "forecast"
    assert "packing_tips" in [t.name for t in registry.tools_for("search")]
    assert registry.tools["packing_tips"].plugin == "weather"


def test_weather_check_command(weather):
    app = typer.Typer()
    weather.register_commands(cli=app)

    @app.callback()
    def root() -> None:
        pass

    result = CliRunner().invoke(app, ["weather-check", "lisbon", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["conditions"] == "sunny"


def test_on_task_event_counts_and_appends_to_the_file(weather, tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv("FRONTDESK_WEATHER_EVENTS_FILE", str(path))
    event = types.SimpleNamespace(status="succeeded", to_json=lambda: {"status": "succeeded"})
    before = weather.events_seen["succeeded"]
    weather.on_task_event(event=event)
    assert weather.events_seen["succeeded"] == before + 1
    assert json.loads(path.read_text()) == {"status": "succeeded"}


async def test_a_scripted_conversation_reaches_the_weather_desk(weather, tmp_path):
    # The example from docs/plugins.md, "Testing a plugin": a real AgentSession, a ScriptedLLM.
    from livekit.agents import AgentSession

    from frontdesk.agents.runtime import start_call
    from frontdesk.agents.testing import ScriptedLLM

    settings = Settings(
        _env_file=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/t.db", load_plugins=""
    )
    registry = host.load(settings, extra=[("weather", weather)])
    store = await open_store(settings.database_url)
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
        assert task.result == "Lisbon: sunny, high 10°C, low 6°C"
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
