"""frontdesk-weather: a third-party frontdesk plugin, written only from docs/plugins.md.

It shows everything an outside package can ship:

- ``register_departments``: a ``weather`` desk the offline brain can drive: a plain description
  and keywords to route on, and one tool, ``forecast(city)``, whose parameter is described in
  its JSON schema (a description and ``examples``) so arguments can be filled from it alone;
- ``register_tools``: ``packing_tips`` joins the built-in ``search`` desk;
- ``register_settings``: ``WeatherSettings`` (``FRONTDESK_WEATHER_UNITS``, ``_SERVICE_URL``,
  ``_CACHE_MINUTES``, or the profile's ``[plugins.weather]`` table), handed to the tools as
  ``ctx.config``;
- ``register_migrations``: its own table, ``weather_lookups``, created by the ``weather``
  Alembic branch in ``migrations/`` and used through ``ctx.database`` (see ``lookups.py``);
- ``register_commands``: ``frontdesk weather-check CITY``;
- ``on_task_event``: counts task events in memory and, when ``FRONTDESK_WEATHER_EVENTS_FILE``
  is set, appends each one to that file as a JSON line.

Without a ``service_url`` the forecasts are fake but deterministic (derived from the city's
name), so tests and demos never touch the network.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

from frontdesk.core import Department, ToolContext, ToolError, hookimpl, plugin_config, tool
from frontdesk_weather import lookups

__version__ = "0.1.0"

CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "windy", "thunderstorms")
# Changing the seed changes every forecast; tests pin a few.
SEED = "weather-v1:"
# Long enough that a caller can interrupt it, short enough for tests.
LOOKUP_SECONDS = 0.2
SERVICE_TIMEOUT_SECONDS = 5.0
MIGRATIONS = Path(__file__).parent / "migrations"

# task status -> how many events this process saw (on_task_event)
events_seen: Counter[str] = Counter()


class WeatherSettings(BaseSettings):
    """The weather desk's settings. frontdesk fills them from ``FRONTDESK_WEATHER_*``, ``.env``
    and the profile's ``[plugins.weather]`` table, in that order of precedence (it sets the
    variables' prefix itself: no ``env_prefix`` here)."""

    units: Literal["metric", "imperial"] = "metric"
    # A forecast service: GET <service_url>?city=Lisbon answers
    # {"conditions": "sunny", "high_c": 21, "low_c": 14}. Unset: the built-in fake forecasts.
    service_url: str | None = None
    # A city asked about again within this many minutes is answered from weather_lookups.
    cache_minutes: int = Field(10, ge=0, le=1440)

    @field_validator("service_url")
    @classmethod
    def _http_or_unset(cls, value: str | None) -> str | None:
        value = (value or "").strip() or None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


@dataclass(frozen=True)
class Forecast:
    city: str
    conditions: str
    high_c: int
    low_c: int

    @property
    def summary(self) -> str:
        return self.summary_in("metric")

    def summary_in(self, units: str) -> str:
        if units == "imperial":
            high, low, unit = round(self.high_c * 9 / 5 + 32), round(self.low_c * 9 / 5 + 32), "F"
        else:
            high, low, unit = self.high_c, self.low_c, "C"
        return f"{self.city}: {self.conditions}, high {high}°{unit}, low {low}°{unit}"


def city_name(city: str) -> str:
    return " ".join(city.split()).title() or "Nowhere"


def forecast_for(city: str) -> Forecast:
    """The same city always gets the same forecast (sha256, not hash(), which is salted)."""
    name = city_name(city)
    digest = hashlib.sha256((SEED + name.lower()).encode()).digest()
    high = 8 + digest[1] % 25
    return Forecast(name, CONDITIONS[digest[0] % len(CONDITIONS)], high, high - 4 - digest[2] % 8)


async def _from_service(url: str, city: str) -> Forecast:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=SERVICE_TIMEOUT_SECONDS) as client:
            response = await client.get(url, params={"city": city})
        data = response.json() if response.status_code == 200 else None
        return Forecast(
            city_name(city), str(data["conditions"]), int(data["high_c"]), int(data["low_c"])
        )
    except (httpx.HTTPError, ValueError, TypeError, KeyError):
        raise ToolError("The weather service isn't answering right now.") from None


