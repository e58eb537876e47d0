"""The offline brain knows no plugin: it routes, fills arguments, asks and confirms from what
a department and its tools' schemas say, here for desks this file defines itself.

The decision tests feed ``decide`` a history and the schemas exactly as a session offers them
(``function_tool_for`` and the generated transfer tools); the call tests drive real text
AgentSessions through ``simulate`` with no scripted replies, so every word and tool call is
the brain's, and assert the task rows it left.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from livekit.agents import llm
from pydantic import Field

from frontdesk.agents.brain import APOLOGY, OfflineBrain, critical_tools, decide, tool_schema
from frontdesk.agents.handoff import _transfer_tool
from frontdesk.agents.patterns import function_tool_for
from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.core import Department, ToolContext, ToolError, hookimpl, host, tool

BUILT_INS = "billing,reports,search,tasks,analytics"
wiped: list[str] = []


# -- a garage desk and a bakery desk, as a third party would write them ---------------------


@tool(pattern="interruptible")
async def book_service(
    ctx: ToolContext,
    service: Literal["oil change", "tyre rotation", "inspection"],
    plate: Annotated[str, Field(pattern=r"^[A-Z]{2}-\d{3}$", description="the car's plate")],
    hours: Annotated[float, Field(description="how many hours the car can stay", ge=0.5, le=8)],
    loaner: bool = False,
) -> str:
    """Book a service for the caller's car at the garage."""
    extra = " with a loaner car" if loaner else ""
    return f"Booked: {service} for {plate}, {hours:g} hours{extra}."


@tool(pattern="interruptible")
async def find_branch(
    ctx: ToolContext,
    town: Annotated[str, Field(description="the town", examples=["Lisbon", "Porto"])],
) -> str:
    """Find the nearest branch of the garage in a town."""
    return f"Our {town} branch is on the main square."


@tool(pattern="interruptible")
async def track_part(
    ctx: ToolContext, order_id: Annotated[str, Field(examples=["ORD-1001", "ORD-2040"])]
) -> str:
    """Track a spare part the caller ordered."""
    return f"Order {order_id} arrives tomorrow."


@tool(pattern="critical")
async def cancel_booking(
    ctx: ToolContext,
    booking: Annotated[str, Field(pattern=r"^BK-\d+$", description="the booking reference")],
    confirmed: bool = False,
) -> str:
    """Cancel one of the caller's garage bookings. First call with confirmed=false to read
    back what would be cancelled; call again with confirmed=true after the caller says yes."""
    if not confirmed:
        return f"You're about to cancel booking {booking}. Shall I go ahead?"
    return f"Booking {booking} is cancelled."


@tool(pattern="critical")
async def wipe_history(
    ctx: ToolContext, plate: Annotated[str, Field(pattern=r"^[A-Z]{2}-\d{3}$")]
) -> str:
    """Erase the caller's service history for a car."""
    wiped.append(plate)
    return f"The history of {plate} is erased."


@tool(pattern="interruptible")
async def diagnose(ctx: ToolContext) -> dict[str, Any]:
    """Run the garage's diagnosis of the caller's car."""
    return {"error": "KeyError: 'obd_port' in /srv/garage/diag.py"}


@tool(pattern="interruptible")
async def quote(ctx: ToolContext) -> str:
    """Give the caller a price quote for repairs."""
    raise ToolError("The quote service is closed on Sundays.")


@tool(pattern="interruptible")
async def order_cake(
    ctx: ToolContext,
    flavour: Literal["chocolate", "lemon", "carrot"],
    servings: Annotated[int, Field(description="how many people", ge=1, le=50)],
    note: str = "",
) -> str:
    """Order a cake from the bakery."""
    return f"A {flavour} cake for {servings} is ordered."


class Desks:
    @hookimpl
    def register_departments(self, register: Any) -> None:
        register(
            Department(
                name="garage",
                description="services cars: bookings, spare parts and branch locations",
                instructions="You are the garage desk.",
                tools=[
                    book_service,
                    find_branch,
                    track_part,
                    cancel_booking,
                    wipe_history,
                    diagnose,
                    quote,
                ],
                keywords=["car", "mechanic", "oil", "tyre", "garage"],
            )
        )
        register(
            Department(
                name="bakery",
                description="bakes bread and cakes to order",
                instructions="You are the bakery.",
                tools=[order_cake],
                keywords=["cake", "bread", "birthday"],
            )
        )


