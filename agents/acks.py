"""Acknowledgement audio without latency: each (voice, phrase) is synthesized once, then replayed.

A tool's ``ack`` ("Let me pull that report for you") is said while the work runs, so it must
start at once; a TTS round trip is the latency we are hiding. ``AckCache`` keeps the PCM in
memory and on disk (one WAV per phrase, named by sha256 of provider, model, voice and text), so
a phrase costs one synthesis per voice across every call and every worker process that shares
the cache directory, and playback is ``session.say(text, audio=<frames>)``.

The directory is ``FRONTDESK_CACHE_PATH``/acks, else ``$XDG_CACHE_HOME/frontdesk/acks``, else
``~/.cache/frontdesk/acks``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
import wave
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("frontdesk.acks")

SAMPLE_WIDTH = 2  # rtc.AudioFrame is 16-bit signed PCM


@dataclass(frozen=True)
class Clip:
    """Raw interleaved int16 PCM."""

    pcm: bytes
    sample_rate: int
    num_channels: int

    @property
    def samples_per_channel(self) -> int:
        return len(self.pcm) // (SAMPLE_WIDTH * self.num_channels)

    @property
    def duration(self) -> float:
        return self.samples_per_channel / self.sample_rate if self.sample_rate else 0.0


def default_cache_dir(settings: Any = None) -> Path:
    configured = getattr(settings, "cache_path", None) or os.environ.get("FRONTDESK_CACHE_PATH")
    if configured:
        return Path(configured).expanduser() / "acks"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "frontdesk" / "acks"


def voice_of(tts: Any) -> str:
    """A stable description of the voice a TTS speaks with (plugins keep it in ``_opts``)."""
    for holder in (getattr(tts, "_opts", None), tts):
        for attr in ("voice_id", "voice"):
            value = getattr(holder, attr, None)
            if value is None or callable(value):
                continue
            name = getattr(value, "name", None)  # google's VoiceSelectionParams
            return str(name if isinstance(name, str) and name else value)
    return ""


class AckCache:
    """Synthesize once, play many times. One instance per TTS (per voice)."""

    def __init__(
        self,
        tts: Any,
        *,
        cache_dir: Path | str | None = None,
        voice: str | None = None,
        chunk_ms: int = 100,
    ) -> None:
        self.tts = tts
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.voice = voice if voice is not None else voice_of(tts)
        self.chunk_ms = chunk_ms
        self.syntheses = 0  # how many times the TTS was actually asked
        self._memory: dict[str, Clip] = {}
        self._pending: dict[str, asyncio.Future[Clip]] = {}

    def key(self, text: str) -> str:
        provider = getattr(self.tts, "provider", "") or type(self.tts).__name__
        model = getattr(self.tts, "model", "") or ""
        ident = "\x1f".join((str(provider), str(model), self.voice, text.strip()))
        return hashlib.sha256(ident.encode()).hexdigest()

    def path(self, text: str) -> Path:
        return self.cache_dir / f"{self.key(text)}.wav"

    def cached(self, text: str) -> Clip | None:
        """The phrase's audio if it is already in memory (no I/O: usable from sync callbacks)."""
        return self._memory.get(self.key(text))

    async def clip(self, text: str) -> Clip:
        """The phrase's audio: from memory, else disk, else one synthesis shared by everyone
        who asks meanwhile."""
        key = self.key(text)
        if (hit := self._memory.get(key)) is not None:
            return hit
        if (pending := self._pending.get(key)) is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[Clip] = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        try:
            clip = await asyncio.to_thread(_read_wav, self.path(text))
            if clip is None:
                clip = await self._synthesize(text)
                await asyncio.to_thread(_write_wav, self.path(text), clip)
            self._memory[key] = clip
            fut.set_result(clip)
            return clip
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except Exception as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it, nobody else should log it
            raise
        finally:
            del self._pending[key]

    async def _synthesize(self, text: str) -> Clip:
        from livekit import rtc

        self.syntheses += 1
        frames = []
        async with self.tts.synthesize(text.strip()) as stream:
            async for ev in stream:
                frames.append(ev.frame)
        if not frames:
            raise RuntimeError(f"TTS returned no audio for {text!r}")
        frame = rtc.combine_audio_frames(frames)
        return Clip(bytes(frame.data.cast("B")), frame.sample_rate, frame.num_channels)

    async def warm(self, texts: Iterable[str]) -> int:
        """Have these phrases ready (call at session start); failures are logged, not raised,
        because a missing ack only costs latency. Returns how many are ready."""
        ready = 0
        for text in dict.fromkeys(t for t in texts if t and t.strip()):
            try:
                await self.clip(text)
                ready += 1
            except Exception as exc:
                log.warning("acks: could not prepare %r: %r", text, exc)
        return ready

    async def frames(self, clip: Clip) -> AsyncIterator[Any]:
        """The clip as short ``rtc.AudioFrame``s, so an interruption stops it promptly."""
        from livekit import rtc

        step = max(1, clip.sample_rate * self.chunk_ms // 1000) * SAMPLE_WIDTH * clip.num_channels
        for start in range(0, len(clip.pcm), step):
            chunk = clip.pcm[start : start + step]
            yield rtc.AudioFrame(
                data=chunk,
                sample_rate=clip.sample_rate,
                num_channels=clip.num_channels,
                samples_per_channel=len(chunk) // (SAMPLE_WIDTH * clip.num_channels),
            )

    async def say(self, session: Any, text: str, **say_kwargs: Any) -> Any:
        """Say ``text`` with its cached audio; without a TTS, or if synthesis fails, it is said
        the ordinary way. Returns the SpeechHandle."""
        if self.tts is None:
            return session.say(text, **say_kwargs)
        try:
            clip = await self.clip(text)
        except Exception as exc:
            log.warning("acks: %r not cached (%r); speaking it directly", text, exc)
            return session.say(text, **say_kwargs)
        return session.say(text, audio=self.frames(clip), **say_kwargs)


def _read_wav(path: Path) -> Clip | None:
    try:
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() != SAMPLE_WIDTH:
                return None
            return Clip(w.readframes(w.getnframes()), w.getframerate(), w.getnchannels())
    except (OSError, wave.Error, EOFError):
        return None  # absent, unreadable or torn: synthesize again


def _write_wav(path: Path, clip: Clip) -> None:
    # Write then rename, so another process never reads half a file.
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh, wave.open(fh, "wb") as w:
            w.setnchannels(clip.num_channels)
            w.setsampwidth(SAMPLE_WIDTH)
            w.setframerate(clip.sample_rate)
            w.writeframes(clip.pcm)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache only costs a synthesis next time
        log.warning("acks: cannot write %s: %r", path, exc)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


__all__ = ["AckCache", "Clip", "default_cache_dir", "voice_of"]
