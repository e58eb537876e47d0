"""§10 The voice pipeline: barge-in, acks and follow-ups on a real voice AgentSession.

The call runs on the voice test harness (frontdesk.agents.testing: fake VAD and STT fed by a
timed caller, a fake TTS, a pausable audio output) through ``start_call``, with the tools of
tests/voicekit.py and an embedded runner for background jobs. Clocks: the harness clock
(time.monotonic) for speech, rows (store observers) and audio frames alike.

- barge-in: the caller starts speaking over an interruptible tool -> its row is committed
  ``cancelled``; against ``runtime.interrupt()`` -> row committed. A barge-in needs words and
  the minimum interruption duration of speech (issue 19); the fake STT writes words every
  150 ms. Target: p99 <= the minimum interruption duration + 150 ms. The same on real audio,
  from the acoustic onset, is bench/voice_audio.py.
- ack: ``session.say`` of an ack (the moment the filler decides to speak) -> its first audio
  frame at the output, cached clip against synthesis by the (fake, zero-latency) TTS; a real
  provider adds its time to first byte to the uncached figure. Target: cached <= 20 ms.
- follow-ups: a background job finishes while the caller talks; syntheses per delivery.
  Target: exactly 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

from common import bench_settings, scratch, sqlite_url, summary

MIN_INTERRUPTION = 0.3  # the session's min_interruption_duration in this run


async def _desk(env: Any) -> Any:
    from frontdesk.agents.testing.caller import CallerScript, VoiceCall

    cm = VoiceCall.open(
        store=env.store,
        registry=env.registry,
        settings=env.settings,
        caller="bench",
        watcher=env.watcher,
        min_interruption_duration=MIN_INTERRUPTION,
    )
    call = await cm.__aenter__()
    call.watch_store(env.runner_store)
    call.llm.script("desk please", [{"tools": [{"transfer_to_desk": {}}]}, {"say": "Desk."}])
    await call.play(CallerScript().say("desk please", 0.3))
    await call.idle()
    return cm, call


async def _barge_trial(call: Any, n: int, by_speech: bool) -> float:
    words = f"probe number {n}"
    call.llm.script(words, [{"tools": [{"probe": {"seconds": 5.0}}]}, {"say": "STALE."}])
    call.llm.script(f"stop {n} now", [{"say": "Stopped."}])
    await call.say(words, 0.3)
    await call.until(lambda: call.runtime.inflight)
    await asyncio.sleep(0.2)
    seen = len(call.task_events)
    if by_speech:
        started = (await call.say(f"stop {n} now", 0.6)).at
    else:
        started = time.monotonic()
        await call.runtime.interrupt()

    def cancelled() -> dict[str, Any] | None:
        return next((e for e in call.task_events[seen:] if e["status"] == "cancelled"), None)

    await call.until(lambda: cancelled() is not None)
    at = cancelled()["at"]  # type: ignore[index]
    await call.idle()
    return at - started


async def _ack_trial(call: Any, cached: bool) -> float:
    text = "Let me look that up for you."
    output = call.pipeline.output
    frames = len(output.first_frame_at)
    start = time.monotonic()
    if cached:
        acks = call.runtime.acks
        clip = acks.cached(text) or await acks.clip(text)
        start = time.monotonic()
        call.session.say(text, audio=acks.frames(clip))
    else:
        call.session.say(text)
    await call.until(lambda: len(output.first_frame_at) > frames)
    first = output.first_frame_at[frames] - start
    await call.idle()
    return first


async def _followup_trial(call: Any, n: int) -> tuple[int, int]:
    words = f"start survey {n}"
    call.llm.script(words, [{"tools": [{"survey": {"seconds": 0.4}}]}, {"say": "Started."}])
    seen = len(call.task_events)
    await call.say(words, 0.3)
    await call.until(lambda: any(e["status"] == "queued" for e in call.task_events[seen:]))
    await call.until(lambda: "Started." in call.pipeline.output.heard_texts()[-1:])
    talk = f"let me tell you a long story number {n}"
    call.llm.script(talk, [{"say": "Lovely."}])
    seen_events, seen_synth = len(call.task_events), len(call.pipeline.tts.syntheses)
    await call.say(talk, 1.5)
    await call.until(
        lambda: any(
            (e["note"] or "").startswith("delivered") for e in call.task_events[seen_events:]
        ),
        timeout=20,
    )
    await call.idle()
    fresh = [s for s in call.pipeline.tts.syntheses[seen_synth:] if s.text != "Lovely."]
    return len(fresh), len(call.of("followup"))


async def voice_environment(dir_: Any, **overrides: Any) -> Any:
    """Store, plugins (tests/voicekit.py's desk) and an embedded runner in ``dir_``."""
    import voicekit

    from frontdesk.agents.programs.simulate import Environment
    from frontdesk.core import host

    values: dict[str, Any] = dict(
        thinking_after_seconds=0.4,
        followup_poll_seconds=0.05,
        runner_poll_seconds=0.05,
        cache_path=dir_ / "cache",
    )
    settings = bench_settings(sqlite_url(dir_ / "voice.db"), **{**values, **overrides})
    registry = host.load(settings, extra=[("voicekit", voicekit)])
    return await Environment.open(settings, registry)


async def run(quick: bool) -> dict[str, Any]:
    barges = 6 if quick else 20
    acks = 10 if quick else 30
    followups = 3 if quick else 8
    with scratch("voice-") as dir_:
        env = await voice_environment(dir_, ack_after_seconds=5.0)
        cm, call = await _desk(env)
        try:
            speech = [await _barge_trial(call, i, True) for i in range(barges)]
            api = [await _barge_trial(call, 100 + i, False) for i in range(barges)]
            cached = [await _ack_trial(call, True) for _ in range(acks)]
            uncached = [await _ack_trial(call, False) for _ in range(acks)]
            per_delivery = []
            offers = 0
            for i in range(followups):
                synth, offers = await _followup_trial(call, i)
                per_delivery.append(synth)
        finally:
            with contextlib.suppress(Exception):
                await cm.__aexit__(None, None, None)
            await env.close()
    barge = summary(speech, 1e3)
    cached_ms = summary(cached, 1e3)
    return {
        "min_interruption_ms": MIN_INTERRUPTION * 1e3,
        "barge_in_ms": barge,
        "interrupt_api_ms": summary(api, 1e3),
        "ack_cached_ms": cached_ms,
        "ack_uncached_ms": summary(uncached, 1e3),
        "syntheses_per_delivery": per_delivery,
        "followup_offers": offers,
        "deliveries": followups,
        "targets": {
            "barge_in_to_cancelled_row_p99_ms": {
                "value": barge.get("p99"),
                "target": f"<= {MIN_INTERRUPTION * 1e3 + 150:.0f}",
            },
            "cached_ack_to_first_frame_p99_ms": {"value": cached_ms.get("p99"), "target": "<= 20"},
            "syntheses_per_followup_delivery": {
                "value": statistics.mean(per_delivery) if per_delivery else None,
                "target": "1",
            },
        },
    }
