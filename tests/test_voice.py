"""The patterns on a real voice AgentSession (fake VAD/STT/TTS with timed speech, a pausable
audio output), where the caller interrupts only by speaking: issue 13's six cases.

Durations are fractions of the issue's (the behaviour is the same). The session's minimum
interruption duration is 0.3 s; the caller's speech is longer than that unless it is a cough.
Assertions are about order (what happened before what) and what was heard, never speed.
"""

from __future__ import annotations

import pytest
import voicekit
from voicekit import (
    ask,
    desk_call,
    env,
    no_dropped_turns,
    row_event,
    stale_anywhere,
    voice_settings,
)

from frontdesk.agents.runtime import HOLD_LINE
from frontdesk.agents.testing.audio import overlap
from frontdesk.agents.testing.caller import CallerScript

pytestmark = pytest.mark.usefixtures("no_dropped_turns")
__all__ = ["env", "no_dropped_turns", "voice_settings"]  # fixtures, used by name


async def test_caller_speaking_briefly_cancels_interruptible_work_at_once(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 2.0})
        call.llm.script("wait no I meant neon", [{"say": "Sure, neon it is."}])
        [barge] = await call.play(CallerScript().say("wait no I meant neon", 0.6, at=0.3))
        await call.idle()
        cancelled = row_event(call, "probe", "cancelled")
        user_turn = next(e for e in call.of("user") if "neon" in e["text"])
        # cancelled while the caller was still speaking, not at their turn's commit
        assert barge.at < cancelled["at"] < barge.ends_at < user_turn["at"]
        [row] = await env.store.list(caller="vic", tool="probe")
        assert row.status == "cancelled" and row.error == "interrupted by caller"
        assert voicekit.cleanups == [f"probe:{row.id}"] and not voicekit.finished
        assert stale_anywhere(call) == []
        answer = next(h for h in call.pipeline.output.heard() if h.text == "Sure, neon it is.")
        assert answer.complete and answer.started_at > cancelled["at"]


async def test_caller_speaking_through_the_work_gets_no_stale_result(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 1.0})
        call.llm.script("and another thing entirely", [{"say": "Tell me more."}])
        await call.play(CallerScript().say("and another thing entirely", 1.2, at=0.3))
        await call.idle()
        [row] = await env.store.list(caller="vic", tool="probe")
        assert row.status == "cancelled" and row.result is None
        assert stale_anywhere(call) == []
        assert "Tell me more." in call.pipeline.output.heard_texts()


async def test_long_work_cancelled_when_caller_starts_and_the_thinking_sound_stops(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 4.0})
        await call.until(lambda: call.pipeline.background.playing)  # typing while it works
        call.llm.script("stop that", [{"say": "Stopped."}])
        [barge] = await call.play(CallerScript().say("stop that", 0.6))
        await call.idle()
        cancelled = row_event(call, "probe", "cancelled")
        user_turn = next(e for e in call.of("user") if "stop" in e["text"])
        assert barge.at < cancelled["at"] < barge.ends_at < user_turn["at"]
        assert not call.pipeline.background.playing
        assert all(end <= cancelled["at"] for _, end in call.pipeline.background.intervals)


async def test_a_cough_does_not_cancel_interruptible_work(env):
    # speech shorter than the session's minimum interruption duration, with no words
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 1.0}, then="The probe is done.")
        await call.play(CallerScript().say("", 0.15, at=0.3))
        await call.idle()
        [row] = await env.store.list(caller="vic", tool="probe")
        assert row.status == "succeeded"
        assert "The probe is done." in call.pipeline.output.heard_texts()


