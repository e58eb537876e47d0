"""A tool's arguments: the model built from its signature, what may be stored, and its precheck.

Arguments arrive as JSON (from the LLM, or from a background job's row) and reach the tool
typed: a ``date`` parameter gets a ``date``, a ``Decimal`` a ``Decimal``, a nested model an
instance. They are stored in pydantic's JSON mode and validated again from that JSON where
they are read back (the runner), so every parameter's type needs a JSON form; one without is
refused when the tool is registered, in one line naming the tool and the parameter.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

# Any type pydantic validates from JSON and dumps back to it will do; these are the usual ones.
STORABLE_HINT = "use str, int, float, bool, date, time, datetime, Decimal, UUID, an Enum, a Literal or a pydantic model"
CONFIG = "config"  # the one precheck parameter that is not a tool parameter


def parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """The tool's own parameters: every one after ``ctx``."""
    return list(inspect.signature(fn).parameters.values())[1:]


def annotation(fn: Callable[..., Any], param: inspect.Parameter) -> Any:
    """A parameter's annotation, resolved (``from __future__ import annotations`` leaves text);
    ``str`` when there is none. ``ValueError`` naming the parameter when it cannot be resolved,
    rather than quietly treating a ``date`` as text."""
    value = param.annotation
    if value is inspect.Parameter.empty:
        return str
    if not isinstance(value, str):
        return value
    try:
        return eval(value, dict(getattr(fn, "__globals__", {})))  # the plugin's own text
    except Exception as exc:
        raise ValueError(
            f"parameter {param.name!r}: its annotation {value!r} cannot be resolved ({exc}); "
            "import the type at module level"
        ) from None


def storable(model: type[BaseModel]) -> bool:
    """Whether every argument has a JSON form both ways (checked on the whole model: every
    command that loads plugins pays for this)."""
    try:
        model.model_json_schema(mode="validation")
        model.model_json_schema(mode="serialization")
    except Exception:
        return False
    return True


def unstorable(fn: Callable[..., Any]) -> list[str]:
    """Why a parameter cannot be validated from JSON or stored as JSON, one line each: each
    parameter tried on its own, to name the one at fault."""
    found = []
    for param in parameters(fn):
        try:
            kind = annotation(fn, param)
        except ValueError as exc:
            found.append(str(exc))
            continue
        try:
            adapter = TypeAdapter(kind)
            adapter.json_schema(mode="validation")
            adapter.json_schema(mode="serialization")
        except Exception:
            shown = getattr(kind, "__name__", None) or repr(kind)
            found.append(
                f"parameter {param.name!r} is a {shown}, which cannot be stored as JSON; "
                f"{STORABLE_HINT}"
            )
    return found


def build_model(name: str, fn: Callable[..., Any]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for p in parameters(fn):
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation(fn, p), default)
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )


def typed(model: type[BaseModel], raw: dict[str, Any]) -> dict[str, Any]:
    """Validated arguments as the tool receives them (``ValidationError`` if they are not)."""
    instance = model.model_validate(raw)
    return {name: getattr(instance, name) for name in type(instance).model_fields}


def as_json(model: type[BaseModel], args: dict[str, Any]) -> dict[str, Any]:
    """Arguments in pydantic's JSON mode: what a row stores and the runner validates again."""
    return model.model_validate(args).model_dump(mode="json")


# -- precheck --------------------------------------------------------------------------------


def precheck_problem(precheck: Callable[..., Any], fn: Callable[..., Any]) -> str | None:
    """Why ``precheck`` cannot be called as documented, or None.

    A precheck takes only what it needs, by name: any of the tool's parameters, and ``config``
    (the plugin's settings); ``**kwargs`` takes every argument. It is a plain function."""
    if inspect.iscoroutinefunction(precheck):
        return "precheck must be a plain function (def, not async def)"
    try:
        signature = inspect.signature(precheck)
    except (TypeError, ValueError):
        return "precheck has no signature that can be read"
    own = {p.name for p in parameters(fn)}
    for p in signature.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
            return f"precheck's parameter {p.name!r} must be taken by name"
        if p.name not in own and p.name != CONFIG and p.default is p.empty:
            wanted = ", ".join(sorted(own)) or "none"
            return (
                f"precheck takes {p.name!r}, which is not one of the tool's parameters "
                f"({wanted}) or {CONFIG!r}"
            )
    return None


def call_precheck(precheck: Callable[..., Any], args: dict[str, Any], config: Any) -> None:
    """Call ``precheck`` with the arguments it names (all of them if it takes ``**kwargs``)."""
    signature = inspect.signature(precheck)
    offered = {**args}
    if CONFIG not in offered:
        offered[CONFIG] = config
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        wanted = offered if CONFIG in signature.parameters else args
    else:
        wanted = {k: v for k, v in offered.items() if k in signature.parameters}
    precheck(**wanted)
