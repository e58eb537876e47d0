"""The caller's side of a fake voice pipeline, and a real voice ``AgentSession`` built on it.

``CallerVoice`` is the caller's mouth: ``say("book a table", seconds=1.2)`` plays an
utterance in real time, and every open VAD and STT stream hears it (a handoff opens new
streams, and the new agent hears the caller as the old one did):

- VAD: modelled on Silero's events. Start of speech ``vad_min_speech`` after the caller
  starts; an inference event every ``inference_interval``; and a silence hangover: for
  ``vad_min_silence`` (Silero's 0.55 s) after the caller stops, ``speaking`` stays true and
  ``speech_duration`` keeps growing (``raw_accumulated_silence`` says how much of it is
  silence), then the end of speech reports the true speech duration;
- STT: interim transcripts while the caller speaks (the words said so far, in proportion to
  the time), the final transcript ``stt_delay`` after the end.

LiveKit then does with these events exactly what it does in a room: barge-in by audio
activity, pausing the audio output, endpointing and committing the caller's turn.
``voice_session`` builds that session with explicit turn handling (on silent fake audio the
default turn detector never fires, so turns would otherwise commit only at the maximum
endpointing delay).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from livekit import rtc
from livekit.agents import AgentSession, llm, stt, utils, vad
from livekit.agents.voice.io import AudioInput

from frontdesk.agents.testing.audio import (
    SAMPLE_RATE,
    FakeAudioOutput,
    FakeBackgroundAudio,
    FakeTTS,
    now,
)
from frontdesk.agents.testing.mic import BroadcastSTT, ClipSTT, Microphone, silero_vad


@dataclass
class Utterance:
    text: str
    seconds: float
    at: float  # when the caller starts, on the harness clock
    ended: asyncio.Future[None] | None = None

    @property
    def ends_at(self) -> float:
        return self.at + self.seconds

    def words_by(self, t: float) -> str:
        words = self.text.split()
        if not words:
            return ""
        share = min(1.0, max(0.0, (t - self.at) / self.seconds)) if self.seconds else 1.0
        return " ".join(words[: max(1, round(len(words) * share))])


class CallerVoice:
    """Plays utterances to every open VAD and STT stream. Utterances queue: one that is
    asked for while another plays starts when it ends."""

    def __init__(
        self,
        *,
        vad_min_speech: float = 0.08,
        vad_min_silence: float = 0.55,
        inference_interval: float = 0.05,
        stt_delay: float = 0.1,
        interim_interval: float = 0.15,
    ) -> None:
        self.vad_min_speech = vad_min_speech
        self.vad_min_silence = vad_min_silence
        self.inference_interval = inference_interval
        self.stt_delay = stt_delay
        self.interim_interval = interim_interval
        self.utterances: list[Utterance] = []
        self.vad_streams: set[_VADStream] = set()
        self.stts: list[FakeSTT] = []
        self.speaking: Utterance | None = None  # as the VAD reports it
        self._tasks: set[asyncio.Task[None]] = set()
        self._last: asyncio.Task[None] | None = None

    def say(self, text: str, seconds: float = 1.0, *, delay: float = 0.0) -> Utterance:
        """Start saying ``text`` in ``delay`` seconds (after any utterance still playing).
        Empty ``text`` is a cough: speech to the VAD, no transcript."""
        loop = asyncio.get_running_loop()
        utterance = Utterance(text, seconds, now() + delay, loop.create_future())
        self.utterances.append(utterance)
        previous = self._last
        task = asyncio.create_task(self._play(utterance, previous), name="frontdesk.caller.say")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._last = task
        return utterance

    async def wait_quiet(self) -> None:
        """Until everything asked for has been said and transcribed."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- playing an utterance ------------------------------------------------------------------

    async def _play(self, u: Utterance, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        u.at = max(u.at, now())
        try:
            await self._sleep_until(u.at + self.vad_min_speech)
            self.speaking = u
            self._vad(vad.VADEventType.START_OF_SPEECH, u)
            next_interim = u.at + self.interim_interval
            while now() < u.ends_at:
                await asyncio.sleep(min(self.inference_interval, max(0.0, u.ends_at - now())))
                self._vad(vad.VADEventType.INFERENCE_DONE, u)
                if now() >= next_interim and now() < u.ends_at:
                    self._stt(stt.SpeechEventType.INTERIM_TRANSCRIPT, u.words_by(now()))
                    next_interim += self.interim_interval
            final_at = u.ends_at + self.stt_delay
            eos_at = u.ends_at + self.vad_min_silence
            sent_final = False
            while now() < eos_at:
                await asyncio.sleep(min(self.inference_interval, max(0.0, eos_at - now())))
                if not sent_final and now() >= final_at:
                    self._stt(stt.SpeechEventType.FINAL_TRANSCRIPT, u.text)
                    sent_final = True
                if now() < eos_at:
                    self._vad(vad.VADEventType.INFERENCE_DONE, u)
            self._vad(vad.VADEventType.END_OF_SPEECH, u)
            self.speaking = None
            if not sent_final:
                await self._sleep_until(final_at)
                self._stt(stt.SpeechEventType.FINAL_TRANSCRIPT, u.text)
        finally:
            self.speaking = None
            if u.ended is not None and not u.ended.done():
                u.ended.set_result(None)

    @staticmethod
    async def _sleep_until(t: float) -> None:
        delay = t - now()
        if delay > 0:
            await asyncio.sleep(delay)

    def _vad(self, kind: vad.VADEventType, u: Utterance) -> None:
        t = now()
        talking = t < u.ends_at
        silence = 0.0 if talking else t - u.ends_at  # the hangover so far
        end = kind == vad.VADEventType.END_OF_SPEECH
        event = vad.VADEvent(
            type=kind,
            samples_index=int(t * SAMPLE_RATE),
            timestamp=t,
            # as Silero's: grows through the hangover; the end of speech reports speech only
            speech_duration=(min(t, u.ends_at) if end else t) - u.at,
            silence_duration=silence if end else 0.0,
            speaking=not end,
            raw_accumulated_speech=t - u.at if talking else 0.0,
            raw_accumulated_silence=silence,
            probability=1.0 if talking else 0.0,
        )
        for stream in list(self.vad_streams):
            stream.send(event)

    def _stt(self, kind: stt.SpeechEventType, text: str) -> None:
        if not text:
            return  # a cough or a click: the VAD hears it, the STT has no words for it
        for fake in self.stts:
            fake.send(kind, text)


class FakeVAD(vad.VAD):
    def __init__(self, voice: CallerVoice) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=voice.inference_interval))
        self.voice = voice
        self.streams_opened = 0

    def stream(self) -> vad.VADStream:
        self.streams_opened += 1
        return _VADStream(self)


