"""Typed tool arguments end to end, and what an author sets on ``@tool``: precheck (with the
plugin's settings), ack, noun; a background ToolError told in its follow-up; built-ins win a
tool name whatever the hook order."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, datetime, time, timezone
from decimal import Decimal
from enum import Enum
from typing import Literal
from uuid import UUID

import pytest
from pydantic import BaseModel
from pydantic_settings import BaseSettings

from frontdesk.agents.programs.scenario import parse_scenario
from frontdesk.agents.programs.simulate import simulate
from frontdesk.core import Department, ToolContext, ToolError, hookimpl, host, tool
from frontdesk.core.wording import task_noun

received: list[dict] = []


class Size(Enum):
    SMALL = "small"
    LARGE = "large"


class Guest(BaseModel):
    name: str
    visits: int = 0


class TableSettings(BaseSettings):
    max_party: int = 6


def party_fits(party: int, config: TableSettings) -> None:
    if party > config.max_party:
        raise ToolError(f"We seat at most {config.max_party} at one table.")


def buggy_check(party: int) -> None:
    raise KeyError("bug in the precheck")


@tool(pattern="critical", precheck=party_fits)
async def book(
    ctx: ToolContext,
    day: date,
    at: time,
    confirmed_at: datetime,
    deposit: Decimal,
    ref: UUID,
    size: Size,
    seating: Literal["inside", "outside"],
    guest: Guest,
    party: int = 2,
) -> str:
    """Book a table."""
    received.append(dict(locals()))
    return f"Booked {guest.name} for {day:%A} at {at:%H:%M}, deposit {deposit + Decimal('0.01')}."


@tool(
    pattern="background",
    noun="table hold",
    ack="Holding it under reference {reference}; we'll call you back.",
)
async def hold_table(ctx: ToolContext, day: date, deposit: Decimal, guest: Guest) -> dict:
    """Hold a table until a deposit clears."""
    received.append({"day": day, "deposit": deposit, "guest": guest})
    if deposit > 100:
        raise ToolError("No table is free for that deposit on Friday.")
    return {"summary": f"Your table on {day:%d %B} is held for {guest.name}."}


@tool(precheck=buggy_check)
async def walk_in(ctx: ToolContext, party: int) -> str:
    """Seat a walk-in party."""
    return "seated"


class Tables:
    @hookimpl
    def register_departments(self, register: Callable) -> None:
        register(
            Department(
                name="tables",
                description="books tables",
                tools=[book, hold_table, walk_in],
            )
        )

    @hookimpl
    def register_settings(self, register: Callable) -> None:
        register(TableSettings)


ARGS = {
    "day": "2025-06-06",
    "at": "19:30:00",
    "confirmed_at": "2025-06-01T12:00:00Z",
    "deposit": "12.50",
    "ref": "c9bf9e57-1685-4c89-bafb-ff5af830be8a",
    "size": "large",
    "seating": "outside",
    "guest": {"name": "Ana", "visits": 3},
}


@pytest.fixture
def tables(settings):
    received.clear()
    return host.load(settings, extra=[("tables", Tables())])


async def play(settings, registry, transcript, steps, caller="ana"):
    scenario = parse_scenario({"caller": caller, "steps": steps})
    return await simulate([scenario], settings, registry, transcript.append)


def to_tables(*replies):
    return {"user": "a table please", "llm": [{"tools": [{"transfer_to_tables": {}}]}, *replies]}


@pytest.mark.backends("sqlite", "postgres")
async def test_typed_arguments_reach_the_tool_typed_and_are_stored_as_json(
    settings, tables, store, transcript
):
    assert tables.plugins["tables"].errors == []
    failures = await play(
        settings,
        tables,
        transcript,
        [
            to_tables({"say": "Tables here."}),
            {"user": "book it", "llm": [{"tools": [{"book": ARGS}]}, {"say": "Booked."}]},
            {"expect": {"task": "book", "status": "succeeded"}},
        ],
    )
    assert failures == []
    [got] = received
    assert got["day"] == date(2025, 6, 6) and got["at"] == time(19, 30)
    assert got["confirmed_at"] == datetime(2025, 6, 1, 12, tzinfo=timezone.utc)
    assert got["deposit"] == Decimal("12.50") and isinstance(got["deposit"], Decimal)
    assert got["ref"] == UUID(ARGS["ref"]) and got["size"] is Size.LARGE
    assert got["seating"] == "outside" and got["guest"] == Guest(name="Ana", visits=3)
    [row] = await store.list(caller="ana", tool="book")
    assert row.args == {**ARGS, "confirmed_at": "2025-06-01T12:00:00Z", "party": 2}
    assert row.result == "Booked Ana for Friday at 19:30, deposit 12.51."


@pytest.mark.backends("sqlite", "postgres")
async def test_a_background_job_gets_its_arguments_typed_from_the_stored_json(
    settings, tables, store, transcript
):
    wanted = {"day": "2025-06-06", "deposit": "20.00", "guest": {"name": "Ana", "visits": 0}}
    failures = await play(
        settings,
        tables,
        transcript,
        [
            to_tables({"say": "Tables here."}),
            {"user": "hold one", "llm": [{"tools": [{"hold_table": wanted}]}, {"say": "Held."}]},
            {
                "wait": {
                    "task": "hold_table",
                    "status": "succeeded",
                    "delivered": True,
                    "timeout": 20,
                }
            },
            {"expect": {"said": "held for Ana"}},
        ],
    )
    assert failures == []
    [row] = await store.list(caller="ana", tool="hold_table")
    assert row.args == wanted  # JSON in the row; the runner validated it again
    [got] = received
    assert got == {"day": date(2025, 6, 6), "deposit": Decimal("20.00"), "guest": Guest(name="Ana")}
    # Its own ack, with the reference number, is what the LLM was told.
    [output] = [e for e in transcript.of("tool_output") if e["name"] == "hold_table"]
    assert output["output"] == f"Holding it under reference {row.id}; we'll call you back."


async def test_a_background_tool_error_is_told_in_its_followup_with_its_noun(
    settings, tables, store, transcript
):
    bad = {"day": "2025-06-06", "deposit": "500", "guest": {"name": "Ana"}}
    failures = await play(
        settings,
        tables,
        transcript,
        [
            to_tables({"say": "Tables here."}),
            {"user": "hold one", "llm": [{"tools": [{"hold_table": bad}]}, {"say": "Holding."}]},
            {"wait": {"task": "hold_table", "status": "failed", "delivered": True, "timeout": 20}},
            {"expect": {"said": "table hold .*did not complete"}},
            {"expect": {"said": "No table is free for that deposit on Friday"}},
        ],
    )
    assert failures == []
    assert task_noun("hold_table") == "table hold"


async def test_precheck_gets_the_plugins_settings_and_refuses_in_the_call(
    settings, tables, store, transcript, monkeypatch
):
    monkeypatch.setenv("FRONTDESK_TABLES_MAX_PARTY", "4")
    registry = host.load(settings, extra=[("tables", Tables())])
    assert registry.configs["tables"].max_party == 4
    failures = await play(
        settings,
        registry,
        transcript,
        [
            to_tables({"say": "Tables here."}),
            {"user": "for five", "llm": [{"tools": [{"book": {**ARGS, "party": 5}}]}]},
            {"expect": {"task": "book", "status": "failed"}},
        ],
    )
    assert failures == []
    [row] = await store.list(caller="ana", tool="book")
    assert row.error == "We seat at most 4 at one table." and received == []


async def test_a_precheck_that_raises_is_logged_with_its_tool(
    settings, tables, store, transcript, caplog
):
    with caplog.at_level(logging.ERROR, logger="frontdesk.tools"):
        failures = await play(
            settings,
            tables,
            transcript,
            [
                to_tables({"say": "Tables here."}),
                {"user": "two of us", "llm": [{"tools": [{"walk_in": {"party": 2}}]}]},
                {"expect": {"task": "walk_in", "status": "failed"}},
            ],
        )
    assert failures == []
    [row] = await store.list(caller="ana", tool="walk_in")
    assert row.error == "I couldn't use those details."
    [logged] = [r for r in caplog.records if "precheck of tool walk_in" in r.getMessage()]
    assert "KeyError" in logged.getMessage() and "buggy_check" in logged.getMessage()


# -- refused at registration -----------------------------------------------------------------


class Opaque:
    """Not something JSON can hold."""


@tool
async def takes_a_callback(ctx: ToolContext, callback: Callable[[], None]) -> str:
    """Call back."""
    return "no"


@tool
async def takes_an_object(ctx: ToolContext, thing: Opaque) -> str:
    """Use a thing."""
    return "no"


@tool
async def takes_an_unknown(ctx: ToolContext, when: Tomorrow) -> str:  # noqa: F821
    """An annotation that names nothing importable."""
    return "no"


def _no_party(guests: int) -> None:
    pass


@tool(precheck=_no_party)
async def misfit_precheck(ctx: ToolContext, party: int) -> str:
    """A precheck that names a parameter the tool does not have."""
    return "no"


@tool(ack="Done as {reference}.")
async def in_turn_reference(ctx: ToolContext) -> str:
    """An in-turn tool has no reference number to say."""
    return "no"


@pytest.mark.parametrize(
    ("spec", "wanted"),
    [
        (takes_a_callback, "tool 'takes_a_callback': parameter 'callback' is a "),
        (takes_an_object, "tool 'takes_an_object': parameter 'thing' is a Opaque, which cannot"),
        (takes_an_unknown, "tool 'takes_an_unknown': parameter 'when': its annotation 'Tomorrow'"),
        (misfit_precheck, "tool 'misfit_precheck': precheck takes 'guests', which is not one"),
        (in_turn_reference, "only a background tool's ack can say {reference}"),
    ],
)
def test_a_tool_whose_arguments_cannot_be_stored_is_refused_in_one_line(settings, spec, wanted):
    class Plugin:
        @hookimpl
        def register_tools(self, register: Callable) -> None:
            register(spec, departments="*")

    registry = host.load(settings, extra=[("oddities", Plugin())])
    [error] = [e for e in registry.errors if e.startswith("oddities: ")]
    assert wanted in error and "\n" not in error, error
    assert error.endswith("tool left out") and spec.name not in registry.tools


# -- built-ins win a tool name, whatever the hook order ----------------------------------------


@tool
async def task_status(ctx: ToolContext) -> str:
    """An impostor of the built-in task status."""
    return "impostor"


class DeskClash:
    @hookimpl
    def register_departments(self, register: Callable) -> None:
        register(Department(name="desk", description="a desk", tools=[task_status]))


class ToolClash:
    @hookimpl
    def register_tools(self, register: Callable) -> None:
        register(task_status, departments="*")


@pytest.mark.parametrize("plugin", [DeskClash(), ToolClash()], ids=["in a desk", "joined"])
def test_the_built_in_wins_a_tool_name_whatever_the_hook_order(settings, plugin):
    registry = host.load(settings, extra=[("impostor", plugin)])
    assert registry.tools["task_status"].plugin == "tasks"
    assert all(
        t.plugin == "tasks" for d in registry.departments for t in registry.tools_for(d)
        if t.name == "task_status"
    )  # fmt: skip
    assert "task_status" in [t.name for t in registry.tools_for("triage")]
    assert registry.plugins["impostor"].errors == [
        "tool 'task_status' conflicts with the built-in one from plugin 'tasks'; "
        "built-ins always win"
    ]
    assert {"kind": "tool", "name": "task_status", "winner": "tasks", "loser": "impostor"} in (
        registry.conflicts
    )


# -- card numbers, typed or not, never reach a row -------------------------------------------


@tool(pattern="interruptible")
async def remember(ctx: ToolContext, note: str, account: int, when: date) -> str:
    """Remember a note."""
    return f"noted for {when:%d %B}"


@tool(pattern="background")
async def remember_later(ctx: ToolContext, account: int) -> str:
    """Remember a number later."""
    return "noted"


async def test_card_numbers_are_masked_in_typed_arguments_and_refused_for_jobs(
    settings, store, transcript
):
    class Notes:
        @hookimpl
        def register_tools(self, register: Callable) -> None:
            register(remember, departments="*")
            register(remember_later, departments="*")

    registry = host.load(settings, extra=[("notes", Notes())])
    card = "4111 1111 1111 1111"
    failures = await play(
        settings,
        registry,
        transcript,
        [
            {
                "user": "note it",
                "llm": [
                    {
                        "tools": [
                            {
                                "remember": {
                                    "note": f"card {card}",
                                    "account": 4111111111111111,
                                    "when": "2031-06-06",
                                }
                            }
                        ]
                    },
                    {"tools": [{"remember_later": {"account": 4111111111111111}}]},
                    {"say": "Done."},
                ],
            },
            {"expect": {"task": "remember", "status": "succeeded"}},
            {"expect": {"task": "remember_later", "status": "failed"}},
        ],
    )
    assert failures == []
    [row] = await store.list(caller="ana", tool="remember")
    assert row.args == {"note": "card ****1111", "account": "****1111", "when": "2031-06-06"}
    [job] = await store.list(caller="ana", tool="remember_later")
    assert "4111" not in str(job.args) and job.error.startswith("For your security")
