"""``HeardVAD``: the session's VAD, with every event also shown to frontdesk.

LiveKit decides that the caller is really speaking from VAD inference events (speech of at
least the session's ``min_interruption_duration``), but it does not publish them, and while a
tool runs it has no speech to interrupt. Department agents are given this wrapper as their
``vad`` (a public ``Agent`` argument), so ``CallerSpeech`` sees the same events LiveKit
acts on, from every stream (each handoff opens a new one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from livekit import rtc
from livekit.agents import vad


class HeardVAD(vad.VAD):
    def __init__(self, inner: vad.VAD, on_event: Callable[[vad.VADEvent], None]) -> None:
        super().__init__(capabilities=inner.capabilities)
        self.inner = inner
        self.on_event = on_event

    @property
    def model(self) -> str:
        return getattr(self.inner, "model", "unknown")

    @property
    def provider(self) -> str:
        return getattr(self.inner, "provider", "unknown")

    def stream(self) -> vad.VADStream:
        return _HeardStream(self)


class _HeardStream(vad.VADStream):
    async def _main_task(self) -> None:
        owner: HeardVAD = self._vad  # type: ignore[assignment]
        inner = owner.inner.stream()

        async def forward() -> None:
            async for item in self._input_ch:
                if isinstance(item, rtc.AudioFrame):
                    inner.push_frame(item)
                else:
                    inner.flush()
            inner.end_input()

        feeding = asyncio.create_task(forward(), name="frontdesk.heard_vad.forward")
        try:
            async for ev in inner:
                with contextlib.suppress(Exception):  # watching must never break the call
                    owner.on_event(ev)
                self._event_ch.send_nowait(ev)
        finally:
            feeding.cancel()
            with contextlib.suppress(BaseException):
                await feeding
            await inner.aclose()
