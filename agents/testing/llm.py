"""``ScriptedLLM``: a real ``livekit.agents.llm.LLM`` whose replies come from a script.

For our tests, ``frontdesk simulate`` and plugin authors' tests. Each reply is a dict::

    {"say": "Connecting you.", "tools": [{"transfer_to_search": {}}], "delay": 0.5}

``delay`` (seconds) holds the reply back, as a slow model would. ``tools`` entries are
``{name: arguments}``; arguments may be a dict or a raw JSON string (so a
test can send malformed JSON). When the script runs out, the ``fallback`` LLM answers (the
offline brain by default), so a scenario only scripts what it cares about.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import Any

from livekit.agents import APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr

from frontdesk.agents.brain import reply_chunk

Reply = dict[str, Any]


class ScriptedLLM(llm.LLM):
    def __init__(
        self, replies: Iterable[Reply] = (), *, fallback: llm.LLM | None = None, delay: float = 0.0
    ) -> None:
        super().__init__()
        self._replies: deque[Reply] = deque(replies)
        self._fallback = fallback
        if fallback is not None:
            # The fallback's streams report errors on the fallback; the session listens here.
            fallback.on("error", lambda err: self.emit("error", err))
        self.delay = delay
        self.requests: list[llm.ChatContext] = []

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def provider(self) -> str:
        return "frontdesk"

    def push(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    def clear(self) -> None:
        self._replies.clear()

    @property
    def remaining(self) -> int:
        return len(self._replies)

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
        self.requests.append(chat_ctx.copy())
        reply = self._next_reply(chat_ctx, tools)
        if reply is None and self._fallback is not None:
            # Everything the session asked for: tool_choice="none" at its tool-step limit, say.
            return self._fallback.chat(
                chat_ctx=chat_ctx,
                tools=tools,
                conn_options=conn_options,
                parallel_tool_calls=parallel_tool_calls,
                tool_choice=tool_choice,
                extra_kwargs=extra_kwargs,
            )
        return _ScriptedStream(
            self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options, reply=reply or {}
        )

    def _next_reply(self, chat_ctx: llm.ChatContext, tools: list[llm.Tool] | None) -> Reply | None:
        """The scripted reply for this request, or None when the script has none for it (the
        fallback answers, or an empty reply without one). Subclasses choose differently."""
        return self._replies.popleft() if self._replies else None

    async def aclose(self) -> None:
        if self._fallback is not None:
            await self._fallback.aclose()
        await super().aclose()


class _ScriptedStream(llm.LLMStream):
    def __init__(self, owner: ScriptedLLM, *, reply: Reply, **kwargs: Any) -> None:
        super().__init__(owner, **kwargs)
        self._reply = reply
        self._delay = owner.delay

    async def _run(self) -> None:
        delay = self._reply.get("delay", self._delay)
        if delay:
            await asyncio.sleep(delay)
        tools = [
            (name, args) for entry in self._reply.get("tools", []) for name, args in entry.items()
        ]
        self._event_ch.send_nowait(reply_chunk(self._reply.get("say"), tools))
