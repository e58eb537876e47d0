"""Session wiring: one ``CallRuntime`` per call, tying an AgentSession to the store and plugins.

The runtime owns the caller's identity, builds department agents, tracks in-turn work for
heartbeats and shutdown, and delivers follow-ups the store reports as finished. It never talks
to the runner except through the store (DESIGN.md, "Processes").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any

from livekit.agents import Agent, AgentSession, llm

from frontdesk.agents.backchannels import configured as configured_backchannels
from frontdesk.agents.caller_speech import CallerSpeech
from frontdesk.agents.department import DepartmentAgent
from frontdesk.agents.followups import FollowupWatcher, followup_instructions
from frontdesk.agents.handoff import carried_context, extract_facts
from frontdesk.agents.heard_vad import HeardVAD
from frontdesk.agents.held_results import HOLD_LINE, before_answer, say_hold_line
from frontdesk.agents.progress import Progress
from frontdesk.agents.transcript_gate import TranscriptGate
from frontdesk.agents.triage import TRIAGE, triage_department
from frontdesk.core.department import Department
from frontdesk.core.host import Registry
from frontdesk.core.settings import Settings
from frontdesk.core.tools import ToolSpec
from frontdesk.db.outage import OUTAGE
from frontdesk.db.store import Task, TaskStore

log = logging.getLogger("frontdesk.session")

__all__ = ["HOLD_LINE", "CallRuntime", "start_call"]


@contextlib.contextmanager
def _best_effort(what: str) -> Iterator[None]:
    """The call goes on when its bookkeeping cannot be written, but not silently. A tool's
    ToolError here was already recorded and spoken; it is not a bookkeeping failure."""
    try:
        yield
    except llm.ToolError:
        pass
    except Exception as exc:
        if not OUTAGE.failed(exc):  # an outage is logged once per process (db/outage.py)
            log.warning("%s failed", what, exc_info=True)


class CallRuntime:
    def __init__(
        self,
        session: AgentSession,
        *,
        store: TaskStore,
        registry: Registry,
        settings: Settings,
        caller: str,
        session_id: str | None = None,
        watcher: FollowupWatcher | None = None,
        acks: Any = None,
        audio: Any = None,
        providers: Any = None,
        end_call: Callable[[str], Any] | None = None,
    ) -> None:
        self.session = session
        self.providers = providers  # frontdesk.agents.provider_build.Providers, when built here
        self.end_call = end_call  # how this call ends for good (the worker: the job's shutdown)
        self.guard: Any = None
        self.acks = acks  # frontdesk.agents.acks.AckCache when the session has a TTS
        self.progress = Progress(self, audio)
        self.store = store
        self.registry = registry
        self.settings = settings
        self.caller = caller
        self.session_id = session_id or f"call-{uuid.uuid4().hex[:12]}"
        self.owner = f"call:{os.getpid()}:{self.session_id}"
        self.watcher = watcher
        self.current: str = TRIAGE
        self.facts: dict[str, str] = {}
        self.inflight: dict[int, tuple[ToolSpec, asyncio.Future[Any]]] = {}
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._delivering: set[int] = set()
        self._delivered: set[int] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._critical_locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        # The caller's voice (voice sessions): barge-in on interruptible work, and follow-ups
        # wait for a quiet caller. Set at start; a text session's caller is always quiet.
        self.caller_speech: CallerSpeech | None = None
        self.heard_vad: HeardVAD | None = None  # department agents' VAD, when the session has one
        self.transcripts: TranscriptGate | None = None  # agents' STT node, when there is an STT
        self.critical_turns: dict[int, Any] = {}  # task id -> the speech handle of its turn

    # -- departments and handoffs -----------------------------------------------------------

    def departments(self) -> list[Department]:
        return [self.triage_spec(), *self.registry.departments.values()]

    def triage_spec(self) -> Department:
        return triage_department(
            list(self.registry.departments.values()), self.registry.profile.business.name
        )

    def make_agent(self, name: str, *, arrived_from: str | None = None) -> DepartmentAgent:
        spec = self.triage_spec() if name == TRIAGE else self.registry.departments[name]
        chat_ctx = None
        if arrived_from is not None:
            chat_ctx = carried_context(self.session.history, self.settings.context_turns)
        return DepartmentAgent(spec, self, chat_ctx=chat_ctx, arrived_from=arrived_from)

    async def handoff(self, target: str) -> Agent:
        previous = self.current
        self.emit({"type": "handoff", "from": previous, "to": target})
        with _best_effort("recording the handoff"):
            await self.store.call_handoff(self.session_id, previous, target)
        self.current = target
        return self.make_agent(target, arrived_from=previous)

    def entered(self, agent: DepartmentAgent) -> None:
        self.current = agent.spec.name
        if agent.arrived_from is not None:  # a handoff is complete: the new desk is live
            self.emit({"type": "entered", "agent": self.current, "from": agent.arrived_from})
        # A department just became active: it may have follow-ups to speak.
        if self.watcher is not None:
            self.watcher.poke()

    def caller_facts(self) -> str:
        facts = {"caller id": self.caller, **self.facts}
        return "Known about this caller: " + "; ".join(f"{k}: {v}" for k, v in facts.items())

    async def greet(self, agent: DepartmentAgent) -> None:
        # A fixed greeting costs no LLM request, so a scenario's first scripted reply answers
        # the caller's first words. Pending results from earlier calls follow at once.
        self.session.say(self.registry.profile.business.greeting_text())

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, **start_options: Any) -> None:
        """Start the session on triage; ``start_options`` (room, room_options) go to
        ``AgentSession.start`` for a call in a LiveKit room."""
        with _best_effort("recording the call"):
            await self.store.call_started(self.session_id, self.caller)
        self.session.on("conversation_item_added", self._on_item)
        self.session.on("function_tools_executed", self._on_tools)
        backchannels = configured_backchannels(self.settings, self.registry.profile)
        self.caller_speech = CallerSpeech(self.session, backchannels)
        if self.session.vad is not None:
            self.heard_vad = HeardVAD(self.session.vad, self.caller_speech.on_vad)
        if self.session.stt is not None:
            self.transcripts = TranscriptGate(self.caller_speech, backchannels)
        self.guard = self._failure_guard()
        await self.session.start(self.make_agent(TRIAGE), **start_options)
        self._loops = [
            asyncio.create_task(self._heartbeat_loop(), name="frontdesk.heartbeat"),
            asyncio.create_task(self.progress.status_loop(), name="frontdesk.progress"),
        ]
        if self.watcher is not None:
            self.watcher.add(self)
        self.emit({"type": "session_start", "caller": self.caller, "session_id": self.session_id})

    def _failure_guard(self) -> Any:
        from frontdesk.agents.provider_build import inner
        from frontdesk.agents.provider_failures import FailureGuard

        built = self.providers
        parts = (
            [p for obj in (built.llm, built.stt, built.tts) if obj is not None for p in inner(obj)]
            if built
            else []
        )
        secrets = list(built.choices.env.values()) if built else []
        return FailureGuard(
            self.session,
            describe=built.describe if built else lambda obj: getattr(obj, "label", "provider"),
            parts=parts,
            acks=self.acks,
            max_failures=self.settings.max_provider_failures,
            secrets=secrets,
            on_end=self._end_after_failures,
            emit=self.emit,
            protect=self.protect,
            pending_turn=self._pending_turn,
        )

    async def _pending_turn(self, limit: float) -> None:
        """Until the caller is quiet: not speaking (the VAD's hangover included) and no turn of
        theirs waiting to be committed (at most ``limit`` seconds)."""
        speech = self.caller_speech
        deadline = asyncio.get_running_loop().time() + limit
        while speech is not None and not speech.quiet:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            await speech.changed(remaining)

    async def _end_after_failures(self, reason: str) -> None:
        """Repeated provider failures end the call: rows in flight are closed with the reason."""
        await self.shutdown(reason)
        if self.end_call is not None:
            result = self.end_call(reason)
            if asyncio.iscoroutine(result):
                await result
        else:
            self.session.shutdown(drain=False)

    async def shutdown(self, reason: str = "call ended") -> None:
        """Let critical work finish, give fire-and-forget work a bounded wait, and close the
        rest in the store with a reason, so nothing is left running."""
        if self._closed:
            return
        self._closed = True
        if self.watcher is not None:
            self.watcher.remove(self)
        critical = [w for spec, w in self.inflight.values() if spec.pattern == "critical"]
        if critical:
            await asyncio.wait(critical)
        forgettable = [w for spec, w in self.inflight.values() if spec.pattern == "fire_and_forget"]
        if forgettable:
            await asyncio.wait(forgettable, timeout=self.settings.fire_and_forget_grace_seconds)
        if self._background:
            await asyncio.wait(
                self._background, timeout=self.settings.fire_and_forget_grace_seconds
            )
        from frontdesk.agents.patterns import _close, finish

        for task_id, (spec, work) in list(self.inflight.items()):
            if work.done() and not work.cancelled():
                # It finished while we waited, but its turn has not recorded that yet (a filler
                # may still be stopping): record the real outcome, not "unfinished".
                with _best_effort(f"recording task {task_id}"):
                    await finish(self, spec, task_id, work)
                continue
            work.cancel()
            with _best_effort(f"closing task {task_id}"):
                await _close(self, task_id, "failed", error=f"unfinished at {reason}", note=reason)
        self.inflight.clear()
        for loop in self._loops:
            loop.cancel()
        if self.caller_speech is not None:
            self.caller_speech.close()
        with _best_effort("recording the end of the call"):
            await self.store.call_ended(self.session_id)
        self.emit({"type": "session_end", "caller": self.caller, "session_id": self.session_id})

    async def _heartbeat_loop(self) -> None:
        # In-turn rows carry a lease too, so a runner can close them if this process dies.
        interval = self.settings.job_lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            if self.inflight:
                with _best_effort("renewing in-turn leases"):
                    await self.store.renew(
                        self.owner, self.settings.job_lease_seconds, list(self.inflight)
                    )

    async def interrupt(self) -> bool:
        """Barge in on the current turn, as a caller speaking over the agent does. Returns
        False, and logs, when critical work refuses it (LiveKit may refuse silently)."""
        critical = [
            i
            for i, (spec, w) in self.inflight.items()
            if spec.pattern == "critical" and not w.done()
        ]
        refused = bool(critical)
        reason = f"critical work in progress (tasks {', '.join(map(str, critical))})"
        try:
            await self.session.interrupt()
        except RuntimeError as exc:
            refused, reason = True, str(exc)
        if refused:
            log.info("interruption refused for %s: %s", self.caller, reason)
            self.emit({"type": "interrupt_refused", "reason": reason})
        else:
            self.emit({"type": "interrupt"})
        return not refused

    # -- in-turn work ------------------------------------------------------------------------

    def track(self, task_id: int, spec: ToolSpec, work: asyncio.Future[Any]) -> None:
        self.inflight[task_id] = (spec, work)

    def critical_lock(self, digest: str) -> asyncio.Lock:
        return self._critical_locks.setdefault(digest, asyncio.Lock())

    def untrack(self, task_id: int) -> None:
        self.inflight.pop(task_id, None)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- follow-ups ----------------------------------------------------------------------------

    def is_idle(self) -> bool:
        """Nothing said or queued, no reply being thought of, and the caller neither speaking
        nor waiting for an answer to words not yet committed as a turn."""
        return (
            not self._closed
            and self.session.current_speech is None
            and self.session.agent_state in ("listening", "idle")
            and (self.caller_speech is None or self.caller_speech.quiet)
            and (self.transcripts is None or not self.transcripts.holding)
        )

    def protect(self, handle: Any) -> Any:
        """``handle`` is uninterruptible speech: the caller's words wait until it is said
        (agents/transcript_gate.py)."""
        if handle is not None and self.transcripts is not None:
            self.transcripts.protect(handle)
        return handle

    def say_hold_line(self) -> Any:
        """Tell a caller who spoke over critical work that it is still finishing."""
        return say_hold_line(self)

    async def before_answer(self) -> None:
        """The caller's turn is about to be answered: after any critical result still due."""
        await before_answer(self)

    async def deliver(self, task: Task) -> bool:
        """Speak one finished task; mark it delivered only if the speech was not interrupted."""
        if task.id in self._delivered:
            # The watcher's query can overtake our own mark_delivered commit and offer the
            # task again; it has been spoken, so it must not be spoken twice.
            return True
        if task.id in self._delivering or self._closed:
            return False
        self._delivering.add(task.id)
        try:
            self.emit(
                {"type": "followup", "task_id": task.id, "tool": task.tool, "agent": self.current}
            )
            handle = self.session.generate_reply(instructions=followup_instructions(task))
            await handle
            if handle.interrupted:
                return False
            self._delivered.add(task.id)
            return await self.store.mark_delivered(task.id, note=f"delivered by {self.current}")
        finally:
            self._delivering.discard(task.id)

    # -- transcript ----------------------------------------------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        for listener in self.listeners:
            listener(event)

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if getattr(item, "type", None) != "message" or not item.text_content:
            return
        if item.role == "user":
            self.facts.update(extract_facts(item.text_content))
            self.emit({"type": "user", "text": item.text_content})
        elif item.role == "assistant":
            event = {"type": "agent", "agent": self.current, "text": item.text_content}
            if getattr(item, "interrupted", False):
                event["interrupted"] = True  # cut off: the caller heard only this much
            self.emit(event)

    def _on_tools(self, ev: Any) -> None:
        for call, output in ev.zipped():
            self.emit(
                {
                    "type": "tool_call",
                    "agent": self.current,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
            if output is not None:
                self.emit(
                    {
                        "type": "tool_output",
                        "name": call.name,
                        "output": output.output,
                        "is_error": output.is_error,
                    }
                )


async def start_call(
    session: AgentSession,
    *,
    room: Any = None,
    room_options: Any = None,
    listeners: Iterable[Callable[[dict[str, Any]], None]] = (),
    **runtime: Any,
) -> CallRuntime:
    """Run the concierge on ``session``: the one entry point the worker, the console,
    ``frontdesk simulate`` and the voice test harness share (docs/plugins.md, "Testing").

    ``session`` is any ``AgentSession``: text-only, or voice with the STT, TTS, VAD and turn
    detection of your choice. ``runtime`` is ``CallRuntime``'s keywords: store, registry,
    settings, caller, and optionally session_id, watcher (follow-ups), acks (an ``AckCache``
    on the session's TTS) and audio (a started ``BackgroundAudioPlayer`` for the thinking
    sound). ``listeners`` receive the call's transcript events from the first one on. For a
    LiveKit call, ``room`` and ``room_options`` bind the session to the room's participant.
    Returns the started runtime; end the call with ``await runtime.shutdown(reason)``."""
    call = CallRuntime(session, **runtime)
    call.listeners.extend(listeners)
    options = {k: v for k, v in (("room", room), ("room_options", room_options)) if v is not None}
    await call.start(**options)
    return call
