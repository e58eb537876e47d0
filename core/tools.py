"""The ``@tool`` decorator and ``ToolSpec``: what a plugin author writes.

Nothing here imports livekit, so plugins load fast in CLI commands that never run a session.
The LiveKit plumbing for each pattern lives in ``frontdesk.agents.patterns``.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ValidationError

from frontdesk.core import arguments
from frontdesk.core.errors import ToolError
from frontdesk.core.wording import task_noun

_log = logging.getLogger("frontdesk.tools")

Pattern = Literal["interruptible", "critical", "fire_and_forget", "background"]
PATTERNS: tuple[str, ...] = get_args(Pattern)

# Long strings are kept whole in the runner's copy of a background job's arguments, but what is
# shown in history is capped so a hostile 1 MB argument cannot bloat every listing.
_MAX_STORED_STRING = 2000
_CARD_RE = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
# A background tool's ack may be its whole sentence, naming the job's reference number.
REFERENCE = "{reference}"


ToolFn = Callable[..., Awaitable[Any]]


@dataclass
class ToolSpec:
    """A tool as registered: the function, its pattern and what the LLM sees."""

    fn: ToolFn
    name: str
    pattern: str
    timeout: float | None = None
    ack: str | None = None
    sensitive: frozenset[str] = frozenset()
    resumable: bool = True
    precheck: Callable[..., Any] | None = None
    noun: str | None = None
    plugin: str | None = None
    _model: type[BaseModel] | None = field(default=None, repr=False)

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "")

    @property
    def what(self) -> str:
        """What a caller calls the thing this tool makes: ``noun=``, else from the name
        (``generate_report`` -> "report"). Acks, follow-ups and task status say it."""
        return self.noun or task_noun(self.name)

    def problems(self) -> list[str]:
        """Why this tool cannot be registered; empty when it can."""
        found = []
        if not self.description:
            found.append(f"tool {self.name!r} has no docstring (it is the LLM's description)")
        if self.pattern not in PATTERNS:
            found.append(
                f"tool {self.name!r} has unknown pattern {self.pattern!r}; use one of {', '.join(PATTERNS)}"
            )
        if not inspect.iscoroutinefunction(self.fn):
            found.append(f"tool {self.name!r} must be an async function")
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}", self.name):
            found.append(f"tool name {self.name!r} is not a valid identifier")
        if self.pattern == "background" and self.sensitive:
            # The runner needs real arguments and we refuse to store secrets in clear text.
            found.append(
                f"background tool {self.name!r} cannot take sensitive parameters "
                f"({', '.join(sorted(self.sensitive))}); look them up in the job instead"
            )
        if self.ack is not None and REFERENCE in self.ack and self.pattern != "background":
            found.append(f"tool {self.name!r}: only a background tool's ack can say {REFERENCE}")
        if self.noun is not None and not (isinstance(self.noun, str) and self.noun.strip()):
            found.append(f"tool {self.name!r}: noun must be a few words, e.g. noun='booking'")
        if found:
            return found
        try:
            fits = arguments.storable(self.model())
        except Exception:  # an annotation that cannot be resolved or validated
            fits = False
        if not fits:
            found += [f"tool {self.name!r}: {p}" for p in arguments.unstorable(self.fn)]
            if not found:  # every parameter alone is fine: a default that does not fit, say
                try:
                    arguments.storable(arguments.build_model(self.name, self.fn))
                except Exception as exc:
                    found.append(
                        f"tool {self.name!r} has parameters that cannot be described: {exc}"
                    )
        if self.precheck is not None and not found:
            if (problem := arguments.precheck_problem(self.precheck, self.fn)) is not None:
                found.append(f"tool {self.name!r}: {problem}")
        return found

    def model(self) -> type[BaseModel]:
        if self._model is None:
            self._model = arguments.build_model(self.name, self.fn)
        return self._model

    def json_schema(self) -> dict[str, Any]:
        schema = self.model().model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def validate(self, raw: Any, config: Any = None) -> dict[str, Any]:
        """Arguments from the LLM (or a job's stored JSON), validated and typed as the tool
        declares them, then passed through ``precheck`` (given ``config``, the plugin's
        settings, if it asks); a ``ToolError`` the caller may hear otherwise.

        The sentences are spoken, so they never name the tool and say a parameter in words:
        its ``Field(description=...)`` when it has one ("I need to know whether you confirm
        the payment."), else its name ("I need a valid invoice id.")."""
        if isinstance(raw, str):
            try:
                raw = json.loads(raw or "{}")
            except ValueError:
                raise ToolError("I couldn't read those details.") from None
        if not isinstance(raw, dict):
            raise ToolError("I couldn't read those details.")
        try:
            args = arguments.typed(self.model(), raw)
        except ValidationError as exc:
            # Name only our own parameters: an invented key is the LLM's (or caller's) text,
            # which could be anything, of any length.
            first = exc.errors()[0]
            loc = first.get("loc", ())
            field_name = str(loc[0]) if loc else ""
            if (
                first.get("type") == "extra_forbidden"
                or field_name not in self.model().model_fields
            ):
                raise ToolError("I got details I can't use.") from None
            raise ToolError(
                self.ask_for(field_name, missing=first.get("type") == "missing")
            ) from None
        if self.precheck is not None:
            try:
                arguments.call_precheck(self.precheck, args, config)
            except ToolError:
                raise
            except Exception as exc:
                # A bug in the precheck, not bad input: the author needs the traceback (its
                # message is masked, as it may quote what the caller said).
                _log.error(
                    "precheck of tool %s raised %s: %s\n%s",
                    self.name,
                    type(exc).__name__,
                    mask_cards(str(exc)),
                    "".join(traceback.format_tb(exc.__traceback__)),
                )
                raise ToolError("I couldn't use those details.") from None
        return args

    def to_json(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated arguments in pydantic's JSON mode (a date as ``"2025-06-01"``, a
        Decimal as ``"12.50"``): what a task row stores and the runner validates again."""
        return arguments.as_json(self.model(), args)

    def ask_for(self, field_name: str, *, missing: bool = False) -> str:
        """The sentence that asks the caller for a parameter that is missing or invalid."""
        info = self.model().model_fields[field_name]
        description = " ".join((info.description or "").split()).rstrip(".")
        if description and len(description) <= 120:
            return f"I need to know {description[0].lower()}{description[1:]}."
        words = field_name.replace("_", " ").strip() or "details"
        if info.annotation is bool:
            if words.endswith("ed"):
                return f"I need to know whether it's {words}."
            return f"I need a yes or no on {words}."
        return f"I need the {words}." if missing else f"I need a valid {words}."

    def redact(self, args: dict[str, Any]) -> dict[str, Any]:
        """Arguments as they may be stored in history: sensitive ones hidden, cards masked."""
        return {k: "[redacted]" if k in self.sensitive else _scrub(v) for k, v in args.items()}


# A security code is 3-4 digits, indistinguishable from any number unless it is named, so it
# is masked where the text names it ("cvv 123", "security code: 1234"); a parameter that holds
# one should be declared sensitive=, which hides it whatever its shape.
_CVV_RE = re.compile(r"(?i)\b(cvv2?|cvc2?|cid|csc|security code)(\W{0,3})(\d{3,4})\b")


def mask_cards(text: str) -> str:
    """Mask card-like digit runs, keeping the last four, and named security codes."""
    text = _CARD_RE.sub(lambda m: "****" + re.sub(r"\D", "", m.group())[-4:], text)
    return _CVV_RE.sub(lambda m: f"{m[1]}{m[2]}***", text)


def _scrub(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and _CARD_RE.fullmatch(str(value)):
        return mask_cards(str(value))  # a card number typed as an int
    if isinstance(value, str):
        value = mask_cards(value)
        if len(value) > _MAX_STORED_STRING:
            return value[:_MAX_STORED_STRING] + f"...[{len(value)} chars]"
        return value
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def tool(
    fn: ToolFn | None = None,
    *,
    pattern: str = "interruptible",
    name: str | None = None,
    timeout: float | None = None,
    ack: str | None = None,
    sensitive: Iterable[str] = (),
    resumable: bool = True,
    precheck: Callable[..., Any] | None = None,
    noun: str | None = None,
) -> Any:
    """Declare a plugin tool.

    ``pattern`` is one of interruptible, critical, fire_and_forget or background (see
    docs/patterns.md). The docstring is the LLM's description; parameters after ``ctx`` become
    the tool's JSON schema, and may be any type with a JSON form (date, Decimal, an Enum, a
    pydantic model...): they reach the tool typed. ``sensitive`` names parameters that are
    never stored. ``ack`` is said when the work takes a while; for a background tool it opens
    the reply with the reference number, or is the whole reply if it says ``{reference}``.
    ``noun`` is what the caller calls the result ("booking"), in acks, follow-ups and task
    status (default: from the name). ``timeout`` fails the task past that many seconds.
    ``resumable`` (background only, default True) lets a job whose runner died be run again
    from the start; set False for work that must not be repeated. ``precheck(...)`` runs before
    any work, with the validated arguments it names and ``config`` (the plugin's settings) if
    it asks for it; it refuses with ``ToolError``, so a background tool's bad input is answered
    in the call, not after queueing.
    """

    def wrap(f: ToolFn) -> ToolSpec:
        return ToolSpec(
            fn=f,
            name=name or getattr(f, "__name__", "tool"),
            pattern=pattern,
            timeout=timeout,
            ack=ack,
            sensitive=frozenset(sensitive),
            resumable=resumable,
            precheck=precheck,
            noun=noun,
        )

    return wrap(fn) if fn is not None else wrap