GARAGE = [book_service, find_branch, track_part, cancel_booking, wipe_history, diagnose, quote]
CRITICAL = {"cancel_booking", "wipe_history"}


def schemas(*specs: Any, desks: tuple[tuple[str, str, list[str]], ...] = ()) -> list[dict]:
    """What the session offers the LLM: the desk's tools and the transfer tools."""
    tools = [function_tool_for(s, None, "garage") for s in specs]  # type: ignore[arg-type]
    tools += [_transfer_tool(None, *d) for d in desks]  # type: ignore[arg-type]
    return [tool_schema(t) for t in tools]


DESKS = (
    ("garage", "services cars: bookings, spare parts and branch locations", ["car", "oil", "tyre"]),
    ("bakery", "bakes bread and cakes to order", ["cake", "bread", "birthday"]),
)


def history(*turns: Any) -> llm.ChatContext:
    """user/assistant strings alternate, starting with the user; a tuple is a tool call
    (name, arguments, output[, is_error]), whose output is then said before the user speaks."""
    ctx = llm.ChatContext()
    role = "user"
    for n, turn in enumerate(turns):
        if n and isinstance(turns[n - 1], tuple) and not isinstance(turn, tuple):
            ctx.add_message(role="assistant", content=turns[n - 1][2])  # the read-back
            role = "user"
        if isinstance(turn, tuple):
            name, args, output, *error = turn
            ctx.items.append(
                llm.FunctionCall(call_id=f"c{n}", name=name, arguments=json.dumps(args))
            )
            ctx.items.append(
                llm.FunctionCallOutput(
                    call_id=f"c{n}", name=name, output=output, is_error=bool(error and error[0])
                )
            )
            role = "assistant"
            continue
        ctx.add_message(role=role, content=turn)
        role = "assistant" if role == "user" else "user"
    return ctx


def said_to(*turns: Any, specs: Any = GARAGE, desks: Any = ()) -> tuple[str | None, list]:
    return decide(history(*turns), schemas(*specs, desks=desks), CRITICAL)


# -- routing --------------------------------------------------------------------------------


def test_routes_by_desk_topics_and_description():
    triage = dict(specs=(), desks=DESKS)
    assert said_to("my car makes a noise", **triage)[1] == [("transfer_to_garage", {})]
    assert said_to("I'd like a birthday cake", **triage)[1] == [("transfer_to_bakery", {})]
    # the description alone: "bread" is only in the bakery's description and topics
    assert said_to("do you sell bread?", **triage)[1] == [("transfer_to_bakery", {})]
    text, calls = said_to("blorp zzz", **triage)
    assert calls == [] and text.startswith("Sorry, I didn't understand that.")
    assert "bakery" in text and "garage" in text


def test_the_desks_own_tool_beats_a_transfer_and_other_desks_are_reached():
    at_garage = dict(desks=DESKS[1:])
    assert said_to("where is your branch in Porto", **at_garage)[1] == [
        ("find_branch", {"town": "Porto"})
    ]
    assert said_to("I want a lemon cake for 6 people", **at_garage)[1] == [
        ("transfer_to_bakery", {})
    ]


@tool(pattern="interruptible")
async def forecast(
    ctx: ToolContext,
    city: Annotated[
        str, Field(description="The city the caller asks about, by name.", examples=["Lisbon"])
    ],
) -> str:
    """Weather forecast for a city: conditions and the day's high and low."""
    return f"{city}: sunny."


def test_a_desk_just_reached_acts_on_the_request_its_only_fitting_tool_can_take():
    ctx = history("Will it rain in Rio de Janeiro tomorrow?")
    ctx.add_message(
        role="system",
        content="You are the weather desk and just took over from triage. If the caller's last "
        "request is yours, act on it now; otherwise greet them briefly and ask how you can help.",
    )
    offered = schemas(forecast, desks=DESKS)
    assert decide(ctx, offered) == (None, [("forecast", {"city": "Rio de Janeiro"})])
    ctx = history("hello there")
    ctx.add_message(role="system", content="You are the weather desk and just took over from x.")
    assert decide(ctx, offered) == ("You're through to the weather desk. How can I help?", [])
    assert said_to("weather?", specs=[forecast])[0] == "Which city do you mean?"
    # a name is not a city: the capitalised words after a place word are
    ask = "Hi, my name is Alice Reed. What's the forecast in Lisbon?"
    assert said_to(ask, specs=[forecast])[1] == [("forecast", {"city": "Lisbon"})]


# -- arguments from the schema --------------------------------------------------------------


