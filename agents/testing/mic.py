"""The caller's side of a real-audio voice pipeline: recorded clips played into the session's
microphone in real time, heard by a real VAD (Silero by default), and an STT stand-in that
writes each clip's transcript when a streaming STT would.

- ``Clip``: 16 kHz mono PCM with the transcript an STT would return for it ("" for a cough);
  ``load_clips(dir)`` reads a folder of WAVs and its ``manifest.json`` (tests/audio/ has the
  project's, made by tests/audio/make_clips.py).
- ``Microphone``: a LiveKit ``AudioInput`` that yields 20 ms frames at the real-time rate, over
  silence or a looped room noise, with the clips mixed in where ``play`` put them. Each
  ``Played`` records when its first sample was due (the acoustic onset, on the harness clock)
  and when its frames went out. A consumer that falls behind gets the backlog at once, as from
  a room's jitter buffer.
- ``ClipSTT``: transcripts timed from the microphone, as a streaming STT sends them: interim
  transcripts with the words said so far (a word is written ``interim_delay`` after the middle
  of its sound; words share a clip's length by their letters), the final one ``final_delay``
  after the clip's last sample. Sounds with no transcript get none. Like a real STT it writes
  only what it was sent: a word whose audio reached no STT stream (LiveKit sends silence in its
  place while uninterruptible speech plays, with ``discard_audio_if_uninterruptible``) is not
  written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import wave
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import stt
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice.io import AudioInput

from frontdesk.agents.testing.audio import SAMPLE_RATE, now

FRAME_SECONDS = 0.02
FRAME = int(SAMPLE_RATE * FRAME_SECONDS)
ARRIVAL_SLACK = 0.3  # the longest a frame takes from the microphone to an STT stream


@dataclass(frozen=True)
class Clip:
    name: str
    samples: np.ndarray  # int16, mono, SAMPLE_RATE
    transcript: str = ""  # what an STT writes for it; "" for sounds without words
    kind: str = ""  # words, backchannel, voiced, noise, room (tests/audio/manifest.json)

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    @classmethod
    def load(cls, path: Path | str, *, transcript: str = "", kind: str = "") -> Clip:
        path = Path(path)
        with wave.open(str(path), "rb") as w:
            if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (SAMPLE_RATE, 1, 2):
                raise ValueError(f"{path}: need {SAMPLE_RATE} Hz mono 16-bit PCM")
            samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        return cls(path.stem, samples, transcript, kind)

    def gain(self, db: float) -> Clip:
        scaled = np.clip(self.samples.astype(np.float32) * 10 ** (db / 20), -32768, 32767)
        return Clip(self.name, scaled.astype(np.int16), self.transcript, self.kind)


def load_clips(directory: Path | str) -> dict[str, Clip]:
    """Every clip its ``manifest.json`` names: {name: Clip}."""
    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    return {
        name: Clip.load(directory / f"{name}.wav", transcript=e["transcript"], kind=e["kind"])
        for name, e in manifest.items()
    }


@dataclass
class Played:
    """One clip as the microphone played it. Times are on the harness clock."""

    clip: Clip
    onset: int  # sample index in the microphone's stream
    due_at: float = 0.0  # when its first sample was due: the acoustic onset
    sent_at: float | None = None  # when the frame holding its first sample went out
    ended_at: float | None = None  # when the frame holding its last sample went out
    started: asyncio.Future[None] = field(init=False)
    ended: asyncio.Future[None] = field(init=False)

    def __post_init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.started, self.ended = loop.create_future(), loop.create_future()

    @property
    def end(self) -> int:
        return self.onset + len(self.clip.samples)

    @property
    def ends_due_at(self) -> float:
        return self.due_at + self.clip.duration


class Microphone(AudioInput):
    """Real-time 20 ms frames: ``noise`` looped (or silence), with played clips mixed in."""

    def __init__(self, *, noise: Clip | None = None) -> None:
        super().__init__(label="frontdesk-microphone")
        self.noise = noise
        self.played: list[Played] = []
        self.listeners: list[Any] = []  # told of each clip's start and end (ClipSTT)
        self.t0: float | None = None  # harness time of sample 0
        self.position = 0  # samples sent so far
        self._last_end = 0

    def at(self, sample: int) -> float:
        """The harness time at which ``sample`` is due."""
        return (self.t0 if self.t0 is not None else now()) + sample / SAMPLE_RATE

    def play(self, clip: Clip, *, at: float | None = None) -> Played:
        """Play ``clip`` from harness time ``at`` (default: now), or when the clip before it
        ends (one mouth)."""
        t0 = self.t0 if self.t0 is not None else now()
        wanted = round(((at if at is not None else now()) - t0) * SAMPLE_RATE)
        onset = max(wanted, self.position, self._last_end)
        played = Played(clip, onset)
        played.due_at = t0 + onset / SAMPLE_RATE
        self._last_end = played.end
        self.played.append(played)
        return played

    @property
    def busy(self) -> bool:
        """A clip is still to be sent."""
        return any(p.ended_at is None for p in self.played)

    async def wait_quiet(self) -> None:
        while pending := [p.ended for p in self.played if not p.ended.done()]:
            await asyncio.wait(pending)

    async def __anext__(self) -> rtc.AudioFrame:
        if self.t0 is None:
            self.t0 = now()
            for p in self.played:  # asked for before the session listened
                p.due_at = self.t0 + p.onset / SAMPLE_RATE
        start = self.position
        due = self.t0 + (start + FRAME) / SAMPLE_RATE  # a frame is complete at its end
        if (wait := due - now()) > 0:
            await asyncio.sleep(wait)
        self.position = start + FRAME
        frame = self._mix(start)
        sent = now()
        for p in self.played:
            if p.sent_at is None and start <= p.onset < start + FRAME:
                p.sent_at = sent
                if not p.started.done():
                    p.started.set_result(None)
                for listener in self.listeners:
                    listener.clip_started(p)
            if p.ended_at is None and p.end <= start + FRAME:
                if p.sent_at is None:  # shorter than a frame and already started
                    p.sent_at = sent
                p.ended_at = sent
                for fut in (p.started, p.ended):
                    if not fut.done():
                        fut.set_result(None)
                for listener in self.listeners:
                    listener.clip_ended(p)
        return rtc.AudioFrame(frame.tobytes(), SAMPLE_RATE, 1, FRAME)

    def _mix(self, start: int) -> np.ndarray:
        out = np.zeros(FRAME, dtype=np.int32)
        if self.noise is not None and len(self.noise.samples):
            idx = (np.arange(start, start + FRAME) % len(self.noise.samples)).astype(np.int64)
            out += self.noise.samples[idx]
        for p in self.played:
            lo, hi = max(start, p.onset), min(start + FRAME, p.end)
            if lo < hi:
                out[lo - start : hi - start] += p.clip.samples[lo - p.onset : hi - p.onset]
        return np.clip(out, -32768, 32767).astype(np.int16)


class BroadcastSTT(stt.STT):
    """A streaming STT whose transcripts come from the test, not the audio: ``send`` gives
    one to every open stream (a handoff opens new ones). Streams show it each audio frame
    (``on_frame``)."""

    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=True))
        self.streams: set[_BroadcastStream] = set()
        self.streams_opened = 0

    def send(self, kind: stt.SpeechEventType, text: str) -> None:
        event = stt.SpeechEvent(type=kind, alternatives=[stt.SpeechData(text=text, language="en")])
        for stream in list(self.streams):
            with contextlib.suppress(Exception):  # a stream closing meanwhile
                stream.send(event)

    def on_frame(self, frame: rtc.AudioFrame) -> None:
        """An audio frame reached a stream."""

    async def _recognize_impl(self, buffer: Any, *, language: Any, conn_options: Any) -> Any:
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[stt.SpeechData("", "en")]
        )

    def stream(
        self, *, language: Any = None, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> stt.RecognizeStream:
        self.streams_opened += 1
        return _BroadcastStream(stt=self, conn_options=conn_options)


class _BroadcastStream(stt.RecognizeStream):
    def send(self, event: stt.SpeechEvent) -> None:
        self._event_ch.send_nowait(event)

    async def _run(self) -> None:
        owner: BroadcastSTT = self._stt  # type: ignore[assignment]
        owner.streams.add(self)
        try:
            async for frame in self._input_ch:
                if isinstance(frame, rtc.AudioFrame):
                    owner.on_frame(frame)
        finally:
            owner.streams.discard(self)


class ClipSTT(BroadcastSTT):
    """A streaming STT that knows what each clip says (its ``transcript``) and sends it as a
    streaming provider does, timed from the microphone."""

    def __init__(
        self,
        mic: Microphone,
        *,
        interim_delay: float = 0.25,
        interim_interval: float = 0.1,
        final_delay: float = 0.2,
    ) -> None:
        super().__init__()
        self.mic = mic
        self.interim_delay = interim_delay
        self.interim_interval = interim_interval
        self.final_delay = final_delay
        self.sent: list[tuple[float, str, str]] = []  # (harness time, interim|final, text)
        self.sound_at: deque[float] = deque(maxlen=6000)  # arrivals of frames with sound
        self._tasks: set[asyncio.Task[None]] = set()
        mic.listeners.append(self)

    @property
    def model(self) -> str:
        return "clips"

    @property
    def provider(self) -> str:
        return "frontdesk-testing"

    def clip_started(self, played: Played) -> None:
        if played.clip.transcript:
            task = asyncio.get_running_loop().create_task(self._transcribe(played))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def clip_ended(self, played: Played) -> None:
        pass

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def _sent_sound(self, start: float, end: float) -> bool:
        """Some frame with sound reached a stream between ``start`` and ``end`` (with slack
        for the trip through the session)."""
        return any(start <= t <= end + ARRIVAL_SLACK for t in self.sound_at)

    async def _transcribe(self, p: Played) -> None:
        words = p.clip.transcript.split()
        # each word takes its share of the clip, by letters
        edges = np.concatenate([[0], np.cumsum([len(w) for w in words])]) / sum(map(len, words))
        spans = [
            (p.due_at + p.clip.duration * a, p.due_at + p.clip.duration * b)
            for a, b in zip(edges[:-1], edges[1:], strict=True)
        ]
        written_at = [(a + b) / 2 + self.interim_delay for a, b in spans]
        shown: list[str] = []
        t = p.due_at + self.interim_delay
        final_at = p.ends_due_at + self.final_delay
        while t < final_at:
            await _sleep_until(t)
            visible = [
                w
                for w, (a, b), at in zip(words, spans, written_at, strict=True)
                if at <= now() and self._sent_sound(a, b)
            ]
            if len(visible) > len(shown):
                shown = visible
                self._send(stt.SpeechEventType.INTERIM_TRANSCRIPT, " ".join(shown))
            t += self.interim_interval
        await _sleep_until(final_at)
        heard = [w for w, (a, b) in zip(words, spans, strict=True) if self._sent_sound(a, b)]
        if heard:
            text = p.clip.transcript if len(heard) == len(words) else " ".join(heard)
            self._send(stt.SpeechEventType.FINAL_TRANSCRIPT, text)

    def _send(self, kind: stt.SpeechEventType, text: str) -> None:
        final = kind == stt.SpeechEventType.FINAL_TRANSCRIPT
        self.sent.append((now(), "final" if final else "interim", text))
        self.send(kind, text)

    def on_frame(self, frame: rtc.AudioFrame) -> None:
        # The words are the clips'; what matters is whether their audio arrived.
        if np.any(np.frombuffer(frame.data, dtype=np.int16)):
            self.sound_at.append(now())

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await super().aclose()


async def _sleep_until(t: float) -> None:
    if (delay := t - now()) > 0:
        await asyncio.sleep(delay)


def silero_vad() -> Any:
    """Silero VAD with production's defaults (what ``frontdesk start`` loads)."""
    from frontdesk.agents.provider_build import build_vad

    return build_vad()


__all__ = ["BroadcastSTT", "Clip", "ClipSTT", "Microphone", "Played", "load_clips", "silero_vad"]
