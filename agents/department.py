"""``DepartmentAgent``: a plain LiveKit Agent built from a registered ``Department``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from livekit.agents import Agent, llm

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
        )

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
