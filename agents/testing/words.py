"""``WordsLLM``: a scripted LLM for voice sessions, whose replies are keyed by the caller's words.

A voice ``AgentSession`` may ask the LLM twice for one turn (preemptive generation on the
final transcript, then again when the turn is committed), so a script that pops replies in
order would lose one. Here each caller utterance has its own list of replies; a request is
answered by the reply for its place in that turn (the agent, by its tools, and what followed
the caller's words so far), so asking twice gets the same reply twice.

Requests that are not part of a scripted turn (a follow-up's ``generate_reply``, a turn with
no script, or one whose replies are used up) go to ``fallback``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from livekit.agents import APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr

from frontdesk.agents.testing.llm import Reply, _ScriptedStream

Key = tuple[frozenset[str], str, tuple[str, ...]]


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


class WordsLLM(llm.LLM):
    def __init__(self, *, fallback: llm.LLM | None = None, delay: float = 0.0) -> None:
        super().__init__()
        self._fallback = fallback
        self.delay = delay
        self._scripts: dict[str, list[Reply]] = {}
        self._used: dict[str, dict[Key, int]] = {}
        self.requests: list[llm.ChatContext] = []
        self.answered: list[tuple[str, int]] = []  # (caller words, reply index) per request

    @property
    def model(self) -> str:
        return "scripted-words"

    @property
    def provider(self) -> str:
        return "frontdesk"

    def script(self, words: str, replies: Iterable[Reply]) -> None:
        """The replies to give, in order, in the turn that starts with the caller saying
        ``words``."""
        self._scripts[_normal(words)] = list(replies)
        self._used[_normal(words)] = {}

    def _key(self, chat_ctx: llm.ChatContext, tools: list[llm.Tool] | None) -> Key | None:
        items = list(chat_ctx.items)
        last_user = max(
            (i for i, it in enumerate(items) if getattr(it, "role", None) == "user"), default=None
        )
        if last_user is None:
            return None
        words = _normal(items[last_user].text_content or "")
        after = tuple(
            it.type if it.type != "message" else f"message:{it.role}"
            for it in items[last_user + 1 :]
            if not (it.type == "message" and it.role == "assistant")
        )
        names = frozenset(getattr(t, "id", None) or getattr(t, "name", "") for t in tools or [])
        return names, words, after

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
        key = self._key(chat_ctx, tools)
        reply: Reply | None = None
        if key is not None and key[1] in self._scripts:
            used, script = self._used[key[1]], self._scripts[key[1]]
            index = used.setdefault(key, len(used))
            if index < len(script):
                reply = script[index]
                self.answered.append((key[1], index))
        if reply is None and self._fallback is not None:
            return self._fallback.chat(chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        return _ScriptedStream(
            self,  # type: ignore[arg-type]
            chat_ctx=chat_ctx,
            tools=tools or [],
            conn_options=conn_options,
            reply=reply or {},
        )

    async def aclose(self) -> None:
        if self._fallback is not None:
            await self._fallback.aclose()
        await super().aclose()


__all__ = ["WordsLLM"]
