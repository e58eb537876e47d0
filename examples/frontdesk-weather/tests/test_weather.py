"""The weather plugin's own tests: from frontdesk, only frontdesk.core and frontdesk.testing."""

from pathlib import Path

import frontdesk_weather
import pytest
import sqlalchemy as sa

from frontdesk.core import ToolError
from frontdesk.testing import Frontdesk

SCENARIO = Path(__file__).resolve().parents[2] / "calls" / "weather.yaml"


async def test_it_loads_cleanly_with_a_desk_and_a_tool_at_search(desk):
    assert desk.errors == []
    assert desk.plugins["weather"]["status"] == "loaded"
    assert desk.tools("weather")[0] == "forecast"
    assert "packing_tips" in desk.tools("search")


async def test_a_forecast_is_saved_and_a_repeat_comes_from_the_table(desk):
    first = await desk.call("forecast", {"city": "lisbon"}, caller="wendy")
    assert first == "Lisbon: sunny, high 10°C, low 6°C"
    assert await desk.call("forecast", {"city": "Lisbon"}, caller="wendy") == first
    async with desk.database.read() as conn:
        rows = (await conn.execute(sa.text("SELECT caller, city FROM weather_lookups"))).all()
    assert [tuple(r) for r in rows] == [("wendy", "Lisbon")]  # the repeat was not looked up


async def test_units_come_from_the_profile_and_the_environment_wins(monkeypatch):
    profile = {"plugins": {"weather": {"units": "imperial"}}}
    async with Frontdesk(plugins={"weather": frontdesk_weather}, profile=profile) as desk:
        assert (
            await desk.call("forecast", {"city": "Lisbon"}) == "Lisbon: sunny, high 50°F, low 43°F"
        )
    monkeypatch.setenv("FRONTDESK_WEATHER_UNITS", "metric")
    async with Frontdesk(plugins={"weather": frontdesk_weather}, profile=profile) as desk:
        assert desk.config("weather").units == "metric"


async def test_a_bad_setting_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv("FRONTDESK_WEATHER_SERVICE_URL", "ftp://nope")
    async with Frontdesk(plugins={"weather": frontdesk_weather}) as desk:
        assert desk.errors == [
            "weather: settings: FRONTDESK_WEATHER_SERVICE_URL: "
            "Value error, must be an http:// or https:// URL"
        ]


async def test_a_city_is_asked_for_when_it_is_missing(desk):
    with pytest.raises(ToolError, match="I need to know the city the caller asks about"):
        await desk.call("forecast", {})


async def test_a_call_reaches_the_weather_desk(desk):
    run = await desk.simulate(SCENARIO)
    assert run.failures == []
    assert "Lisbon will be sunny." in run.said
    [task] = await desk.tasks(tool="forecast")
    assert (task.status, task.plugin, task.department) == ("succeeded", "weather", "weather")