class _VADStream(vad.VADStream):
    def __init__(self, owner: FakeVAD) -> None:
        super().__init__(owner)
        self._voice = owner.voice

    def send(self, event: vad.VADEvent) -> None:
        with contextlib.suppress(Exception):  # a stream closing meanwhile
            self._event_ch.send_nowait(event)

    async def _main_task(self) -> None:
        self._voice.vad_streams.add(self)
        try:
            if (u := self._voice.speaking) is not None:  # opened mid-utterance (a handoff)
                self._voice._vad(vad.VADEventType.START_OF_SPEECH, u)
            async for _ in self._input_ch:
                pass
        finally:
            self._voice.vad_streams.discard(self)


class FakeSTT(BroadcastSTT):
    """The STT the timed voice speaks through (``CallerVoice`` sends it the words)."""

    def __init__(self, voice: CallerVoice) -> None:
        super().__init__()
        self.voice = voice
        voice.stts.append(self)


class SilentAudioInput(AudioInput):
    """The room's microphone track: one frame of silence, then nothing (the fake VAD and STT
    do not need audio, only a live input so LiveKit opens their streams)."""

    def __init__(self) -> None:
        super().__init__(label="frontdesk-fake")
        self._ch = utils.aio.Chan[rtc.AudioFrame]()
        samples = SAMPLE_RATE // 10
        self._ch.send_nowait(
            rtc.AudioFrame(b"\x00\x00" * samples, SAMPLE_RATE, 1, samples_per_channel=samples)
        )

    async def __anext__(self) -> rtc.AudioFrame:
        return await self._ch.__anext__()


