"""``DepartmentAgent``: a plain LiveKit Agent built from a registered ``Department``."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

from livekit import rtc
from livekit.agents import Agent, ModelSettings, llm, stt

from frontdesk.agents.handoff import transfer_tools
from frontdesk.agents.patterns import function_tool_for
from frontdesk.core.department import Department

if TYPE_CHECKING:
    from frontdesk.agents.call import Call

COMMON = """
You work at {business}, answering callers by phone or web. Keep answers short and
speakable: one or two sentences, no lists or markdown. Never invent facts a tool did not give you. If a
request belongs to another desk, transfer the caller with the matching transfer tool instead
of answering it yourself. If a tool says something failed, tell the caller plainly.
"""


class DepartmentAgent(Agent):
    def __init__(
        self,
        spec: Department,
        runtime: Call,
        *,
        chat_ctx: llm.ChatContext | None = None,
        arrived_from: str | None = None,
    ) -> None:
        self.spec = spec
        self.runtime = runtime
        self.arrived_from = arrived_from
        tools: list[llm.Tool] = [
            function_tool_for(t, runtime, spec.name) for t in runtime.registry.tools_for(spec.name)
        ]
        tools += transfer_tools(runtime, spec.name)
        super().__init__(
            id=spec.name,
            instructions="\n".join(
                (
                    runtime.registry.instructions_for(spec),
                    COMMON.format(business=runtime.registry.profile.business.name),
                    runtime.caller_facts(),
                )
            ),
            tools=tools,
            chat_ctx=chat_ctx,
            # The session's VAD, watched: barge-in on running tools (agents/caller_speech.py).
            **({"vad": runtime.heard_vad} if runtime.heard_vad is not None else {}),
        )

    async def stt_node(
        self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
    ) -> AsyncIterator[stt.SpeechEvent]:
        # The caller's transcripts pass the call's gate: backchannels over running work and
        # words over uninterruptible speech are kept from LiveKit (agents/transcript_gate.py).
        events: Any = Agent.default.stt_node(self, audio, model_settings)
        gate = self.runtime.transcripts
        async for ev in gate.node(events) if gate is not None else events:
            yield ev

    async def on_user_turn_completed(
        self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
    ) -> None:
        # Talking over critical work: the answer waits for the work's result.
        await self.runtime.before_answer()

    async def on_enter(self) -> None:
        self.runtime.entered(self)
        if self.arrived_from is None:
            await self.runtime.greet(self)
            return
        # Pick up where the last desk left off: the caller's request is in the carried context.
        self.runtime.session.generate_reply(
            instructions=(
                f"You are the {self.spec.name} desk and just took over from {self.arrived_from}. "
                "If the caller's last request is yours, act on it now; otherwise greet them "
                "briefly and ask how you can help."
            )
        )
