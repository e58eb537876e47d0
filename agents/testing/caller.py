"""A timed caller on a real voice pipeline: the concierge runs on a voice ``AgentSession``
(fake VAD, STT and TTS, a pausable audio output) through ``start_call``, the same entry point
the worker uses, and a ``CallerScript`` speaks to it at set times.

    async with VoiceCall.open(store=..., registry=..., settings=...) as call:
        call.llm.script("look up argon", [{"tools": [{"lookup": {"query": "argon"}}]}])
        await call.play(CallerScript().say("look up argon", 0.6).say("stop", 0.5, at=1.2))
        await call.idle()
        assert call.pipeline.output.heard_texts() == [...]

Times in a script are seconds after ``play`` starts; an utterance due while an earlier one is
still being said starts when that one ends (a caller has one mouth).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import llm

from frontdesk.agents.testing.audio import now
from frontdesk.agents.testing.voice import CallerVoice, Utterance, VoicePipeline, voice_session
from frontdesk.agents.testing.words import WordsLLM


@dataclass
class Line:
    text: str
    seconds: float
    at: float | None  # None: right after the previous line


@dataclass
class CallerScript:
    lines: list[Line] = field(default_factory=list)

    def say(self, text: str, seconds: float = 0.8, *, at: float | None = None) -> CallerScript:
        self.lines.append(Line(text, seconds, at))
        return self

    async def play(self, voice: CallerVoice) -> list[Utterance]:
        start = now()
        said = []
        for line in self.lines:
            if line.at is not None:
                delay = start + line.at - now()
                if delay > 0:
                    await asyncio.sleep(delay)
            said.append(voice.say(line.text, line.seconds))
        return said


class VoiceCall:
    """One caller's call on the voice pipeline, with the runtime that ``start_call`` built.
    ``events`` holds the runtime's transcript events stamped with the harness clock."""

    def __init__(self, pipeline: VoicePipeline, runtime: Any, words: WordsLLM) -> None:
        self.pipeline = pipeline
        self.runtime = runtime
        self.llm = words
        self.events: list[dict[str, Any]] = []
        self.task_events: list[dict[str, Any]] = []  # this caller's row changes, any store
        self._watched: list[Any] = []
        runtime.listeners.append(lambda ev: self.events.append({"at": now(), **ev}))

    def watch_store(self, store: Any) -> None:
        """Record this caller's task events committed through ``store`` (the runner's store
        too, for background jobs)."""

        def observe(event: Any) -> None:
            if event.caller == self.runtime.caller:
                self.task_events.append(
                    {
                        "at": now(),
                        "task_id": event.task_id,
                        "tool": event.tool,
                        "status": event.status,
                        "note": event.note,
                    }
                )

        store.observers.append(observe)
        self._watched.append((store, observe))

    def _unwatch(self) -> None:
        for store, observe in self._watched:
            if observe in store.observers:
                store.observers.remove(observe)

    @property
    def session(self) -> Any:
        return self.pipeline.session

    @property
    def voice(self) -> CallerVoice:
        return self.pipeline.voice

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        *,
        store: Any,
        registry: Any,
        settings: Any,
        caller: str = "caller",
        watcher: Any = None,
        fallback: llm.LLM | None = None,
        acks: bool = True,
        ack_cache_dir: Any = None,
        thinking_sound: bool = True,
        listeners: Any = (),
        **pipeline_options: Any,
    ) -> AsyncIterator[VoiceCall]:
        from frontdesk.agents.acks import AckCache
        from frontdesk.agents.brain import OfflineBrain
        from frontdesk.agents.runtime import start_call

        words = WordsLLM(fallback=fallback or OfflineBrain.for_registry(registry))
        pipeline = voice_session(words, **pipeline_options)
        cache = None
        if acks:
            # the fake voice's clips never go to the real cache directory
            cache_dir = ack_cache_dir or tempfile.mkdtemp(prefix="frontdesk-acks-")
            cache = AckCache(pipeline.tts, cache_dir=cache_dir)
        runtime = await start_call(
            pipeline.session,
            store=store,
            registry=registry,
            settings=settings,
            caller=caller,
            watcher=watcher,
            acks=cache,
            audio=pipeline.background if thinking_sound else None,
            listeners=listeners,
        )
        call = cls(pipeline, runtime, words)
        call.watch_store(store)
        try:
            await call.idle()
            yield call
        finally:
            await pipeline.voice.aclose()
            with contextlib.suppress(Exception):
                await runtime.shutdown("hang-up")
            with contextlib.suppress(Exception):
                await pipeline.session.aclose()
            await words.aclose()
            call._unwatch()

    async def play(self, script: CallerScript) -> list[Utterance]:
        return await script.play(self.voice)

    async def say(self, text: str, seconds: float = 0.8, **kw: Any) -> Utterance:
        return self.voice.say(text, seconds, **kw)

    async def idle(self, timeout: float = 15.0, settle: float = 0.15) -> None:
        """Until the caller has said everything and the agent is quiet for ``settle`` s:
        nothing speaking, nothing queued, no tool running."""

        def quiet() -> bool:
            s = self.session
            return (
                self.voice.speaking is None
                and not self.voice._tasks
                and s.current_speech is None
                and s.agent_state in ("listening", "idle")
                and s.user_state != "speaking"
                and not self.pipeline.output.playing.is_set()
                and not self.runtime.inflight
            )

        async def wait() -> None:
            await self.voice.wait_quiet()
            calm_since: float | None = None
            while True:
                if quiet():
                    calm_since = calm_since or now()
                    if now() - calm_since >= settle:
                        return
                else:
                    calm_since = None
                await asyncio.sleep(0.02)

        await asyncio.wait_for(wait(), timeout)

    async def until(self, predicate: Any, timeout: float = 10.0) -> None:
        """Until ``predicate()`` holds (checked every 10 ms)."""

        async def wait() -> None:
            while not predicate():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(wait(), timeout)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


__all__ = ["CallerScript", "Line", "VoiceCall"]
