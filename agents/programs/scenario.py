"""Scenario files for ``frontdesk simulate``: parsing with errors that name the step."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontdesk.core.errors import FrontdeskError

KINDS = ("user", "interrupt", "wait", "expect", "hangup", "reconnect")
EXPECT_KEYS = {"task", "status", "agent", "said", "not_said", "delivered", "timeout"}


class ScenarioError(FrontdeskError):
    pass


@dataclass
class Step:
    index: int
    kind: str
    value: Any
    llm: list[dict[str, Any]] = field(default_factory=list)
    # user steps: how long the words take to say (voice mode), and, for talking over the
    # agent, how many seconds after the previous caller turn was taken they start
    seconds: float | None = None
    after: float | None = None

    @property
    def label(self) -> str:
        return f"step {self.index} ({self.kind})"


@dataclass
class Scenario:
    name: str
    caller: str
    steps: list[Step]


def load_scenario(path: str | Path) -> Scenario:
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {str(path)!r}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise ScenarioError(f"{path}: not valid YAML{line}") from None
    return parse_scenario(data, name=str(path))


def parse_scenario(data: Any, name: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{name}: expected a mapping with 'caller' and 'steps'")
    caller = data.get("caller", "caller")
    if not isinstance(caller, str | int) or not str(caller).strip():
        raise ScenarioError(f"{name}: 'caller' must be a non-empty string")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError(f"{name}: 'steps' must be a non-empty list")
    steps = [_parse_step(name, i, raw) for i, raw in enumerate(raw_steps, start=1)]
    return Scenario(name=name, caller=str(caller), steps=steps)


def _parse_step(name: str, index: int, raw: Any) -> Step:
    def bad(problem: str) -> ScenarioError:
        return ScenarioError(f"{name}: step {index}: {problem}")

    if not isinstance(raw, dict):
        raise bad(f"expected a mapping such as {{user: ...}}, got {type(raw).__name__}")
    kinds = [k for k in raw if k in KINDS]
    if len(kinds) != 1:
        raise bad(
            f"needs exactly one of {', '.join(KINDS)}; found {', '.join(map(str, raw)) or 'nothing'}"
        )
    kind = kinds[0]
    extra = set(raw) - {kind, "llm"} if kind == "user" else set(raw) - {kind}
    if extra:
        raise bad(f"unknown key(s) {', '.join(sorted(map(str, extra)))}")
    value = raw[kind]
    step = Step(index=index, kind=kind, value=value)
    if kind == "user":
        if isinstance(value, dict):
            unknown = set(value) - {"say", "for", "after"}
            if unknown or not isinstance(value.get("say"), str):
                raise bad("'user' takes the caller's words, or {say: WORDS, for: S, after: S}")
            for key in ("for", "after"):
                v = value.get(key)
                if v is not None and (not isinstance(v, int | float) or v < 0):
                    raise bad(f"'user' {key} must be a number of seconds")
            step.seconds = float(value["for"]) if value.get("for") is not None else None
            step.after = float(value["after"]) if value.get("after") is not None else None
            value = step.value = value["say"]
        if not isinstance(value, str):
            raise bad("'user' must be the caller's words, a string")
        replies = raw.get("llm") or []
        if not isinstance(replies, list):
            raise bad("'llm' must be a list of replies like {say: ..., tools: [...]}")
        for j, reply in enumerate(replies, start=1):
            if not isinstance(reply, dict) or set(reply) - {"say", "tools", "delay"}:
                raise bad(f"llm reply {j} must be a mapping with 'say', 'tools' and/or 'delay'")
            tools = reply.get("tools", [])
            if not isinstance(tools, list) or not all(
                isinstance(t, dict) and len(t) == 1 for t in tools
            ):
                raise bad(f"llm reply {j}: 'tools' must be a list of {{tool_name: {{args}}}}")
        step.llm = replies
    elif kind == "interrupt":
        after = (value or {}).get("after", 0) if isinstance(value, dict) else None
        if not isinstance(after, int | float) or after < 0:
            raise bad("'interrupt' takes {after: seconds}")
        step.value = {"after": float(after)}
    elif kind == "wait":
        if not isinstance(value, dict) or not (
            {"seconds"} <= set(value)
            or ("task" in value and ({"status", "delivered"} & set(value)))
        ):
            raise bad(
                "'wait' takes {seconds: N} or {task: TOOL, status: STATUS, timeout: N} "
                "(or delivered: true, to wait until its follow-up has been spoken)"
            )
    elif kind == "expect":
        if not isinstance(value, dict) or not value:
            raise bad(
                "'expect' takes {task: TOOL, status: S}, {agent: NAME}, {said: REGEX} or {not_said: REGEX}"
            )
        unknown = set(value) - EXPECT_KEYS
        if unknown:
            raise bad(f"'expect' does not know {', '.join(sorted(unknown))}")
        if ("status" in value or "delivered" in value) and "task" not in value:
            raise bad("'expect' with status or delivered needs task")
        for key in ("said", "not_said"):
            if key in value:
                pattern = value[key]
                if not isinstance(pattern, str):
                    raise bad(f"'{key}' must be a regular expression, a string")
                try:
                    re.compile(pattern, re.I)
                except re.error as exc:
                    raise bad(
                        f"'{key}' {pattern!r} is not a valid regular expression ({exc}); "
                        "escape ( ) [ ] . * + ? with a backslash to match them literally"
                    ) from None
    else:
        if value not in (None, {}):
            raise bad(f"'{kind}' takes no arguments: use {kind}: {{}}")
    return step
