"""What may be written to the task store, and writing a task's end so it survives a DB outage.

Shared by the patterns (call processes) and the runner:
- ``record`` retries a task's last transition with backoff while the database is down, so the
  row ends with its real outcome once the database is back, not with a crash-recovery guess;
- ``mask_secrets``/``stored_args``/``stored_error`` keep hostile or secret input out of rows,
  events and logs
  (untrusted callers choose tool arguments through the LLM; see docs/security.md);
- ``job_args_problem`` refuses background arguments that must not be stored in clear.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import stamina
from sqlalchemy.exc import SQLAlchemyError

from frontdesk.core.tools import ToolSpec, mask_cards

if TYPE_CHECKING:
    from frontdesk.db.store import Task, TaskStore

log = logging.getLogger("frontdesk.patterns")

RESTART = "interrupted by restart"
# A finished task's last write is retried this long while the database is unavailable. Past
# it an in-turn row is left to lease recovery ("interrupted by restart"), which is still
# truthful; a background job's end is retried at least this long (core/runner.py).
RECORD_RETRY_SECONDS = 60.0
# A background job's arguments are stored whole (the runner needs them), so they are capped.
MAX_JOB_ARGS_BYTES = 64_000
MAX_SHOWN_KEYS = 20
MAX_SENTENCE = 300
CARD_IN_JOB = (
    "For your security I can't take card numbers for that request. "
    "Please ask again without the card number."
)
JOB_TOO_BIG = "That request is too long for me to take. Could you say it more briefly?"


def mask_secrets(value: Any) -> Any:
    """Card numbers (all but the last four digits) and named security codes masked, in a
    string or anywhere inside JSON-like data, without the length cap of ``ToolSpec.redact``."""
    if isinstance(value, str):
        return mask_cards(value)
    if isinstance(value, dict):
        return {k: mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_secrets(v) for v in value]
    return value


async def record(
    store: TaskStore,
    task_id: int,
    status: str,
    *,
    retry_seconds: float | None = RECORD_RETRY_SECONDS,
    **values: Any,
) -> Task | None:
    """``store.transition`` retried with backoff while the database cannot be written, for
    ``retry_seconds`` (None: until it is written; a runner's job end, core/runner.py)."""
    async for attempt in stamina.retry_context(
        on=(SQLAlchemyError, OSError),
        attempts=None,
        timeout=retry_seconds,
        wait_initial=0.1,
        wait_max=2.0,
    ):
        with attempt:
            return await store.transition(task_id, status, **values)
    return None  # unreachable: the last failed attempt re-raises


def stored_error(text: str) -> str:
    """An error as it may be stored or logged: card data masked, length bounded."""
    text = mask_secrets(text)
    return text if len(text) <= 2000 else text[:2000] + "..."


def invalid_input_sentence(spec: ToolSpec, text: str) -> str:
    """What the caller hears (and the row keeps) for arguments that failed validation.

    Validation messages may quote the input (a field name the LLM made up is named in
    them), and that input is the caller's: a long or odd quote is replaced by a plain
    sentence rather than read back."""
    text = mask_secrets(text)
    if len(text) > MAX_SENTENCE or not text.isprintable():
        return "I couldn't use those details."
    return text


def stored_args(spec: ToolSpec, raw: Any) -> dict[str, Any]:
    """Arguments that failed validation, as they may be stored: only the tool's own parameter
    names carry values (redacted as usual); other keys are listed, masked and cut short, so a
    hostile key (a card number, a megabyte) never lands in a row."""
    if not isinstance(raw, dict):
        return mask_secrets(spec.redact({"raw": str(raw)[:4000]}))
    try:
        known = set(spec.model().model_fields)
    except Exception:
        known = set()
    shown = mask_secrets(spec.redact({k: v for k, v in raw.items() if k in known}))
    others = [mask_secrets(str(k))[:40] for k in raw if k not in known]
    if others:
        shown["unexpected"] = others[:MAX_SHOWN_KEYS]
    return shown


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]  # a card number typed as an int is still a card number
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def job_args_problem(args: dict[str, Any]) -> str | None:
    """Why these background arguments cannot be queued, or None.

    A job's arguments are stored unredacted because the runner, in another process, needs
    them; so a card-like number is refused out loud instead of being stored or silently
    masked, and a huge argument is refused instead of bloating every listing."""
    if any(mask_secrets(s) != s for s in _strings(args)):
        return CARD_IN_JOB
    if len(json.dumps(args, default=str)) > MAX_JOB_ARGS_BYTES:
        return JOB_TOO_BIG
    return None


def to_jsonable(value: Any) -> Any:
    """A tool's result as it may be stored and read by the LLM: plain JSON (pydantic's JSON
    mode: a date as ISO text, a model or dataclass as an object, a Decimal as text), card
    numbers and named security codes masked (a tool may echo what the caller said). NaN and
    infinities (which Postgres JSON refuses) become null. Never raises: what JSON cannot hold
    (tuple keys, cycles) is kept as text, because a result that cannot be recorded would leave
    its row running and its job re-run."""
    from pydantic_core import to_jsonable_python

    try:
        text = json.dumps(to_jsonable_python(value, fallback=str))
    except (TypeError, ValueError):
        text = json.dumps(str(value))
    return mask_secrets(json.loads(text, parse_constant=lambda _c: None))
