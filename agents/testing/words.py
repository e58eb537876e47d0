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

from livekit.agents import llm

from frontdesk.agents.testing.llm import Reply, ScriptedLLM

Key = tuple[frozenset[str], str, tuple[str, ...]]


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


class WordsLLM(ScriptedLLM):
    def __init__(self, *, fallback: llm.LLM | None = None, delay: float = 0.0) -> None:
        super().__init__(fallback=fallback, delay=delay)
        self._scripts: dict[str, list[Reply]] = {}
        self._used: dict[str, dict[Key, int]] = {}
        self.answered: list[tuple[str, int]] = []  # (caller words, reply index) per request

    @property
    def model(self) -> str:
        return "scripted-words"

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

    def _next_reply(self, chat_ctx: llm.ChatContext, tools: list[llm.Tool] | None) -> Reply | None:
        key = self._key(chat_ctx, tools)
        if key is None or key[1] not in self._scripts:
            return None
        used, script = self._used[key[1]], self._scripts[key[1]]
        index = used.setdefault(key, len(used))
        if index >= len(script):
            return None
        self.answered.append((key[1], index))
        return script[index]


__all__ = ["WordsLLM"]
