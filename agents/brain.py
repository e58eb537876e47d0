"""The offline brain: a deterministic ``llm.LLM`` for the console, demos and scenario fallbacks.

It needs no key and no network, and it knows no plugin. It routes by what the tools say of
themselves: each desk's ``transfer_to_<name>`` tool ("Transfer the caller to the <name> desk,
which <description>. Topics: <keywords>.") and the current desk's own tools' names and
descriptions. Arguments come from the caller's words through each tool's JSON schema
(``brain_args``); a missing required one is asked for. A critical tool (``critical=`` names,
from the registry) never runs in the turn the caller asks for it: a tool with a ``confirmed``
flag is first called unconfirmed to read back, anything else is read back by the brain, and
either runs only when the caller's next words are a yes. Tool errors are never read raw.

It keeps no state between requests: whether the caller is answering a question it asked is
worked out again from the history (the same words give the same question), so one brain can
serve any number of calls.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from livekit.agents import APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr

from frontdesk.agents.brain_mind import APOLOGY, Mind

__all__ = ["APOLOGY", "OfflineBrain", "critical_tools", "decide", "reply_chunk", "tool_schema"]


def reply_chunk(text: str | None, tools: list[tuple[str, Any]]) -> llm.ChatChunk:
    calls = [
        llm.FunctionToolCall(
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args or {}),
            call_id=f"call_{uuid.uuid4().hex[:12]}",
        )
        for name, args in tools
    ]
    return llm.ChatChunk(
        id=f"chunk_{uuid.uuid4().hex[:8]}",
        delta=llm.ChoiceDelta(role="assistant", content=text or None, tool_calls=calls),
    )


def tool_schema(tool: Any) -> dict[str, Any]:
    info = tool.info
    if hasattr(info, "raw_schema"):
        return info.raw_schema
    try:
        return llm.utils.build_legacy_openai_schema(tool, internally_tagged=True)
    except Exception:
        return {"name": info.name, "description": getattr(info, "description", "") or ""}


class OfflineBrain(llm.LLM):
    """``critical``: names of the tools whose pattern is critical (``Registry.tools``)."""

    def __init__(self, *, critical: Iterable[str] = ()) -> None:
        super().__init__()
        self.critical = frozenset(critical)

    @classmethod
    def for_registry(cls, registry: Any) -> OfflineBrain:
        return cls(critical=critical_tools(registry))

    @property
    def model(self) -> str:
        return "offline"

    @property
    def provider(self) -> str:
        return "frontdesk"

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        schemas = [tool_schema(t) for t in tools or []]
        text, calls = decide(chat_ctx, schemas, self.critical)
        if tool_choice == "none":
            calls = []
        return _Stream(
            self,
            chat_ctx=chat_ctx,
            tools=tools or [],
            conn_options=conn_options,
            reply=(text, calls),
        )


def critical_tools(registry: Any) -> frozenset[str]:
    return frozenset(name for name, spec in registry.tools.items() if spec.pattern == "critical")


class _Stream(llm.LLMStream):
    def __init__(
        self, owner: OfflineBrain, *, reply: tuple[str | None, list[tuple[str, Any]]], **kw: Any
    ) -> None:
        super().__init__(owner, **kw)
        self._reply = reply

    async def _run(self) -> None:
        self._event_ch.send_nowait(reply_chunk(*self._reply))


def decide(
    ctx: llm.ChatContext, schemas: list[dict[str, Any]], critical: Iterable[str] = ()
) -> tuple[str | None, list[tuple[str, Any]]]:
    """What to say and which tools to call next, from the history and the offered tools."""
    d = Mind(schemas, frozenset(critical)).decide(ctx.items)
    return d.say, d.calls
