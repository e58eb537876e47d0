"""What the console accepts, defined once for the JSON API and the pages alike.

Every parameter a route takes is one of these annotated types, so ``/api/tasks?before=...`` and
``/tasks?before=...`` refuse the same inputs with the same message, and schemathesis fuzzes both
through /openapi.json. The ranges are the columns' own: ``tasks.id`` and ``task_events.id`` are
``Integer`` in the models, which is 32-bit on Postgres; a time must survive conversion to UTC
(``0001-01-01T00:00+05:00`` does not); Postgres cannot store or compare a NUL character, and no
name frontdesk writes holds one. A blank value (what a submitted form sends for an empty field)
means "any", as if the parameter were absent.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Literal

from fastapi import Header, Path, Query
from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

MAX_ID = 2**31 - 1  # Integer columns are int4 on Postgres; SQLite holds more, but never needs to
MAX_TEXT = 200  # the widest name column (tasks.caller, calls.caller) is String(200)
MAX_SESSION = 100  # calls.session_id, tasks.session_id
MAX_LIMIT = 500
NO_NUL = r"^[^\x00]*$"

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
PATTERNS = ("interruptible", "critical", "fire_and_forget", "background")
WINDOWS = {"hour": 3600, "day": 86400, "week": 7 * 86400, "all": None}


def blank_is_none(value: Any) -> Any:
    """A form's empty field means "any"."""
    if isinstance(value, str) and not value.strip():
        return None
    return value.strip() if isinstance(value, str) else value


def to_utc(value: datetime | None) -> datetime | None:
    """Times without a zone are UTC; every time is compared in UTC. A time that has no UTC
    form (before year 1, after year 9999 once shifted) is refused, not a 500."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError("that time is out of range") from None


_Blank = BeforeValidator(blank_is_none)
# The constraints sit on the value's own type, not on "value or None": a blank turned into None
# has no length to check.
_Name = Annotated[str, StringConstraints(max_length=MAX_TEXT, pattern=NO_NUL)]
_Session = Annotated[str, StringConstraints(max_length=MAX_SESSION, pattern=NO_NUL)]
_Id = Annotated[int, Field(ge=1, le=MAX_ID)]

Text = Annotated[_Name | None, _Blank, Query(description="exact match")]
Contains = Annotated[_Name | None, _Blank, Query(description="substring, any case")]
SessionText = Annotated[_Session | None, _Blank, Query()]
Status = Annotated[Literal["queued", "running", "succeeded", "failed", "cancelled"] | None, _Blank]
Pattern = Annotated[
    Literal["interruptible", "critical", "fire_and_forget", "background"] | None, _Blank
]
When = Annotated[
    datetime | None,
    _Blank,
    AfterValidator(to_utc),
    Query(description="ISO 8601; no zone means UTC"),
]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
Before = Annotated[_Id | None, _Blank, Query(description="a next_before cursor")]
TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
TaskIdQuery = Annotated[_Id | None, _Blank, Query()]
SessionId = Annotated[str, Path(min_length=1, max_length=MAX_SESSION, pattern=NO_NUL)]
EventId = Annotated[
    Annotated[int, Field(ge=0, le=MAX_ID)] | None,
    _Blank,
    Query(description="replay events after this id"),
]
LastEventId = Annotated[Annotated[int, Field(ge=0, le=MAX_ID)] | None, _Blank, Header()]
Window = Annotated[
    Literal["hour", "day", "week", "all"],
    Query(description="tasks created in the last hour, day or week, or all of them"),
]


def parse_window(name: str) -> datetime | None:
    """The start of a stats window, or None for all time."""
    seconds = WINDOWS[name]
    if seconds is None:
        return None
    return datetime.now(timezone.utc) - timedelta(seconds=seconds)
