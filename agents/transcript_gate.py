"""``TranscriptGate``: the caller's transcripts between the STT and LiveKit.

Department agents run their STT node through it (``Agent.stt_node``, a public override), so
every transcript is first shown to ``CallerSpeech`` and then:

- a **backchannel** alone ("mm-hm", "okay"; agents/backchannels.py) said while in-turn work
  runs goes no further: LiveKit would otherwise commit it as a turn, and a committed turn
  interrupts the running tool;
- while frontdesk's **uninterruptible speech** is due (critical work from its start until its
  result has been spoken, the hold line, the provider apology and goodbye), final transcripts
  wait here and are passed on once it has been said. LiveKit drops a turn committed while
  uninterruptible speech plays ("skipping reply to user input, current speech generation
  cannot be interrupted"), so the caller's words must not reach it before; afterwards they
  commit as a turn and are answered right after the result. Interim transcripts of that time
  are dropped (the final carries the words).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from livekit.agents import stt

from frontdesk.agents.backchannels import Backchannels
from frontdesk.agents.caller_speech import CallerSpeech

log = logging.getLogger("frontdesk.transcripts")

_TRANSCRIPTS = (
    stt.SpeechEventType.INTERIM_TRANSCRIPT,
    stt.SpeechEventType.PREFLIGHT_TRANSCRIPT,
    stt.SpeechEventType.FINAL_TRANSCRIPT,
)


class TranscriptGate:
    def __init__(self, speech: CallerSpeech, backchannels: Backchannels) -> None:
        self.speech = speech
        self.backchannels = backchannels
        self.busy = 0  # in-turn tools running (or holding their result)
        self.dropped: list[str] = []  # backchannels kept from LiveKit, for tests and logs
        self._holds: set[object] = set()
        self._protected: set[Any] = set()  # SpeechHandles of uninterruptible speech
        self._held: list[stt.SpeechEvent] = []
        self._outlets: list[asyncio.Queue[stt.SpeechEvent]] = []

    # -- what the call side tells the gate ---------------------------------------------------

    @property
    def holding(self) -> bool:
        return bool(self._holds) or any(not h.done() for h in self._protected)

    def hold(self, key: object) -> None:
        """Keep final transcripts back until ``release(key)`` (and every other hold)."""
        self._holds.add(key)

    def release(self, key: object) -> None:
        self._holds.discard(key)
        self._flush()

    def protect(self, handle: Any) -> Any:
        """Keep final transcripts back while ``handle`` (uninterruptible speech) is due."""
        self._protected.add(handle)
        handle.add_done_callback(self._protected_done)
        return handle

    def _protected_done(self, handle: Any) -> None:
        self._protected.discard(handle)
        self._flush()

    def _flush(self) -> None:
        if self.holding or not self._held or not self._outlets:
            return
        held, self._held = self._held, []
        log.debug("passing on %d held transcript(s)", len(held))
        for ev in held:
            self._outlets[-1].put_nowait(ev)  # the newest node: the active agent's
        self.speech.passed_on()

    # -- the STT node ----------------------------------------------------------------------------

    def _admit(self, ev: stt.SpeechEvent) -> bool:
        if ev.type not in _TRANSCRIPTS:
            return True
        with contextlib.suppress(Exception):  # watching must never break the call
            self.speech.on_transcript(ev)
        text = ev.alternatives[0].text if ev.alternatives else ""
        if text and (self.busy or self.holding) and self.backchannels.only(text):
            self.dropped.append(text)
            return False
        if self.holding:
            if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT and text:
                self._held.append(ev)
                self.speech.held = True
            return False
        return True

    async def node(self, events: AsyncIterable[stt.SpeechEvent]) -> AsyncIterator[stt.SpeechEvent]:
        """``events`` (an STT node's), gated; held transcripts come out here when released."""
        outlet: asyncio.Queue[stt.SpeechEvent] = asyncio.Queue()
        self._outlets.append(outlet)
        source = aiter(events)
        upstream: asyncio.Future[Any] | None = None
        released: asyncio.Future[Any] | None = None
        try:
            self._flush()
            while True:
                if upstream is None:
                    upstream = asyncio.ensure_future(anext(source))
                if released is None:
                    released = asyncio.ensure_future(outlet.get())
                await asyncio.wait([upstream, released], return_when=asyncio.FIRST_COMPLETED)
                if released.done():
                    yield released.result()
                    released = None
                    continue
                try:
                    ev = upstream.result()
                except StopAsyncIteration:
                    return
                upstream = None
                if self._admit(ev):
                    yield ev
        finally:
            self._outlets.remove(outlet)
            for fut in (upstream, released):
                if fut is not None and not fut.done():
                    fut.cancel()
                    with contextlib.suppress(BaseException):
                        await fut
            # held transcripts not yet passed on go to the next node (a handoff)
            while not outlet.empty():
                self._held.insert(0, outlet.get_nowait())
            with contextlib.suppress(Exception):
                await source.aclose()  # type: ignore[attr-defined]
