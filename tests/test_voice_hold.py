"""What the caller's sounds and words do to a tool's result, on the voice pipeline at text speed
(issue 19). The fake VAD models Silero's silence hangover: after the caller stops it stays
"speaking" for 0.55 s and its speech duration keeps growing, as the real one's does, so a short
sound looks longer than the session's minimum interruption duration. Only words interrupt.

Assertions are about what happened and in what order, never about speed.
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

from frontdesk.agents.patterns import DISCARDED
from frontdesk.agents.runtime import HOLD_LINE
from frontdesk.agents.testing.caller import CallerScript

pytestmark = pytest.mark.usefixtures("no_dropped_turns")
__all__ = ["env", "no_dropped_turns", "voice_settings"]  # fixtures, used by name

BACKCHANNELS = ("mm-hm", "uh-huh", "yeah", "okay", "right", "sure")


def heard(call, text):
    return [h for h in call.pipeline.output.heard() if h.text == text]


def user_turns(call):
    return [e["text"] for e in call.of("user")]


async def test_a_sound_without_words_as_the_work_ends_holds_the_result_then_it_is_heard(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 0.8}, then="The probe is done.")
        # an "uh": longer than the minimum interruption once the hangover is counted, no words
        [uh] = await call.play(CallerScript().say("", 0.25, at=0.5))
        await call.idle()
        [row] = await env.store.list(caller="vic", tool="probe")
        assert row.status == "succeeded"
        [result] = heard(call, "The probe is done.")
        assert result.complete and result.started_at > uh.ends_at  # not over the caller
        assert user_turns(call) == ["desk please", "probe it"]  # the sound was no turn
        if call.of("result_held"):  # the work ended while the VAD still heard the caller
            assert call.of("result_released")


async def test_backchannels_neither_cancel_the_work_nor_become_turns(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 4.5}, then="The probe is done.")
        script = CallerScript()
        for word in BACKCHANNELS:
            script.say(word, 0.35)
        said = await call.play(script)
        await call.idle()
        [row] = await env.store.list(caller="vic", tool="probe")
        assert row.status == "succeeded" and voicekit.cleanups == []
        [result] = heard(call, "The probe is done.")
        assert result.complete and result.started_at > said[-1].ends_at
        assert user_turns(call) == ["desk please", "probe it"]
        asked = " ".join(str(m) for ctx in call.llm.requests for m in ctx.items).lower()
        assert not any(f"'{word}'" in asked for word in BACKCHANNELS)
        assert set(call.runtime.transcripts.dropped) == set(BACKCHANNELS)  # kept from LiveKit


async def test_words_after_a_held_result_discard_it(env):
    async with desk_call(env) as call:
        await ask(call, "probe it", "probe", {"seconds": 0.6})
        call.llm.script("no wait try neon", [{"say": "Neon it is."}])
        # a sound as the work ends holds the result; words right after it discard it
        await call.play(CallerScript().say("", 0.3, at=0.4).say("no wait try neon", 0.6))
        await call.idle()
        [row] = await env.store.list(caller="vic", tool="probe")
        assert row.status == "cancelled" and row.error == "interrupted by caller"
        assert stale_anywhere(call) == []
        [answer] = heard(call, "Neon it is.")
        assert answer.complete
        if row_event(call, "probe", "cancelled")["note"] == DISCARDED:
            assert call.of("result_held")  # held, then discarded: never spoken


async def test_a_backchannel_over_critical_work_gets_no_hold_line_and_no_turn(env):
    async with desk_call(env) as call:
        await ask(call, "save my booking", "save", {"what": "booking", "seconds": 1.2}, "Saved.")
        await call.play(CallerScript().say("uh-huh", 0.35, at=0.2))
        await call.idle()
        assert heard(call, HOLD_LINE) == []
        [result] = heard(call, "Saved.")
        assert result.complete
        assert user_turns(call) == ["desk please", "save my booking"]


async def test_the_critical_result_waits_for_the_caller_to_stop_and_their_words_are_answered(env):
    async with desk_call(env) as call:
        await ask(call, "save my booking", "save", {"what": "booking", "seconds": 0.5}, "Saved.")
        call.llm.script("and send me the receipt please", [{"say": "Receipt on its way."}])
        # still speaking when the work ends
        [talk] = await call.play(CallerScript().say("and send me the receipt please", 1.2, at=0.1))
        await call.idle()
        assert voicekit.done_at["save"] < talk.ends_at  # the work ended while they spoke
        [hold] = heard(call, HOLD_LINE)
        [result] = heard(call, "Saved.")
        [answer] = heard(call, "Receipt on its way.")
        assert talk.ends_at < hold.started_at < result.started_at  # nothing over the caller
        assert result.complete and answer.complete and result.ended_at <= answer.started_at
        assert voicekit.calls["save"] == 1


async def test_words_over_the_critical_result_are_answered_right_after_it(env):
    long_result = "Saved, your booking for two on Friday at eight is confirmed and paid in full."
    async with desk_call(env, words_per_second=8) as call:
        await ask(call, "save my booking", "save", {"what": "booking", "seconds": 0.3}, long_result)
        call.llm.script("can I add a cot", [{"say": "A cot is added."}])
        await call.until(lambda: long_result in call.pipeline.tts.texts())
        await call.until(lambda: call.pipeline.output.playing.is_set())
        [talk] = await call.play(CallerScript().say("can I add a cot", 0.5))
        await call.idle()
        [result] = heard(call, long_result)
        [answer] = heard(call, "A cot is added.")
        assert result.started_at < talk.at and talk.ends_at < result.ended_at  # over the result
        assert result.complete and result.ended_at <= answer.started_at and answer.complete
        assert "can I add a cot" in user_turns(call)


async def test_the_profiles_backchannels_replace_the_built_in_ones(voice_settings):
    import kit

    from frontdesk.agents.programs.simulate import Environment
    from frontdesk.core import host
    from frontdesk.core.profile import Profile, Voice

    profile = Profile(voice=Voice(backchannels=["genau", "ja"]))
    registry = host.load(
        voice_settings, extra=[("kit", kit), ("voicekit", voicekit)], profile=profile
    )
    environment = await Environment.open(voice_settings, registry)
    try:
        async with desk_call(environment) as call:
            await ask(call, "probe it", "probe", {"seconds": 1.5}, then="The probe is done.")
            await call.play(CallerScript().say("genau", 0.35, at=0.2))
            await call.idle()
            call.llm.script("mm-hm", [{"say": "Yes?"}])
            await ask(call, "probe again", "probe", {"seconds": 3.0})
            await call.play(CallerScript().say("mm-hm", 0.4, at=0.2))  # a word here
            await call.idle()
        first, second = sorted(
            await environment.store.list(caller="vic", tool="probe"), key=lambda t: t.id
        )
        assert first.status == "succeeded" and second.status == "cancelled"
        assert heard(call, "The probe is done.") and heard(call, "Yes?")
    finally:
        await environment.close()
