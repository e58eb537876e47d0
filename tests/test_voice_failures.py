"""A provider that fails, heard on a real voice session (fake VAD/STT/TTS, timed speech): the
caller hears the apology from the pre-synthesized clip, not from a fresh synthesis, and after
repeated failures a goodbye, once, played out before the call ends."""

from __future__ import annotations

import pytest
from livekit.agents import APIConnectionError, APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr
from livekit.agents.voice.agent_session import SessionConnectOptions
from voicekit import no_dropped_turns

from frontdesk.agents.programs.simulate import Environment
from frontdesk.agents.provider_failures import APOLOGY, GOODBYE, PHRASES
from frontdesk.agents.testing.caller import CallerScript, VoiceCall
from frontdesk.core import host

pytestmark = pytest.mark.usefixtures("no_dropped_turns")
__all__ = ["no_dropped_turns"]  # a fixture, used by name


def times_heard(output, text: str) -> int:
    """How many times a clip was played out in full. The harness records audio by synthesis,
    and a cached clip is one synthesis however often it plays, so count by time played."""
    return sum(int((h.played + 0.02) // h.duration) for h in output.heard() if h.text == text)


class DeadLLM(llm.LLM):
    """Every request fails as an unreachable server does."""

    @property
    def model(self) -> str:
        return "dead"

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict] = NOT_GIVEN,
    ) -> llm.LLMStream:
        return _DeadStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _DeadStream(llm.LLMStream):
    async def _run(self) -> None:
        raise APIConnectionError("Connection error.")


async def test_every_llm_down_the_caller_hears_the_cached_apology_then_a_goodbye(settings):
    settings = settings.model_copy(update={"max_provider_failures": 3})
    registry = host.load(settings)
    env = await Environment.open(settings, registry)
    no_retry = SessionConnectOptions(
        llm_conn_options=APIConnectOptions(max_retry=0, retry_interval=0.05, timeout=2)
    )
    try:
        async with VoiceCall.open(
            store=env.store,
            registry=registry,
            settings=settings,
            caller="fay",
            fallback=DeadLLM(),
            conn_options=no_retry,
        ) as call:
            # What the worker does at the start of a call: the phrases are synthesized ahead.
            await call.runtime.acks.warm(PHRASES)
            warmed = call.pipeline.tts.texts().count(APOLOGY)
            output = call.pipeline.output
            for n, words in enumerate(("hello there", "are you there"), start=1):
                await call.play(CallerScript().say(words, 0.4))
                # An errored turn leaves no reply to wait for: wait for the apology instead.
                await call.until(lambda n=n: times_heard(output, APOLOGY) >= n, 15)
                await call.until(lambda: not output.playing.is_set(), 15)
            await call.play(CallerScript().say("hello hello", 0.4))  # the third failure ends it
            # shut down by the guard: session_end comes after the call's end is recorded
            await call.until(lambda: call.of("session_end"), timeout=20)
            apologies = times_heard(output, APOLOGY)
            [goodbye] = [h for h in output.heard() if h.text == GOODBYE]
            failures = [e for e in call.events if e["type"] == "provider_failed"]
            synthesized = call.pipeline.tts.texts()
            session_id = call.runtime.session_id
            ended = (await env.store.get_call(session_id))["ended_at"]
    finally:
        await env.close()

    assert apologies == 2  # two failed turns, each apologised for in full
    assert goodbye.complete  # the third ends the call, after a goodbye heard whole
    assert len(failures) == 3 and {f["kind"] for f in failures} == {"llm"}
    # The apology came from the clip made ahead: the TTS was not asked for it again.
    assert warmed == 1 and synthesized.count(APOLOGY) == 1
    assert ended is not None  # the call was ended after the goodbye, not by the test
