"""Real speech on the voice pipeline (issue 19): espeak-ng and sox clips (tests/audio, made by
make_clips.py) played in real time, 20 ms frames over room noise, through the real Silero VAD
with production's defaults, into ``start_call``. The minimum interruption is 0.3 s. These run in
real time, so they are few and short; tests/test_voice_hold.py covers the same cases at text
speed on a fake VAD that models Silero's hangover.

Assertions are about outcomes and order (rows, what was heard, turns), never about speed; the
barge-in latency from acoustic onset is measured in bench §10.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import voicekit
from voicekit import env, no_dropped_turns, stale_anywhere, voice_settings

from frontdesk.agents.runtime import HOLD_LINE
from frontdesk.agents.testing.caller import CallerScript, VoiceCall
from frontdesk.agents.testing.mic import Microphone, load_clips, silero_vad

pytestmark = pytest.mark.usefixtures("no_dropped_turns")
__all__ = ["env", "no_dropped_turns", "voice_settings"]  # fixtures, used by name

CLIPS = load_clips(Path(__file__).parent / "audio")


@pytest.fixture(scope="module")
def vad():
    return silero_vad()


@contextlib.asynccontextmanager
async def audio_call(env, vad, **options):
    """A call at the desk, the caller on a microphone in a quiet room. Requests are typed
    (``ask``); what happens while the work runs is audio."""
    async with VoiceCall.open(
        store=env.store,
        registry=env.registry,
        settings=env.settings,
        caller="ada",
        watcher=env.watcher,
        mic=Microphone(noise=CLIPS["room"]),
        vad=vad,
        **options,
    ) as call:
        call.watch_store(env.runner_store)
        call.llm.script("desk please", [{"tools": [{"transfer_to_desk": {}}]}, {"say": "Desk."}])
        call.session.generate_reply(user_input="desk please")
        await call.until(lambda: any(e["agent"] == "desk" for e in call.of("entered")), 30)
        await call.idle()
        yield call


async def ask(call, words, tool, args, then):
    call.llm.script(words, [{"tools": [{tool: args}]}, {"say": then}])
    call.session.generate_reply(user_input=words)
    await call.until(lambda: call.runtime.inflight)


def heard(call, text):
    return [h for h in call.pipeline.output.heard() if h.text == text]


def user_turns(call):
    return [e["text"] for e in call.of("user")]


async def test_voiced_sounds_and_a_cough_leave_the_lookup_running_and_its_result_heard(env, vad):
    async with audio_call(env, vad) as call:
        await ask(call, "probe it", "probe", {"seconds": 2.0}, "The probe is done.")
        # Silero hears "uh" as 0.32 s of speech (more than the minimum), and its hangover as
        # 0.55 s more; the last sound ends about when the work does
        script = CallerScript().say(CLIPS["uh"], at=0.2).say(CLIPS["hmm"], at=0.9)
        played = await call.play(script.say(CLIPS["cough_low"], at=1.5).say(CLIPS["uh_short"]))
        await call.idle(timeout=20)
        [row] = await env.store.list(caller="ada", tool="probe")
        assert row.status == "succeeded" and voicekit.cleanups == []
        [result] = heard(call, "The probe is done.")
        assert result.complete and result.started_at > played[-1].ends_due_at
        assert user_turns(call) == ["desk please", "probe it"]


async def test_backchannels_leave_the_lookup_running_and_start_no_turn(env, vad):
    async with audio_call(env, vad) as call:
        await ask(call, "probe it", "probe", {"seconds": 2.5}, "The probe is done.")
        names = ("mm_hm", "uh_huh_f", "okay", "yeah_f")
        played = await call.play(
            CallerScript()
            .say(CLIPS[names[0]], at=0.2)
            .say(CLIPS[names[1]])
            .say(CLIPS[names[2]])
            .say(CLIPS[names[3]])
        )
        await call.idle(timeout=20)
        [row] = await env.store.list(caller="ada", tool="probe")
        assert row.status == "succeeded"
        [result] = heard(call, "The probe is done.")
        assert result.complete and result.started_at > played[-1].ends_due_at
        assert user_turns(call) == ["desk please", "probe it"]
        assert {CLIPS[n].transcript for n in names} <= set(call.runtime.transcripts.dropped)


async def test_words_cancel_the_lookup_while_the_caller_is_still_speaking(env, vad):
    async with audio_call(env, vad) as call:
        await ask(call, "probe it", "probe", {"seconds": 4.0}, "STALE: here it is.")
        clip = CLIPS["wait_no_neon"]
        call.llm.script(clip.transcript, [{"say": "Neon it is."}])
        [words] = await call.play(CallerScript().say(clip, at=0.3))
        await call.idle(timeout=20)
        [row] = await env.store.list(caller="ada", tool="probe")
        assert row.status == "cancelled" and row.error == "interrupted by caller"
        cancelled = next(e for e in call.task_events if e["status"] == "cancelled")
        assert words.due_at < cancelled["at"] < words.ends_due_at  # not at their turn's commit
        assert stale_anywhere(call) == []
        [answer] = heard(call, "Neon it is.")
        assert answer.complete and answer.started_at > cancelled["at"]


async def test_words_over_critical_work_get_the_hold_line_then_the_result_then_an_answer(env, vad):
    async with audio_call(env, vad) as call:
        await ask(call, "pay it", "save", {"what": "payment", "seconds": 1.5}, "Paid.")
        clip = CLIPS["which_card"]
        call.llm.script(clip.transcript, [{"say": "The card ending 4242."}])
        [words] = await call.play(CallerScript().say(clip, at=0.1))
        await call.idle(timeout=20)
        [hold] = heard(call, HOLD_LINE)
        [result] = heard(call, "Paid.")
        [answer] = heard(call, "The card ending 4242.")
        assert words.ends_due_at < hold.started_at < result.started_at  # nothing over them
        assert result.complete and answer.complete and result.ended_at <= answer.started_at
        assert [r.status for r in await env.store.list(caller="ada", tool="save")] == ["succeeded"]


async def test_words_over_the_critical_result_are_answered_right_after_it(env, vad):
    said = "Paid, the invoice for March is settled and a receipt is on its way to you."
    async with audio_call(env, vad, words_per_second=8) as call:
        await ask(call, "pay it", "save", {"what": "payment", "seconds": 0.2}, said)
        clip = CLIPS["is_it_done"]
        call.llm.script(clip.transcript, [{"say": "Yes, all done."}])
        await call.until(lambda: said in call.pipeline.tts.texts())
        await call.until(lambda: call.pipeline.output.playing.is_set())
        [words] = await call.play(CallerScript().say(clip))
        await call.idle(timeout=20)
        [result] = heard(call, said)
        [answer] = heard(call, "Yes, all done.")
        assert result.started_at < words.due_at and words.ends_due_at < result.ended_at
        assert result.complete and answer.complete and result.ended_at <= answer.started_at
        assert clip.transcript in user_turns(call)
