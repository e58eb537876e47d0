"""frontdesk-weather: a third-party frontdesk plugin that uses every plugin hook.

- ``register_departments``: a ``weather`` desk with an interruptible ``forecast`` tool;
- ``register_tools``: ``packing_tips`` joins the built-in ``search`` desk;
- ``register_commands``: ``frontdesk weather-check CITY``;
- ``on_task_event``: counts task events in memory and, when ``FRONTDESK_WEATHER_EVENTS_FILE``
  is set, appends each one to that file as a JSON line.

The forecasts are fake but deterministic (derived from the city's name), so tests and demos
never touch the network.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

from frontdesk.core import Department, ToolContext, hookimpl, tool

__version__ = "0.1.0"

CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "windy", "thunderstorms")
# Changing the seed changes every forecast; tests pin a few.
SEED = "weather-v1:"
# Long enough that a caller can interrupt it, short enough for tests.
LOOKUP_SECONDS = 0.2

# task status -> how many events this process saw (on_task_event)
events_seen: Counter[str] = Counter()


@dataclass(frozen=True)
class Forecast:
    city: str
    conditions: str
    high_c: int
    low_c: int

    @property
    def summary(self) -> str:
        return f"{self.city}: {self.conditions}, high {self.high_c}°C, low {self.low_c}°C"


def forecast_for(city: str) -> Forecast:
    """The same city always gets the same forecast (sha256, not hash(), which is salted)."""
    name = " ".join(city.split()).title() or "Nowhere"
    digest = hashlib.sha256((SEED + name.lower()).encode()).digest()
    high = 8 + digest[1] % 25
    return Forecast(name, CONDITIONS[digest[0] % len(CONDITIONS)], high, high - 4 - digest[2] % 8)


@tool(pattern="interruptible")
async def forecast(ctx: ToolContext, city: str) -> str:
    """Weather forecast for a city: conditions and the day's high and low in Celsius."""
    await ctx.progress(0.1, f"asking the weather service about {city}")
    # If the caller talks over us, this await is where the task is cancelled; nothing stale
    # is spoken because the interruptible pattern drops the result.
    await asyncio.sleep(LOOKUP_SECONDS / 2)
    await ctx.progress(0.6, "reading the forecast")
    await asyncio.sleep(LOOKUP_SECONDS / 2)
    return forecast_for(city).summary


@tool(pattern="interruptible")
async def packing_tips(ctx: ToolContext, city: str) -> str:
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
    description="forecasts for travel",
    instructions=(
        "You are the weather desk. Give short spoken forecasts for the cities the caller "
        "names, using the forecast tool; never guess the weather yourself. For anything else, "
        "transfer back to triage."
    ),
    tools=[forecast],
    keywords=["weather", "forecast", "rain", "temperature", "sunny"],
)


@hookimpl
def register_departments(register: Any) -> None:
    register(WEATHER)


@hookimpl
def register_tools(register: Any) -> None:
    # Travellers ask the search desk what to pack, so the tip tool lives there too.
    register(packing_tips, departments=["search"])


@hookimpl
def register_commands(cli: Any) -> None:
    import typer

    @cli.command("weather-check")
    def weather_check(
        city: str = typer.Argument(..., help="The city to look up."),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Print a city's forecast as the weather desk would give it, without a call."""
        f = forecast_for(city)
        if as_json:
            typer.echo(json.dumps({**f.__dict__, "summary": f.summary}))
        else:
            typer.echo(f.summary)


@hookimpl
def on_task_event(event: Any) -> None:
    # Runs in the background in a worker thread: a slow disk never delays the call.
    events_seen[event.status] += 1
    path = os.environ.get("FRONTDESK_WEATHER_EVENTS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event.to_json(), default=str) + "\n")