def test_enum_pattern_and_number_come_from_the_words_and_nothing_else():
    _, calls = said_to("book a tyre rotation for ab 123, I can leave it 3 hours")
    assert calls == [("book_service", {"service": "tyre rotation", "plate": "AB-123", "hours": 3})]
    _, calls = said_to("Book an inspection for XY-042 for 1.5 hours, with a loaner car")
    assert calls == [
        (
            "book_service",
            {"service": "inspection", "plate": "XY-042", "hours": 1.5, "loaner": True},
        )
    ]
    _, calls = said_to("book an oil change for XY-042 for 2 hours, no loaner needed")
    assert calls[0][1]["loaner"] is False


def test_a_number_outside_the_schema_bounds_is_asked_for_not_sent():
    text, calls = said_to("book an inspection for XY-042 for 12 hours")
    assert calls == [] and text == "How many hours the car can stay?"


def test_ids_shaped_like_the_examples_and_names_like_them():
    assert said_to("where's my part ord 2040?")[1] == [("track_part", {"order_id": "ORD-2040"})]
    assert said_to("track part ORD-77 please")[1] == [("track_part", {"order_id": "ORD-77"})]
    assert said_to("find the branch in the town of porto")[1] == [
        ("find_branch", {"town": "Porto"})
    ]
    _, calls = said_to("I want a chocolate cake for 12 people", specs=[order_cake])
    assert calls == [("order_cake", {"flavour": "chocolate", "servings": 12})]


def test_a_missing_required_argument_is_asked_for_then_filled_from_the_answer():
    first = "where is your nearest branch?"
    text, calls = said_to(first)
    assert calls == [] and text == "Which town do you mean?"
    assert said_to(first, text, "porto please")[1] == [("find_branch", {"town": "Porto"})]
    # one question at a time, keeping what was already said
    first = "I need an oil change"
    text, calls = said_to(first)
    assert calls == [] and text == "Which car's plate do you mean?"
    text2, calls = said_to(first, text, "it's AB-123")
    assert calls == [] and text2 == "How many hours the car can stay?"
    assert said_to(first, text, "it's AB-123", text2, "2 hours")[1] == [
        ("book_service", {"service": "oil change", "plate": "AB-123", "hours": 2})
    ]


def test_never_the_whole_utterance_in_a_string():
    text, calls = said_to("can you find me a branch of yours somewhere nice")
    assert calls == [] and text == "Which town do you mean?"
    utterance = "I want a carrot cake for 4 people that says happy birthday"
    _, [(name, args)] = said_to(utterance, specs=[order_cake])
    assert name == "order_cake" and args == {"flavour": "carrot", "servings": 4}
    assert utterance not in json.dumps(args)


# -- critical tools -------------------------------------------------------------------------


def test_a_critical_tool_with_a_confirmed_flag_reads_back_first_then_runs_on_yes():
    ask = "Yes, cancel booking BK-12"  # a yes in the first turn confirms nothing
    _, calls = said_to(ask)
    assert calls == [("cancel_booking", {"booking": "BK-12", "confirmed": False})]
    readback = ("cancel_booking", calls[0][1], "You're about to cancel booking BK-12. Shall I?")
    assert said_to(ask, readback, "yes please")[1] == [
        ("cancel_booking", {"booking": "BK-12", "confirmed": True})
    ]
    text, calls = said_to(ask, readback, "no, leave it")
    assert calls == [] and "won't" in text
    # the yes must come in the very next turn
    later = said_to(ask, readback, "hmm", "Sorry, I didn't understand that.", "yes")
    assert later[1] == []


def test_a_critical_tool_without_a_flag_is_confirmed_by_the_brain():
    ask = "please erase the history of my car AB-123"
    text, calls = said_to(ask)
    assert calls == []
    assert (
        text
        == "Just to confirm: erase your service history for a car, plate AB-123. Shall I go ahead?"
    )
    assert said_to(ask, text, "yes")[1] == [("wipe_history", {"plate": "AB-123"})]
    assert said_to(ask, text, "no")[1] == []
    # without the registry's word that it is critical, it would simply run
    assert decide(history(ask), schemas(*GARAGE))[1] == [("wipe_history", {"plate": "AB-123"})]


def test_the_brain_learns_which_tools_are_critical_from_the_registry(settings):
    registry = host.load(
        settings.model_copy(update={"disable_plugins": BUILT_INS}), extra=[("desks", Desks())]
    )
    assert critical_tools(registry) == CRITICAL
    assert OfflineBrain.for_registry(registry).critical == CRITICAL


