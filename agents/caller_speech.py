"""What the caller is doing with their voice, watched from the session's own events.

livekit-agents 1.8.9 marks a reply's generation done before it awaits the reply's tools, so
while a tool runs there is no current speech and barge-in by audio reaches nothing; the
tool's speech handle is interrupted only when the caller's turn is committed, up to the
endpointing delay after they stop. ``CallerSpeech`` follows the caller itself
(``user_state_changed``, ``user_input_transcribed``, ``conversation_item_added``) and says:

- ``barge_in()``: a future that resolves when the caller *really* starts speaking, by the
  session's own interruption settings: speech for at least ``min_duration`` seconds and, when
  an STT gives words and ``min_words`` is set, at least that many words. A cough does not;
- ``quiet``: the caller is not speaking and has no turn pending (spoken but not committed).

Speech duration is judged as LiveKit judges it, from VAD inference events (``on_vad``, fed by
``HeardVAD``, which department agents use as their VAD). A session without a VAD is judged
by its transcripts, as LiveKit does then.

A text session emits none of these events, so there the caller is always quiet and never
barges in (text tests interrupt with ``session.interrupt()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from livekit.agents.tokenize.basic import split_words

# After the caller stops, how long a turn may take to be committed before we stop waiting
# for it (a cough with no words never becomes a turn).
TURN_GRACE = 1.0


class CallerSpeech:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.speaking = False
        self.started_at = 0.0  # wall clock (time.time), as LiveKit's events are
        self.words = ""
        self._pending = False
        self._pending_until: float | None = None
        self._waiters: list[asyncio.Future[float]] = []
        self._verdicts: list[asyncio.Future[bool]] = []
        self.real = False  # the current speech has become a barge-in
        self.heard_vad = False  # VAD events arrive (see HeardVAD)
        self.speech_duration = 0.0  # of the current speech, by the VAD
        session.on("user_state_changed", self._on_user_state)
        session.on("user_input_transcribed", self._on_transcript)
        session.on("conversation_item_added", self._on_item)

    def close(self) -> None:
        for event, fn in (
            ("user_state_changed", self._on_user_state),
            ("user_input_transcribed", self._on_transcript),
            ("conversation_item_added", self._on_item),
        ):
            with contextlib.suppress(Exception):
                self.session.off(event, fn)

    # -- the session's settings ----------------------------------------------------------------

    def _interruption(self) -> dict[str, Any]:
        with contextlib.suppress(Exception):
            return dict(self.session.options.interruption)
        return {}

    @property
    def min_duration(self) -> float:
        return float(self._interruption().get("min_duration", 0.5) or 0.0)

    @property
    def min_words(self) -> int:
        if getattr(self.session, "stt", None) is None:
            return 0  # no transcripts to count
        return int(self._interruption().get("min_words", 0) or 0)

    def _max_endpointing(self) -> float:
        with contextlib.suppress(Exception):
            return float(self.session.options.endpointing["max_delay"])
        return 3.0

    # -- what callers of this module ask -------------------------------------------------------

    @property
    def quiet(self) -> bool:
        """Not speaking and no turn pending."""
        if self.speaking:
            return False
        if self._pending and self._pending_until is not None and time.time() > self._pending_until:
            self._pending = False
        return not self._pending

    def barge_in(self) -> asyncio.Future[float]:
        """Resolves (with the wall-clock time) when the caller really starts speaking; at once
        if they already are."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if self.real:
            fut.set_result(time.time())
            return fut
        self._waiters.append(fut)
        return fut

    async def verdict(self) -> bool:
        """For speech in progress: True once it is a barge-in, False if it ends before (a
        cough). Not speaking: False."""
        if self.real:
            return True
        if not self.speaking:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._verdicts.append(fut)
        return await fut

    # -- events ----------------------------------------------------------------------------------

    def _on_user_state(self, ev: Any) -> None:
        if ev.new_state == "speaking":
            self.speaking = True
            self.real = False
            self.words = ""
            self._pending, self._pending_until = True, None
            self.started_at = ev.created_at
            self.speech_duration = 0.0
            self._check()
        elif ev.old_state == "speaking":
            self.speaking = False
            self._pending_until = time.time() + self._max_endpointing() + TURN_GRACE
            self._settle(self.real)
            self.real = False

    def _on_transcript(self, ev: Any) -> None:
        text = getattr(ev, "transcript", "") or ""
        if text:
            self.words = text
            self._pending = True
        if self.speaking and not self.real:
            self._check()

    def on_vad(self, ev: Any) -> None:
        """A VAD event from any of the call's streams."""
        self.heard_vad = True
        if ev.type.value == "inference_done" and (ev.speaking or ev.raw_accumulated_silence == 0):
            self.speech_duration = max(self.speech_duration, float(ev.speech_duration))
            if self.speaking and not self.real:
                self._check()

    def _on_item(self, ev: Any) -> None:
        if getattr(ev.item, "role", None) == "user":
            self._pending, self._pending_until = False, None

    # -- deciding ----------------------------------------------------------------------------------

    def _check(self) -> None:
        if not self.speaking or self.real:
            return
        if self.heard_vad:
            if self.speech_duration < self.min_duration:
                return  # a cough, so far; the next inference event asks again
        elif not self.words:
            return  # no VAD: LiveKit too waits for words
        if self.min_words and len(split_words(self.words, split_character=True)) < self.min_words:
            return  # checked again at the next transcript
        self.real = True
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(time.time())
        self._settle(True)

    def _settle(self, real: bool) -> None:
        verdicts, self._verdicts = self._verdicts, []
        for fut in verdicts:
            if not fut.done():
                fut.set_result(real)