@dataclass
class VoicePipeline:
    """Everything a voice test inspects: the caller's voice (timed text on the fake VAD and
    STT) or microphone (clips through a real VAD), the fakes, the session."""

    voice: CallerVoice | None
    vad: vad.VAD
    stt: stt.STT
    tts: FakeTTS
    output: FakeAudioOutput
    background: FakeBackgroundAudio
    session: AgentSession
    mic: Microphone | None = None


def voice_session(
    llm_: llm.LLM,
    *,
    voice: CallerVoice | None = None,
    mic: Microphone | None = None,
    vad_: vad.VAD | None = None,
    words_per_second: float = 25.0,
    min_interruption_duration: float = 0.3,
    min_interruption_words: int = 0,
    min_endpointing_delay: float = 0.2,
    max_endpointing_delay: float = 1.0,
    false_interruption_timeout: float = 0.6,
    discard_audio_if_uninterruptible: bool = False,
    can_pause: bool = True,
    **session_kwargs: Any,
) -> VoicePipeline:
    """A real voice ``AgentSession`` with its audio input and output set (start it as usual).

    Without ``mic``, the caller is timed text (``voice``) on the fake VAD and STT. With
    ``mic`` (a ``Microphone``), the caller is audio: ``vad_`` (any ``vad.VAD``; Silero with
    production's defaults when omitted) hears it, and a ``ClipSTT`` writes the clips'
    transcripts. Turn detection is VAD, so turns commit ``min_endpointing_delay`` after the
    VAD's end of speech, as with a working turn detector."""
    fake_tts = FakeTTS(words_per_second=words_per_second)
    audio_in: AudioInput
    if mic is not None:
        voice = None
        the_vad: vad.VAD = vad_ if vad_ is not None else silero_vad()
        the_stt: stt.STT = ClipSTT(mic)
        audio_in = mic
    else:
        voice = voice or CallerVoice()
        the_vad, the_stt, audio_in = FakeVAD(voice), FakeSTT(voice), SilentAudioInput()
    session_kwargs.setdefault("aec_warmup_duration", None)
    # At close LiveKit waits this long for a last transcript; the fake caller has none.
    session_kwargs.setdefault("session_close_transcript_timeout", 0.05)
    turn_handling: dict[str, Any] = {
        "turn_detection": "vad",
        "endpointing": {"min_delay": min_endpointing_delay, "max_delay": max_endpointing_delay},
        "interruption": {
            "mode": "vad",
            "min_duration": min_interruption_duration,
            "min_words": min_interruption_words,
            "false_interruption_timeout": false_interruption_timeout,
            "resume_false_interruption": True,
            # as production's sessions (frontdesk.agents.provider_build.VOICE_TURN_HANDLING)
            "discard_audio_if_uninterruptible": discard_audio_if_uninterruptible,
        },
    }
    session: AgentSession = AgentSession(
        vad=the_vad,
        stt=the_stt,
        llm=llm_,
        tts=fake_tts,
        turn_handling=turn_handling,  # type: ignore[arg-type]
        **session_kwargs,
    )
    output = FakeAudioOutput(fake_tts, can_pause=can_pause)
    session.input.audio = audio_in
    session.output.audio = output
    return VoicePipeline(
        voice, the_vad, the_stt, fake_tts, output, FakeBackgroundAudio(), session, mic
    )


__all__ = [
    "CallerVoice",
    "FakeSTT",
    "FakeVAD",
    "SilentAudioInput",
    "Utterance",
    "VoicePipeline",
    "voice_session",
]