# -- errors ---------------------------------------------------------------------------------


def test_errors_are_never_read_raw():
    ask = "run a diagnosis"
    assert said_to(ask)[1] == [("diagnose", {})]
    leak = json.dumps({"error": "KeyError: 'obd_port' in /srv/garage/diag.py"})
    assert said_to(ask, ("diagnose", {}, leak))[0] == APOLOGY
    internal = ("diagnose", {}, "An internal error occurred", True)
    assert said_to(ask, internal)[0] == APOLOGY
    trace = ("diagnose", {}, "Traceback (most recent call last): ValueError: x=1", True)
    assert said_to(ask, trace)[0] == APOLOGY
    # the caller-safe sentence our patterns hand over is said as it is
    polite = ("quote", {}, "The quote service is closed on Sundays.", True)
    assert said_to("a quote for repairs", polite)[0] == "The quote service is closed on Sundays."


# -- whole calls ----------------------------------------------------------------------------


async def call(settings, steps, transcript, caller="gus"):
    settings = settings.model_copy(update={"disable_plugins": BUILT_INS})
    registry = host.load(settings, extra=[("desks", Desks())])
    scenario = parse_scenario({"caller": caller, "steps": steps})
    return await simulate([scenario], settings, registry, transcript.append)


def tool_calls(transcript) -> list[tuple[str, dict]]:
    return [(e["name"], json.loads(e["arguments"])) for e in transcript.of("tool_call")]


async def test_a_call_routes_asks_fills_and_confirms_with_no_script(settings, store, transcript):
    wiped.clear()
    steps = [
        {"user": "Hello, I need an oil change for my car"},
        {"expect": {"agent": "garage"}},
        {"expect": {"said": "Which car's plate do you mean\\?"}},
        {"user": "ab 123, and I can leave it for 2 hours"},
        {"expect": {"task": "book_service", "status": "succeeded"}},
        {"expect": {"said": "Booked: oil change for AB-123, 2 hours\\."}},
        {"user": "Cancel booking BK-4"},
        {"expect": {"said": "You're about to cancel booking BK-4\\. Shall I go ahead\\?"}},
        {"user": "yes"},
        {"expect": {"said": "Booking BK-4 is cancelled\\."}},
        {"user": "erase the history of AB-123"},
        {"expect": {"said": "Just to confirm"}},
    ]
    failures = await call(settings, steps, transcript)
    assert failures == []
    # the critical tool the brain confirms itself has not run: no row, no side effect
    assert await store.list(caller="gus", tool="wipe_history") == [] and wiped == []
    calls = tool_calls(transcript)
    assert ("transfer_to_garage", {}) in calls
    assert ("book_service", {"service": "oil change", "plate": "AB-123", "hours": 2}) in calls
    cancels = [args for name, args in calls if name == "cancel_booking"]
    assert cancels == [
        {"booking": "BK-4", "confirmed": False},
        {"booking": "BK-4", "confirmed": True},
    ]
    rows = await store.list(caller="gus", tool="cancel_booking")
    assert sorted(r.args["confirmed"] for r in rows) == [False, True]
    assert all(r.status == "succeeded" for r in rows)


async def test_a_call_confirms_a_critical_tool_on_the_next_yes(settings, store, transcript):
    wiped.clear()
    steps = [
        {"user": "my car's service history must go: erase the history of AB-123"},
        {"expect": {"said": "Shall I go ahead\\?"}},
        {"user": "Yes, go ahead."},
        {"expect": {"task": "wipe_history", "status": "succeeded"}},
        {"user": "run a diagnosis of my car"},
        {"expect": {"task": "diagnose", "status": "succeeded"}},
        {"user": "I'd like a chocolate cake for 8 people"},
        {"expect": {"agent": "bakery"}},
        {"expect": {"task": "order_cake", "status": "succeeded"}},
        {"user": "thanks, goodbye"},
    ]
    failures = await call(settings, steps, transcript, caller="gwen")
    assert failures == []
    assert wiped == ["AB-123"]
    said = [text for _, text in transcript.said()]
    assert APOLOGY in said and not any("KeyError" in s or "/srv" in s for s in said)
    assert "A chocolate cake for 8 is ordered." in said
    assert said[-1] == "Thank you for calling. Goodbye!"
    [cake] = await store.list(caller="gwen", tool="order_cake")
    assert cake.args == {"flavour": "chocolate", "servings": 8, "note": ""}