def _config(ctx: Any) -> WeatherSettings:
    # ctx.config is None only when the tool runs outside frontdesk (a bare test context).
    config = getattr(ctx, "config", None)
    return (
        config if isinstance(config, WeatherSettings) else plugin_config("weather", WeatherSettings)
    )


# What the brain (or an LLM) reads about the argument: its JSON schema has the description and
# the examples, so "what's the weather in Lisbon" can be filled as city="Lisbon".
City = Annotated[
    str,
    Field(
        description="The city the caller asks about, by name.",
        examples=["Lisbon", "New York", "Tokyo"],
        min_length=1,
        max_length=80,
    ),
]


@tool(pattern="interruptible")
async def forecast(ctx: ToolContext, city: City) -> str:
    """Weather forecast for a city: the conditions and the day's high and low."""
    config = _config(ctx)
    name = city_name(city)
    cached = await lookups.recent(
        ctx.database, city=name, units=config.units, max_age_seconds=config.cache_minutes * 60
    )
    if cached is not None:
        await ctx.progress(1.0, f"{name} was looked up a moment ago")
        return cached
    await ctx.progress(0.1, f"asking the weather service about {name}")
    # If the caller talks over us, this await is where the task is cancelled; nothing stale
    # is spoken because the interruptible pattern drops the result.
    if config.service_url:
        found = await _from_service(config.service_url, city)
    else:
        await asyncio.sleep(LOOKUP_SECONDS / 2)
        found = forecast_for(city)
    await ctx.progress(0.6, "reading the forecast")
    await asyncio.sleep(LOOKUP_SECONDS / 2)
    summary = found.summary_in(config.units)
    await lookups.record(
        ctx.database, caller=ctx.caller, city=name, units=config.units, summary=summary
    )
    return summary


@tool(pattern="interruptible")
async def packing_tips(ctx: ToolContext, city: City) -> str:
    """What to pack for a trip to a city, based on its weather forecast."""
    await ctx.progress(0.5, f"checking the weather in {city}")
    await asyncio.sleep(LOOKUP_SECONDS / 4)
    f = forecast_for(city)
    tips = ["comfortable shoes"]
    tips.append("a light jacket" if f.low_c < 12 else "sunglasses")
    if "rain" in f.conditions or "storm" in f.conditions:
        tips.append("an umbrella")
    if f.high_c >= 25:
        tips.append("sunscreen")
    return f"For {f.city} ({f.conditions}), pack {', '.join(tips)}."


WEATHER = Department(
    name="weather",
    description="weather forecasts for travel: the conditions, high and low for a city",
    instructions=(
        "You are the weather desk. Give short spoken forecasts for the cities the caller "
        "names, using the forecast tool; never guess the weather yourself. For anything else, "
        "transfer back to triage."
    ),
    tools=[forecast],
    keywords=["weather", "forecast", "rain", "temperature", "sunny", "umbrella", "snow"],
)


@hookimpl
def register_departments(register: Any) -> None:
    register(WEATHER)


@hookimpl
def register_tools(register: Any) -> None:
    # Travellers ask the search desk what to pack, so the tip tool lives there too.
    register(packing_tips, departments=["search"])


@hookimpl
def register_settings(register: Any) -> None:
    register(WeatherSettings)


@hookimpl
def register_migrations(register: Any) -> None:
    register(MIGRATIONS)


@hookimpl
def register_commands(cli: Any) -> None:
    import typer

    @cli.command("weather-check")
    def weather_check(
        city: str = typer.Argument(..., help="The city to look up."),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Print a city's forecast as the weather desk would give it, without a call."""
        try:  # the settings a tool gets as ctx.config, built the same way
            units = plugin_config("weather", WeatherSettings).units
        except ValueError as exc:  # one line naming the variable or profile key
            raise typer.BadParameter(str(exc)) from None
        f = forecast_for(city)
        if as_json:
            typer.echo(json.dumps({**f.__dict__, "units": units, "summary": f.summary_in(units)}))
        else:
            typer.echo(f.summary_in(units))


@hookimpl
def on_task_event(event: Any) -> None:
    # Runs in the background in a worker thread: a slow disk never delays the call.
    events_seen[event.status] += 1
    path = os.environ.get("FRONTDESK_WEATHER_EVENTS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event.to_json(), default=str) + "\n")