async def test_followup_waits_for_the_caller_and_is_synthesized_once(env):
    async with desk_call(env) as call:
        call.llm.script(
            "start the survey",
            [{"tools": [{"survey": {"seconds": 0.4}}]}, {"say": "Started it."}],
        )
        await call.play(CallerScript().say("start the survey", 0.3))
        await call.until(lambda: "Started it." in call.pipeline.output.heard_texts())
        call.llm.script("while that runs let me tell you about my trip", [{"say": "Lovely."}])
        [talk] = await call.play(
            CallerScript().say("while that runs let me tell you about my trip", 1.5)
        )
        await call.idle()
        await call.until(lambda: any(e["status"] == "succeeded" for e in call.task_events))
        await call.idle()
        [job] = await env.store.list(caller="vic", tool="survey")
        assert job.status == "succeeded" and job.delivered_at is not None
        done = row_event(call, "survey", "succeeded")
        assert talk.at < done["at"] < talk.ends_at  # it finished while the caller talked
        assert len([e for e in call.of("followup") if e["task_id"] == job.id]) == 1
        after = [s for s in call.pipeline.tts.syntheses if s.at > done["at"]]
        followups = [s for s in after if s.text != "Lovely."]
        assert len(followups) == 1, [s.text for s in after]
        [heard] = [h for h in call.pipeline.output.heard() if h.id == followups[0].id]
        assert heard.complete and heard.started_at > talk.ends_at
        delivered = next(e for e in call.task_events if (e["note"] or "").startswith("delivered"))
        assert delivered["at"] >= heard.ended_at


async def test_talking_over_critical_work_hears_the_result_then_an_answer(env):
    async with desk_call(env) as call:
        await ask(call, "save my booking", "save", {"what": "booking", "seconds": 1.5}, "Saved.")
        call.llm.script("is it done yet", [{"say": "Yes, all done."}])
        await call.play(CallerScript().say("is it done yet", 0.6, at=0.4))
        await call.idle()
        ended = row_event(call, "save", "succeeded")
        heard = call.pipeline.output.heard()
        [ack] = [h for h in heard if h.text == "Saving that now, one moment."]
        assert ack.started_at < ended["at"]  # never an ack after the work
        [hold] = [h for h in heard if h.text == HOLD_LINE]
        [result] = [h for h in heard if h.text == "Saved."]
        [answer] = [h for h in heard if h.text == "Yes, all done."]
        assert result.complete and answer.complete
        assert hold.started_at < result.started_at and result.ended_at <= answer.started_at
        assert voicekit.calls["save"] == 1 and voicekit.finished["save"] == 1
        assert [r.status for r in await env.store.list(caller="vic", tool="save")] == ["succeeded"]


async def test_thinking_sound_never_plays_under_an_ack_or_a_reply(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 1.5}, then="The probe is done.")
        await call.idle()
        ended = row_event(call, "probe", "succeeded")
        heard = call.pipeline.output.heard_texts()
        assert "Let me look that up for you." in heard and "The probe is done." in heard
        typing = call.pipeline.background.intervals
        assert typing, "the thinking sound should play while the work runs"
        assert overlap(typing, call.pipeline.output.intervals) == pytest.approx(0, abs=0.02)
        assert all(end <= ended["at"] for _, end in typing)


async def test_barge_in_follows_the_sessions_minimum_words(env):
    # min_interruption_words=3: two words are not a barge-in, however long they take to say
    async with desk_call(env, min_interruption_words=3) as call:
        await ask(call, "probe it", "probe", {"seconds": 3.0})
        call.llm.script("um okay", [{"say": "Go on."}])
        [short] = await call.play(CallerScript().say("um okay", 0.6, at=0.2))
        await short.ended
        assert not [e for e in call.task_events if e["status"] == "cancelled"]
        call.llm.script("no stop the probe now", [{"say": "Stopped."}])
        await call.idle()
        await ask(call, "probe again", "probe", {"seconds": 3.0})
        [real] = await call.play(CallerScript().say("no stop the probe now", 0.8, at=0.2))
        await call.idle()
        latest, _first = await env.store.list(caller="vic", tool="probe")
        # The real barge-in cancels the second probe while the caller is still speaking.
        [cancelled] = [
            e for e in call.task_events if e["task_id"] == latest.id and e["status"] == "cancelled"
        ]
        assert real.at < cancelled["at"] < real.ends_at
