"""Running a tool body, livekit-free: shared by call processes and the runner."""

from __future__ import annotations

import asyncio
import logging
import secrets
import traceback
from typing import Any

from frontdesk.core.context import ToolContext
from frontdesk.core.errors import ToolError
from frontdesk.core.recording import stored_error
from frontdesk.core.tools import ToolSpec

log = logging.getLogger("frontdesk.patterns")

TIMEOUT = "timeout"
SORRY = "Sorry, something went wrong with that. Please try again in a moment."
# How the errors frontdesk writes itself begin (a crash, a timeout, a restart, a cancel). Any
# other error on a failed row is a ToolError's message, which was written for the caller.
OWN_ERRORS = (
    "internal error",
    TIMEOUT,
    "interrupted by",
    "cancelled",
    "unfinished at",
    "no background tool named",
)


async def execute(spec: ToolSpec, ctx: ToolContext, args: dict[str, Any]) -> Any:
    """Run the tool body under its timeout. Shared by call processes and the runner."""
    coro = spec.fn(ctx, **args)
    if spec.timeout is None:
        return await coro
    try:
        return await asyncio.wait_for(coro, spec.timeout)
    except asyncio.TimeoutError:
        raise _Timeout() from None


class _Timeout(Exception):
    pass


def failure(exc: BaseException, spec: ToolSpec) -> tuple[str, str]:
    """(error to store, sentence for the caller). Unexpected errors keep details in the log
    only: their text may hold internals the caller must not hear. The stored error and the log
    line share a reference ("internal error: OSError (ref 1a2b3c4d)"), so an operator who sees
    the row can find the traceback."""
    if isinstance(exc, ToolError):
        return stored_error(str(exc)), stored_error(str(exc))
    if isinstance(exc, _Timeout):
        return TIMEOUT, f"Sorry, {spec.name.replace('_', ' ')} took too long, so I stopped it."
    ref = secrets.token_hex(4)
    # The traceback says where it broke; the message is masked, as it may quote a card number.
    where = "".join(traceback.format_tb(exc.__traceback__))
    log.error(
        "tool %s failed (ref %s): %s: %s\n%s",
        spec.name,
        ref,
        type(exc).__name__,
        stored_error(str(exc)),
        where,
    )
    return f"internal error: {type(exc).__name__} (ref {ref})", SORRY


def caller_reason(error: str | None) -> str | None:
    """A failed task's error if it is a ``ToolError``'s caller-safe message (a background
    job's follow-up says it), else None: frontdesk's own errors are for operators."""
    text = " ".join((error or "").split())
    if not text or text.lower().startswith(OWN_ERRORS):
        return None
    return text


def stable_key(row_key: str) -> str:
    """The logical call's key from a row's (``base`` or ``base#attempt``)."""
    return row_key.split("#", 1)[0]
