"""What the caller is doing with their voice, watched from the VAD, the STT and the session.

livekit-agents 1.8.9 marks a reply's generation done before it awaits the reply's tools, so
while a tool runs there is no current speech and barge-in by audio reaches nothing; the
tool's speech handle is interrupted only when the caller's turn is committed. ``CallerSpeech``
follows the caller itself and says:

- ``barge_in()``: a future that resolves when the caller *really* interrupts, which on real
  speech means words (DESIGN.md, "The four patterns"): a final transcript with enough words that
  are not backchannels, or an interim one once the VAD has heard ``min_duration`` of speech.
  Enough is the session's ``min_interruption_words``, at least one. A session without an STT
  is judged by speech duration alone, as LiveKit judges it then. A cough, an "uh" or an
  "mm-hm" never resolves it;
- ``released()``: waits while the caller may still be interrupting: speaking, words not yet
  committed as a turn, or less than the session's false-interruption timeout since they
  stopped. It is LiveKit's ``resume_false_interruption``, applied to a tool's held result;
- ``quiet``: the caller is not speaking and has no turn pending (spoken but not committed).

Speech duration comes from VAD inference events (``on_vad``, fed by ``HeardVAD``) *without*
the VAD's silence hangover: Silero keeps ``speaking`` true and ``speech_duration`` growing for
its ``min_silence_duration`` (0.55 s) after the sound ends, so a 0.15 s "uh" would otherwise
look like 0.7 s of speech. Transcripts come from the agents' STT node (``on_transcript``, fed by
``TranscriptGate``) before LiveKit sees them, because the gate may hold them back.

A text session emits none of these events, so there the caller is always quiet and never
barges in (text tests interrupt with ``session.interrupt()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from frontdesk.agents.backchannels import Backchannels

# After the caller stops, how long a transcript may still take to arrive, and a turn with
# words to be committed (beyond the maximum endpointing delay), before we stop waiting.
TURN_GRACE = 1.0
# LiveKit's default false-interruption timeout, for a session that has none set.
FALSE_INTERRUPTION_TIMEOUT = 2.0


def _clock() -> float:
    return time.monotonic()


class CallerSpeech:
    def __init__(self, session: Any, backchannels: Backchannels | None = None) -> None:
        self.session = session
        self.backchannels = backchannels or Backchannels()
        self.speaking = False
        self.ended_at: float | None = None  # monotonic: the VAD's last end of speech
        self.speech_duration = 0.0  # of the current speech, by the VAD, hangover excluded
        self.heard_vad = False  # VAD events arrive (see HeardVAD)
        self.spoken = 0  # utterances so far in which the caller said words (not backchannels)
        self._counted = False  # the current utterance is counted in ``spoken``
        self.real = False  # the caller's current words are a barge-in
        self._finals: list[str] = []  # final transcripts since the last committed turn
        self._interim = ""
        self._final_seen = False  # the words include a final transcript
        self._pending_until: float | None = None  # a turn may still be committed until then
        self.held = False  # the TranscriptGate holds words of theirs back from LiveKit
        self._waiters: list[asyncio.Future[float]] = []
        self._changed = asyncio.Event()
        session.on("user_state_changed", self._on_user_state)
        session.on("conversation_item_added", self._on_item)

    def close(self) -> None:
        for event, fn in (
            ("user_state_changed", self._on_user_state),
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
    def has_stt(self) -> bool:
        return getattr(self.session, "stt", None) is not None

    @property
    def words_needed(self) -> int:
        return max(1, int(self._interruption().get("min_words", 0) or 0))

    @property
    def false_interruption_timeout(self) -> float:
        value = self._interruption().get("false_interruption_timeout")
        return FALSE_INTERRUPTION_TIMEOUT if value is None else float(value)

    def _max_endpointing(self) -> float:
        with contextlib.suppress(Exception):
            return float(self.session.options.endpointing["max_delay"])
        return 3.0

    # -- what callers of this module ask -------------------------------------------------------

    @property
    def words(self) -> int:
        """Words (not backchannels) the caller has said since their last committed turn."""
        return self.backchannels.words(" ".join([*self._finals, self._interim]))

    @property
    def pending(self) -> bool:
        """A turn of theirs may still be committed."""
        if self.held:
            return True  # their words wait in the gate: a turn comes once they are passed on
        if self._pending_until is not None and _clock() > self._pending_until:
            self._pending_until = None
            self._finals, self._interim, self._final_seen = [], "", False
            self.real = False
        return self._pending_until is not None

    @property
    def quiet(self) -> bool:
        """Not speaking and no turn pending."""
        return not self.speaking and not self.pending

    def barge_in(self) -> asyncio.Future[float]:
        """Resolves (with the wall-clock time) when the caller really interrupts; at once if
        they already are."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if self.real:
            fut.set_result(time.time())
        else:
            self._waiters.append(fut)
        return fut

    def hold_remaining(self) -> float | None:
        """0 when nothing holds a result back; seconds still to wait after the caller
        stopped; None while the caller speaks or has words not yet committed."""
        if self.speaking or (self.pending and self.words):
            return None
        if self.ended_at is None:
            return 0.0
        return max(0.0, self.ended_at + self.false_interruption_timeout - _clock())

    async def released(self, limit: float) -> None:
        """Until nothing holds a result back (``hold_remaining()`` is 0), at most ``limit``
        seconds."""
        deadline = _clock() + limit
        while (remaining := self.hold_remaining()) != 0.0:
            timeout = deadline - _clock()
            if remaining is not None:
                timeout = min(timeout, remaining)
            if timeout <= 0:
                return
            await self.changed(timeout)

    async def changed(self, timeout: float | None = None) -> None:
        """Until anything about the caller changes (or ``timeout``)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # -- events ----------------------------------------------------------------------------------

    def _on_user_state(self, ev: Any) -> None:
        if ev.new_state == "speaking":
            self.pending  # noqa: B018  (drops words whose turn window has passed)
            self.speaking = True
            self.speech_duration = 0.0
            self._pending_until = None
            self._counted = False
        elif ev.old_state == "speaking":
            self.speaking = False
            self.ended_at = _clock()
            grace = self._max_endpointing() + TURN_GRACE if self.words else TURN_GRACE
            self._pending_until = self.ended_at + grace
        self._check()

    def on_transcript(self, ev: Any) -> None:
        """An STT event (interim or final transcript) as the STT sent it."""
        kind = getattr(getattr(ev, "type", None), "value", "")
        alternatives = getattr(ev, "alternatives", None) or []
        text = alternatives[0].text if alternatives else ""
        if kind == "final_transcript":
            if text:
                self._finals.append(text)
                self._final_seen = True
            self._interim = ""
        elif kind in ("interim_transcript", "preflight_transcript"):
            self._interim = text
        else:
            return
        if text and self.backchannels.words(text):
            if not self._counted:  # a late final belongs to the utterance it ends
                self.spoken += 1
                self._counted = True
            if not self.speaking:  # words after the VAD's end: a turn is on its way
                self._pending_until = _clock() + self._max_endpointing() + TURN_GRACE
        self._check()

    def passed_on(self) -> None:
        """The gate passed held words on to LiveKit: their turn is committed soon."""
        self.held = False
        self._pending_until = _clock() + self._max_endpointing() + TURN_GRACE
        self._poke()

    def on_vad(self, ev: Any) -> None:
        """A VAD event from any of the call's streams."""
        self.heard_vad = True
        kind = ev.type.value
        if kind == "inference_done" and ev.speaking:
            # Silero's speech_duration runs on through its silence hangover; the silence
            # accumulated so far is that hangover.
            true = float(ev.speech_duration) - float(ev.raw_accumulated_silence)
        elif kind in ("start_of_speech", "end_of_speech"):
            true = float(ev.speech_duration)  # both report speech only
        else:
            return
        if true > self.speech_duration:
            self.speech_duration = true
            self._check()

    def _on_item(self, ev: Any) -> None:
        if getattr(ev.item, "role", None) == "user":
            self._finals, self._interim, self._final_seen = [], "", False
            self._pending_until = None
            self.real = False
            self._poke()

    # -- deciding ----------------------------------------------------------------------------------

    def _is_real(self) -> bool:
        if not self.has_stt:
            # no transcripts to wait for: the session's duration rule, as LiveKit's
            return self.heard_vad and self.speaking and self.speech_duration >= self.min_duration
        if self.words < self.words_needed:
            return False  # a cough, an "uh", an "mm-hm": no words yet
        return self._final_seen or self.speech_duration >= self.min_duration or not self.heard_vad

    def _check(self) -> None:
        if not self.real and self._is_real():
            self.real = True
            waiters, self._waiters = self._waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(time.time())
        self._poke()

    def _poke(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
