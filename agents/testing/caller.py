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
from frontdesk.agents.testing.mic import Clip, Microphone
from frontdesk.agents.testing.voice import CallerVoice, VoicePipeline, voice_session
from frontdesk.agents.testing.words import WordsLLM


@dataclass
class Line:
    what: str | Clip  # words for the timed voice, or a clip (its transcript, on the voice)
    seconds: float
    at: float | None  # None: right after the previous line


@dataclass
class CallerScript:
    lines: list[Line] = field(default_factory=list)

    def say(
        self, what: str | Clip, seconds: float | None = None, *, at: float | None = None
    ) -> CallerScript:
        """``what`` for ``seconds`` (a clip: its own length), ``at`` seconds after the
        script starts (default: after the line before)."""
        if seconds is None:
            seconds = what.duration if isinstance(what, Clip) else 0.8
        self.lines.append(Line(what, seconds, at))
        return self

    async def play(self, voice: CallerVoice | None, mic: Microphone | None = None) -> list[Any]:
        """Utterances (timed voice) or ``Played`` clips (microphone), one per line."""
        start = now()
        said: list[Any] = []
        for line in self.lines:
            if mic is not None:
                if not isinstance(line.what, Clip):
                    raise TypeError("a microphone plays clips, not text")
                at = start + line.at if line.at is not None else None
                said.append(mic.play(line.what, at=at))
                continue
            assert voice is not None
            if line.at is not None:
                delay = start + line.at - now()
                if delay > 0:
                    await asyncio.sleep(delay)
            text = line.what.transcript if isinstance(line.what, Clip) else line.what
            said.append(voice.say(text, line.seconds))
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
    def voice(self) -> CallerVoice | None:
        return self.pipeline.voice

    @property
    def mic(self) -> Microphone | None:
        return self.pipeline.mic

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
        mic: Microphone | None = None,
        vad: Any = None,
        **pipeline_options: Any,
    ) -> AsyncIterator[VoiceCall]:
        """A started call. With ``mic``, the caller is audio heard by ``vad`` (any
        ``vad.VAD``; Silero with production's defaults by default); otherwise timed text on
        the fake VAD (which models Silero's hangover) and STT. ``pipeline_options`` go to
        ``voice_session``."""
        from frontdesk.agents.acks import AckCache
        from frontdesk.agents.brain import OfflineBrain
        from frontdesk.agents.runtime import start_call

        words = WordsLLM(fallback=fallback or OfflineBrain.for_registry(registry))
        pipeline = voice_session(words, mic=mic, vad_=vad, **pipeline_options)
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
            if pipeline.voice is not None:
                await pipeline.voice.aclose()
            with contextlib.suppress(Exception):
                await runtime.shutdown("hang-up")
            with contextlib.suppress(Exception):
                await pipeline.session.aclose()
            await words.aclose()
            call._unwatch()

    async def play(self, script: CallerScript) -> list[Any]:
        return await script.play(self.voice, self.mic)

    async def say(self, what: str | Clip, seconds: float | None = None, **kw: Any) -> Any:
        """Say ``what`` now: an ``Utterance`` on the timed voice, a ``Played`` clip on the
        microphone."""
        [said] = await self.play(CallerScript().say(what, seconds, **kw))
        return said

    def caller_quiet(self) -> bool:
        """Everything asked of the caller has been said (and transcribed), and no turn of
        theirs is waiting to be committed."""
        if self.voice is not None:
            said = self.voice.speaking is None and not self.voice._tasks
        else:
            assert self.mic is not None
            said = not self.mic.busy and not getattr(self.pipeline.stt, "busy", False)
        speech = self.runtime.caller_speech
        return said and (speech is None or speech.quiet)

    async def idle(self, timeout: float = 15.0, settle: float = 0.15) -> None:
        """Until the caller has said everything, no turn of theirs is pending, and the agent
        is quiet for ``settle`` s: nothing speaking, nothing queued, no tool running."""

        def quiet() -> bool:
            s = self.session
            return (
                self.caller_quiet()
                and s.current_speech is None
                and s.agent_state in ("listening", "idle")
                and s.user_state != "speaking"
                and not self.pipeline.output.playing.is_set()
                and not self.runtime.inflight
            )

        async def wait() -> None:
            if self.voice is not None:
                await self.voice.wait_quiet()
            elif self.mic is not None:
                await self.mic.wait_quiet()
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
