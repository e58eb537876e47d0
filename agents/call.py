"""``Call``: what the call side's parts need from the call they serve.

``frontdesk.agents.runtime.CallRuntime`` is the one implementation. The department agents, the
pattern tools, handoff, progress and follow-up delivery type against this protocol instead of
the runtime itself, so the runtime can import them without an import circle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from livekit.agents import Agent, AgentSession

from frontdesk.core.department import Department
from frontdesk.core.host import Registry
from frontdesk.core.settings import Settings
from frontdesk.core.tools import ToolSpec
from frontdesk.db.store import Task, TaskStore


class Working(Protocol):
    def working(self) -> AbstractAsyncContextManager[None]:
        """Play the thinking sound while the block runs (when the call has audio)."""
        ...


class Call(Protocol):
    session: AgentSession
    store: TaskStore
    registry: Registry
    settings: Settings
    caller: str
    session_id: str
    owner: str
    acks: Any  # frontdesk.agents.acks.AckCache when the session has a TTS, else None
    progress: Working
    inflight: dict[int, tuple[ToolSpec, asyncio.Future[Any]]]
    caller_speech: Any  # frontdesk.agents.caller_speech.CallerSpeech once started, else None
    heard_vad: Any  # frontdesk.agents.heard_vad.HeardVAD when the session has a VAD
    critical_turns: dict[int, Any]  # critical task id -> the SpeechHandle of its turn
    transcripts: Any  # frontdesk.agents.transcript_gate.TranscriptGate when there is an STT

    def departments(self) -> list[Department]: ...
    async def handoff(self, target: str) -> Agent: ...
    def entered(self, agent: Agent) -> None: ...
    def caller_facts(self) -> str: ...
    async def greet(self, agent: Agent) -> None: ...
    def track(self, task_id: int, spec: ToolSpec, work: asyncio.Future[Any]) -> None: ...
    def untrack(self, task_id: int) -> None: ...
    def critical_lock(self, digest: str) -> asyncio.Lock: ...
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None: ...
    def is_idle(self) -> bool: ...
    async def before_answer(self) -> None: ...
    def protect(self, handle: Any) -> Any: ...
    def say_hold_line(self) -> Any: ...
    async def deliver(self, task: Task) -> bool: ...
    def emit(self, event: dict[str, Any]) -> None: ...
