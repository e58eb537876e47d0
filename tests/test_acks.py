"""The ack cache: one synthesis per (voice, phrase), memory and disk, played with session.say."""

from __future__ import annotations

import asyncio
import math
import struct

import pytest
from livekit import rtc
from livekit.agents import APIConnectOptions, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

from frontdesk.agents.acks import AckCache, default_cache_dir, voice_of

pytestmark = pytest.mark.usefixtures("no_network")

RATE = 16000


def tone(ms: int, freq: float = 440.0) -> bytes:
    n = RATE * ms // 1000
    return b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * freq * i / RATE))) for i in range(n)
    )


class FakeTTS(tts.TTS):
    """A real livekit TTS whose ChunkedStream pushes a short generated tone."""

    def __init__(self, voice: str = "test-voice", ms: int = 300, fail: bool = False) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=RATE, num_channels=1
        )
        self.voice = voice
        self.ms = ms
        self.fail = fail
        self.requests: list[str] = []

    @property
    def model(self) -> str:
        return "fake-1"

    @property
    def provider(self) -> str:
        return "fake"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        self.requests.append(text)
        return _Stream(tts=self, input_text=text, conn_options=APIConnectOptions(max_retry=0))


class _Stream(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake: FakeTTS = self._tts  # type: ignore[assignment]
        await asyncio.sleep(0.01)  # a network round trip, so concurrent asks overlap
        if fake.fail:
            raise RuntimeError("tts down")
        output_emitter.initialize(
            request_id="r1", sample_rate=RATE, num_channels=1, mime_type="audio/pcm"
        )
        output_emitter.push(tone(fake.ms))
        output_emitter.flush()


class StandInSession:
    def __init__(self) -> None:
        self.said: list[tuple[str, list[rtc.AudioFrame] | None]] = []
        self._audio: list = []

    def say(self, text, *, audio=None, **kwargs):
        self.said.append((text, audio))
        return f"handle:{text}"


async def collect(frames) -> list[rtc.AudioFrame]:
    return [f async for f in frames]


async def test_one_synthesis_for_many_plays(tmp_path):
    fake = FakeTTS()
    cache = AckCache(fake, cache_dir=tmp_path)
    session = StandInSession()
    for _ in range(5):
        assert (
            await cache.say(session, "Let me pull that report for you.")
            == "handle:Let me pull that report for you."
        )
    assert fake.requests == ["Let me pull that report for you."] and cache.syntheses == 1
    assert len(session.said) == 5
    clip = await cache.clip("Let me pull that report for you.")
    assert clip.duration >= 0.3 and clip.pcm.startswith(tone(300))  # the emitter may pad
    frames = await collect(session.said[-1][1])
    assert all(isinstance(f, rtc.AudioFrame) and f.sample_rate == RATE for f in frames)
    assert {f.samples_per_channel for f in frames[:-1]} == {RATE // 10}  # 100 ms frames, so
    assert b"".join(bytes(f.data.cast("B")) for f in frames) == clip.pcm  # barge-in stops it fast


async def test_concurrent_first_plays_share_one_synthesis(tmp_path):
    fake = FakeTTS()
    cache = AckCache(fake, cache_dir=tmp_path)
    clips = await asyncio.gather(*(cache.clip("One moment.") for _ in range(10)))
    assert cache.syntheses == 1 and len({id(c) for c in clips}) == 1


async def test_disk_cache_is_reused_across_instances(tmp_path):
    first = FakeTTS()
    await AckCache(first, cache_dir=tmp_path).warm(["One moment.", "Checking now."])
    assert len(first.requests) == 2
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and all(f.endswith(".wav") and len(f) == 64 + 4 for f in files)

    original = await AckCache(first, cache_dir=tmp_path).clip("One moment.")  # from disk too
    second = FakeTTS()  # a new process: same voice, same phrases
    cache = AckCache(second, cache_dir=tmp_path)
    clip = await cache.clip("One moment.")
    assert second.requests == [] and cache.syntheses == 0 and len(first.requests) == 2
    assert clip == original and clip.sample_rate == RATE and clip.num_channels == 1


async def test_another_voice_is_synthesized_separately(tmp_path):
    a, b = FakeTTS(voice="ash"), FakeTTS(voice="coral")
    ca, cb = AckCache(a, cache_dir=tmp_path), AckCache(b, cache_dir=tmp_path)
    assert ca.key("One moment.") != cb.key("One moment.")
    await ca.clip("One moment.")
    await cb.clip("One moment.")
    assert a.requests == b.requests == ["One moment."]


def test_voice_of_reads_plugin_options():
    from livekit.plugins import elevenlabs, openai

    assert voice_of(openai.TTS(voice="coral", api_key="sk-dummy")) == "coral"
    assert voice_of(elevenlabs.TTS(voice_id="V42", api_key="el-dummy")) == "V42"
    assert voice_of(object()) == ""


async def test_torn_cache_file_is_resynthesized(tmp_path):
    fake = FakeTTS()
    cache = AckCache(fake, cache_dir=tmp_path)
    cache.path("One moment.").write_bytes(b"RIFF\x00garbage")
    clip = await cache.clip("One moment.")
    assert cache.syntheses == 1 and clip.pcm.startswith(tone(300))
    assert AckCache(FakeTTS(), cache_dir=tmp_path).path("One moment.").read_bytes()[:4] == b"RIFF"


async def test_failed_synthesis_falls_back_to_plain_say(tmp_path, caplog):
    cache = AckCache(FakeTTS(fail=True), cache_dir=tmp_path)
    session = StandInSession()
    assert await cache.say(session, "One moment.") == "handle:One moment."
    assert session.said == [("One moment.", None)]
    assert await cache.warm(["One moment."]) == 0  # logged, not raised
    assert not list(tmp_path.iterdir())


async def test_unwritable_cache_dir_still_plays(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = AckCache(FakeTTS(), cache_dir=blocker / "acks")
    session = StandInSession()
    await cache.say(session, "One moment.")
    await cache.say(session, "One moment.")
    assert cache.syntheses == 1  # memory still serves


def test_cache_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("FRONTDESK_CACHE_PATH", str(tmp_path))
    assert default_cache_dir() == tmp_path / "acks"
    monkeypatch.delenv("FRONTDESK_CACHE_PATH")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "frontdesk" / "acks"


async def test_plays_in_a_real_session(tmp_path):
    """session.say(text, audio=...) accepts the cached frames in a real AgentSession."""
    from livekit.agents import Agent, AgentSession

    from frontdesk.agents.testing import ScriptedLLM

    fake = FakeTTS(ms=100)
    cache = AckCache(fake, cache_dir=tmp_path)
    session = AgentSession(llm=ScriptedLLM(), tts=fake)
    await session.start(Agent(instructions="test"))
    try:
        handle = await cache.say(session, "One moment.")
        await asyncio.wait_for(handle.wait_for_playout(), 5)
        handle2 = await cache.say(session, "One moment.")
        await asyncio.wait_for(handle2.wait_for_playout(), 5)
    finally:
        await session.aclose()
    assert fake.requests == ["One moment."]
    said = [m.text_content for m in session.history.messages() if m.role == "assistant"]
    assert said.count("One moment.") == 2


@pytest.fixture(autouse=True)
def _no_home_cache(monkeypatch, tmp_path):
    # Nothing here may write to the real ~/.cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-default"))
