"""The agent's side of a fake voice pipeline: a TTS whose audio length follows the text, an
audio output that plays in real time and can pause (as RoomIO's can), and a stand-in for
``BackgroundAudioPlayer`` (which needs a room).

Every synthesis gets an id, and each of its samples carries that id as its PCM value, so the
output knows which synthesis every frame came from, even when the audio was cached and
replayed (an ack clip) or split into frames differently. That is how ``FakeAudioOutput.heard``
says what the caller actually heard of each text: played in full, or cut off where.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from livekit import rtc
from livekit.agents import tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice.io import AudioOutput, AudioOutputCapabilities

SAMPLE_RATE = 16000
FRAME_SAMPLES = SAMPLE_RATE // 100  # 10 ms frames: an interruption cuts audio promptly


def now() -> float:
    """The harness clock (seconds, monotonic); every recorded time uses it."""
    return time.monotonic()


@dataclass
class Synthesis:
    id: int
    text: str
    duration: float
    at: float  # when the TTS was asked


@dataclass
class Heard:
    """One synthesis as the caller heard it."""

    id: int
    text: str
    duration: float  # of the synthesized audio
    played: float  # seconds actually played out
    started_at: float | None
    ended_at: float | None

    @property
    def complete(self) -> bool:
        return self.played >= self.duration - 0.02

    @property
    def words(self) -> str:
        """The words heard, in proportion to the audio played (a cut-off sentence is partial)."""
        words = self.text.split()
        if self.complete:
            return self.text
        share = self.played / self.duration if self.duration else 0.0
        return " ".join(words[: int(len(words) * share)])


class FakeTTS(tts.TTS):
    """A streaming TTS: ``words_per_second`` sets how long each text sounds. Records every
    synthesis (``syntheses``), including the one-off ones an ack cache asks for."""

    def __init__(self, *, words_per_second: float = 12.0, ttfb: float = 0.0) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True),
            sample_rate=SAMPLE_RATE,
            num_channels=1,
        )
        self.words_per_second = words_per_second
        self.ttfb = ttfb
        self.syntheses: list[Synthesis] = []

    @property
    def model(self) -> str:
        return "fake"

    @property
    def provider(self) -> str:
        return "frontdesk-testing"

    def texts(self) -> list[str]:
        return [s.text for s in self.syntheses]

    def by_id(self, synthesis_id: int) -> Synthesis | None:
        return next((s for s in self.syntheses if s.id == synthesis_id), None)

    def _record(self, text: str) -> Synthesis:
        words = max(1, len(text.split()))
        synthesis = Synthesis(len(self.syntheses) + 1, text, words / self.words_per_second, now())
        self.syntheses.append(synthesis)
        return synthesis

    async def _emit(self, emitter: tts.AudioEmitter, text: str) -> None:
        synthesis = self._record(text)
        if self.ttfb:
            await asyncio.sleep(self.ttfb)
        sample = min(synthesis.id, 32767).to_bytes(2, "little", signed=True)
        total = int(SAMPLE_RATE * synthesis.duration)
        for start in range(0, total, FRAME_SAMPLES):
            emitter.push(sample * min(FRAME_SAMPLES, total - start))
        await asyncio.sleep(0)

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _Chunked(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        return _Stream(tts=self, conn_options=conn_options)


class _Chunked(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner: FakeTTS = self._tts  # type: ignore[assignment]
        output_emitter.initialize(
            request_id=utils.shortuuid("fake_tts_"),
            sample_rate=SAMPLE_RATE,
            num_channels=1,
            mime_type="audio/pcm",
        )
        await owner._emit(output_emitter, self._input_text)
        output_emitter.flush()


class _Stream(tts.SynthesizeStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner: FakeTTS = self._tts  # type: ignore[assignment]
        output_emitter.initialize(
            request_id=utils.shortuuid("fake_tts_"),
            sample_rate=SAMPLE_RATE,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        text = ""
        async for data in self._input_ch:
            if isinstance(data, str):
                text += data
                continue
            if not text.strip():
                continue
            self._mark_started()
            output_emitter.start_segment(segment_id=utils.shortuuid("fake_segment_"))
            await owner._emit(output_emitter, text.strip())
            output_emitter.flush()
            text = ""


@dataclass
class _Segment:
    frames: list[tuple[float, float, int]] = field(default_factory=list)  # offset, length, id
    pushed: float = 0.0
    started_at: float | None = None  # playout clock (pauses excluded)
    paused_at: float | None = None
    paused_total: float = 0.0
    flushed: bool = False

    def played(self) -> float:
        if self.started_at is None:
            return 0.0
        end = self.paused_at if self.paused_at is not None else now()
        return min(self.pushed, end - self.started_at - self.paused_total)


class FakeAudioOutput(AudioOutput):
    """Plays captured audio in real time. With ``can_pause`` (the default, like RoomIO's
    output) LiveKit pauses it when the caller starts speaking and resumes it after a false
    interruption. Records what was heard (``heard``) and when audio was audible
    (``intervals``: (start, end) pairs on the harness clock)."""

    def __init__(self, tts_: FakeTTS | None = None, *, can_pause: bool = True) -> None:
        super().__init__(label="frontdesk-fake", capabilities=AudioOutputCapabilities(can_pause))
        self.tts = tts_
        self.intervals: list[tuple[float, float]] = []
        self.first_frame_at: list[float] = []  # when each segment's first frame was captured
        self._heard: dict[int, Heard] = {}
        self._segment = _Segment()
        self._finish: asyncio.TimerHandle | None = None
        self._open: float | None = None
        self.playing = asyncio.Event()  # set while audio is audible

    # -- what was heard ---------------------------------------------------------------------

    def heard(self) -> list[Heard]:
        return sorted(self._heard.values(), key=lambda h: h.started_at or 0.0)

    def heard_texts(self) -> list[str]:
        return [h.words for h in self.heard() if h.played > 0]

    def audible(self, at: float) -> bool:
        if self._open is not None and at >= self._open:
            return True
        return any(start <= at < end for start, end in self.intervals)

    def _audible(self, on: bool) -> None:
        t = now()
        if on and self._open is None:
            self._open = t
            self.playing.set()
        elif not on and self._open is not None:
            self.intervals.append((self._open, t))
            self._open = None
            self.playing.clear()

    def _account(self, played: float) -> None:
        seg = self._segment
        end_at = now()
        for offset, length, sid in seg.frames:
            if sid == 0:
                continue  # silence LiveKit pads with, not a synthesis
            heard = max(0.0, min(length, played - offset))
            entry = self._heard.get(sid)
            if entry is None:
                synth = self.tts.by_id(sid) if self.tts is not None else None
                text = synth.text if synth else f"<audio {sid}>"
                duration = synth.duration if synth else 0.0
                entry = self._heard[sid] = Heard(sid, text, duration, 0.0, None, None)
            if heard > 0:
                if seg.paused_total == 0 and seg.started_at is not None:
                    # playout ran without a pause: times follow from its start, however late
                    # the loop noticed the end
                    start = seg.started_at + offset
                    end = start + heard
                else:
                    start = end_at - (played - offset)
                    end = end_at - max(0.0, played - offset - length)
                if entry.started_at is None:
                    entry.started_at = start
                entry.played += heard
                entry.ended_at = end
            if entry.duration == 0.0:
                entry.duration = entry.played  # audio from no recorded synthesis
        self._segment = _Segment()

    # -- AudioOutput --------------------------------------------------------------------------

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        seg = self._segment
        if not seg.frames:
            self.first_frame_at.append(now())
        sid = int.from_bytes(bytes(frame.data.cast("B")[:2]), "little", signed=True)
        seg.frames.append((seg.pushed, frame.duration, sid))
        seg.pushed += frame.duration
        if seg.started_at is None and seg.paused_at is None:
            seg.started_at = now()
            self._audible(True)
            self.on_playback_started(created_at=time.time())
        elif seg.flushed:
            self._schedule_finish()

    def flush(self) -> None:
        super().flush()
        if not self._segment.pushed:
            return
        self._segment.flushed = True
        self._schedule_finish()

    def _schedule_finish(self) -> None:
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None
        seg = self._segment
        if seg.paused_at is not None:
            return  # at resume
        delay = max(0.0, seg.pushed - seg.played())
        self._finish = asyncio.get_running_loop().call_later(delay, self._finished)

    def _finished(self) -> None:
        self._finish = None
        pushed = self._segment.pushed
        self._account(pushed)
        self._audible(False)
        self.on_playback_finished(playback_position=pushed, interrupted=False)

    def clear_buffer(self) -> None:
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None
        if not self._segment.pushed:
            return
        position = self._segment.played()
        self._account(position)
        self._audible(False)
        self.on_playback_finished(playback_position=position, interrupted=True)

    def pause(self) -> None:
        super().pause()
        seg = self._segment
        if seg.paused_at is None:
            seg.paused_at = now()
            self._audible(False)
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None

    def resume(self) -> None:
        super().resume()
        seg = self._segment
        if seg.paused_at is not None:
            seg.paused_total += now() - seg.paused_at
            seg.paused_at = None
        if seg.pushed and seg.started_at is None:
            seg.started_at = now()
            self.on_playback_started(created_at=time.time())
        if seg.pushed:
            self._audible(True)
        if seg.flushed:
            self._schedule_finish()


class _Playing:
    def __init__(self, owner: FakeBackgroundAudio) -> None:
        self.owner = owner
        self.started_at = now()
        self.ended_at: float | None = None

    def stop(self) -> None:
        if self.ended_at is None:
            self.ended_at = now()
            self.owner.intervals.append((self.started_at, self.ended_at))

    def done(self) -> bool:
        return self.ended_at is not None


class FakeBackgroundAudio:
    """What ``BackgroundAudioPlayer`` offers the thinking sound (``play(clip, loop=True)``
    and ``handle.stop()``), recording when it played."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self.handles: list[_Playing] = []

    def play(self, audio: Any, *, loop: bool = False) -> _Playing:
        handle = _Playing(self)
        self.handles.append(handle)
        return handle

    @property
    def playing(self) -> bool:
        return any(not h.done() for h in self.handles)

    def all_intervals(self) -> list[tuple[float, float]]:
        """Closed intervals, plus any still playing up to now."""
        return [*self.intervals, *((h.started_at, now()) for h in self.handles if not h.done())]


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total seconds during which both sets of intervals are active."""
    total = 0.0
    for s1, e1 in a:
        for s2, e2 in b:
            total += max(0.0, min(e1, e2) - max(s1, s2))
    return total
