"""``frontdesk simulate``: real text-mode AgentSessions driven by scenario files.

Built from the production parts: each call is a ``CallRuntime`` on a real ``AgentSession``
with a ``ScriptedLLM`` (the offline brain answers when a step's script runs out), and
background jobs run in an embedded ``Runner`` with its own store connection, so calls and jobs
talk only through the store, as they do across processes in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import AgentSession, llm

from frontdesk.core.brain import OfflineBrain
from frontdesk.core.followups import FollowupWatcher
from frontdesk.core.host import Registry
from frontdesk.core.runner import Runner
from frontdesk.core.scenario import Scenario, Step
from frontdesk.core.session import CallRuntime, start_call
from frontdesk.core.settings import Settings
from frontdesk.core.testing import ScriptedLLM
from frontdesk.db.store import TaskEvent, TaskStore

Emit = Callable[[dict[str, Any]], None]
TURN_TIMEOUT = 30.0


class ExpectationFailed(Exception):
    pass


@dataclass
class Environment:
    """What every simulated call in this process shares: store, plugins, runner, watcher."""

    settings: Settings
    registry: Registry
    store: TaskStore
    runner_store: TaskStore
    watcher: FollowupWatcher
    runner: Runner
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    runner_task: asyncio.Task[None] | None = None
    routes: dict[str, Emit] = field(default_factory=dict)

    @classmethod
    async def open(
        cls, settings: Settings, registry: Registry, *, runner: bool = True
    ) -> Environment:
        store = await TaskStore.open(settings.database_url)
        runner_store = await TaskStore.open(settings.database_url)
        env = cls(
            settings=settings,
            registry=registry,
            store=store,
            runner_store=runner_store,
            watcher=FollowupWatcher(store, settings.followup_poll_seconds),
            runner=Runner(runner_store, registry, settings),
        )
        for s in (store, runner_store):
            s.observers.append(registry.observe)
            s.observers.append(env._route)
        if runner:
            env.runner_task = asyncio.create_task(env.runner.run(env.stop), name="frontdesk.runner")
        return env

    def _route(self, event: TaskEvent) -> None:
        emit = self.routes.get(event.caller)
        if emit is not None and not (event.note or "").startswith("progress"):
            emit(
                {
                    "type": "task",
                    "task_id": event.task_id,
                    "tool": event.tool,
                    "status": event.status,
                    "note": event.note,
                }
            )
        if event.status == "queued":
            self.runner.poke()

    async def close(self) -> None:
        self.stop.set()
        if self.runner_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.runner_task, 10)
        await self.watcher.aclose()
        await self.registry.drain(2.0)  # the last events reach on_task_event observers
        await self.store.close()
        await self.runner_store.close()


class CallDriver:
    """Plays one scenario as one caller, emitting transcript events."""

    def __init__(
        self,
        env: Environment,
        scenario: Scenario,
        caller: str,
        emit: Emit,
        make_llm: Callable[[], llm.LLM] | None = None,
    ) -> None:
        self.env = env
        self.make_llm = make_llm
        self.scenario = scenario
        self.caller = caller
        self._emit = emit
        self.started = time.monotonic()
        self.spoken: list[str] = []
        self.runtime: CallRuntime | None = None
        self.session: AgentSession | None = None
        self.llm: ScriptedLLM | None = None
        self.turn: asyncio.Task[Any] | None = None
        self.turn_started = 0.0

    def emit(self, event: dict[str, Any]) -> None:
        event = {"t": round(time.monotonic() - self.started, 3), "caller": self.caller, **event}
        if event["type"] == "agent":
            self.spoken.append(event["text"])
        self._emit(event)

    async def run(self) -> str | None:
        """Play every step; the first failure's description, or None."""
        self.env.routes[self.caller] = self.emit
        try:
            await self.connect()
            for i, step in enumerate(self.scenario.steps):
                following = self.scenario.steps[i + 1] if i + 1 < len(self.scenario.steps) else None
                try:
                    await self.play(step, following)
                except ExpectationFailed as exc:
                    message = f"{self.scenario.name}: {step.label} failed: {exc}"
                    self.emit({"type": "expect_failed", "step": step.index, "message": message})
                    return message
            return None
        finally:
            await self.hangup()
            self.env.routes.pop(self.caller, None)

    async def connect(self) -> None:
        # A configured model answers when the script is empty (the console), else the brain.
        self.llm = ScriptedLLM(fallback=self.make_llm() if self.make_llm else OfflineBrain())
        self.session = AgentSession(llm=self.llm)
        self.runtime = await start_call(
            self.session,
            store=self.env.store,
            registry=self.env.registry,
            settings=self.env.settings,
            caller=self.caller,
            watcher=self.env.watcher,
            listeners=[self.emit],
        )
        await self.settle()

    async def hangup(self) -> None:
        if self.runtime is None:
            return
        runtime, session, llm_ = self.runtime, self.session, self.llm
        self.runtime = self.session = self.llm = None
        if self.turn is not None and not self.turn.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.turn, TURN_TIMEOUT)
        await runtime.shutdown("hang-up")
        assert session is not None and llm_ is not None
        await session.aclose()
        await llm_.aclose()

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until the agent has finished speaking (a greeting, a follow-up)."""
        deadline = time.monotonic() + timeout
        while self.session is not None and time.monotonic() < deadline:
            speech = self.session.current_speech
            if speech is None:
                await asyncio.sleep(0.02)
                if self.session is not None and self.session.current_speech is None:
                    return
                continue
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    asyncio.shield(speech.wait_for_playout()), deadline - time.monotonic()
                )

    async def play(self, step: Step, following: Step | None) -> None:
        assert self.session is not None or step.kind in ("reconnect", "expect", "wait")
        if step.kind == "user" and step.after is not None:
            # talking over the agent: in text mode, an interruption, then the words
            await self.play(Step(step.index, "interrupt", {"after": step.after}), None)
            await self.play(Step(step.index, "user", step.value, llm=step.llm), following)
        elif step.kind == "user":
            await self.settle()
            assert self.llm is not None and self.session is not None
            self.llm.clear()
            self.llm.push(*step.llm)
            session = self.session
            self.turn_started = time.monotonic()

            async def turn() -> None:
                try:
                    await session.run(user_input=step.value)
                except Exception as exc:
                    self.emit({"type": "error", "message": f"turn failed: {exc}"})

            self.turn = asyncio.create_task(turn())
            talked_over = following is not None and (
                following.kind == "interrupt"
                or (following.kind == "user" and following.after is not None)
            )
            if not talked_over:
                await self._finish_turn()
        elif step.kind == "interrupt":
            await asyncio.sleep(
                max(0.0, self.turn_started + step.value["after"] - time.monotonic())
            )
            assert self.runtime is not None
            await self.runtime.interrupt()
            await self._finish_turn()
        elif step.kind == "wait":
            await self.wait(step.value)
        elif step.kind == "expect":
            await self.expect(step.value)
        elif step.kind == "hangup":
            await self.hangup()
        elif step.kind == "reconnect":
            await self.hangup()
            await self.connect()

    async def _finish_turn(self) -> None:
        if self.turn is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.turn, TURN_TIMEOUT)
            self.turn = None
        await self.settle()

    async def latest(self, tool: str) -> Any:
        rows = await self.env.store.list(caller=self.caller, tool=tool, limit=1)
        return rows[0] if rows else None

    async def wait(self, spec: dict[str, Any]) -> None:
        if "seconds" in spec:
            await asyncio.sleep(float(spec["seconds"]))
            await self.settle()
            return
        deadline = time.monotonic() + float(spec.get("timeout", 10))
        while True:
            task = await self.latest(spec["task"])
            if task is not None and task.status == spec["status"]:
                break
            if time.monotonic() > deadline:
                state = task.status if task else "no task"
                raise ExpectationFailed(
                    f"{spec['task']} did not reach {spec['status']} in time ({state})"
                )
            await asyncio.sleep(0.05)
        await self.settle()

    async def expect(self, spec: dict[str, Any]) -> None:
        if "task" in spec:
            task = await self.latest(spec["task"])
            if task is None:
                raise ExpectationFailed(f"no {spec['task']} task for {self.caller}")
            if "status" in spec and task.status != spec["status"]:
                raise ExpectationFailed(
                    f"{spec['task']} is {task.status}, expected {spec['status']}"
                )
            if "delivered" in spec and bool(task.delivered_at) != bool(spec["delivered"]):
                raise ExpectationFailed(f"{spec['task']} delivered is {bool(task.delivered_at)}")
        if "agent" in spec:
            current = self.runtime.current if self.runtime else None
            if current != spec["agent"]:
                raise ExpectationFailed(f"active agent is {current}, expected {spec['agent']}")
        if "said" in spec and not any(re.search(spec["said"], s, re.I) for s in self.spoken):
            raise ExpectationFailed(f"nothing said matches {spec['said']!r}")
        if "not_said" in spec:
            hit = next((s for s in self.spoken if re.search(spec["not_said"], s, re.I)), None)
            if hit is not None:
                raise ExpectationFailed(
                    f"{hit!r} matches {spec['not_said']!r}, which must not be said"
                )
        self.emit({"type": "expect", "ok": True, "expect": spec})


async def simulate(
    scenarios: list[Scenario],
    settings: Settings,
    registry: Registry,
    emit: Emit,
    *,
    callers: int = 1,
    runner: bool = True,
    voice: bool = False,
) -> list[str]:
    """Run every scenario (``callers`` copies each) concurrently; returns the failures.
    ``voice`` plays them on voice sessions with timed speech (core/simulate_voice.py)."""
    driver_class: type[CallDriver] = CallDriver
    if voice:
        from frontdesk.core.simulate_voice import VoiceCallDriver

        driver_class = VoiceCallDriver
    env = await Environment.open(settings, registry, runner=runner)
    try:
        drivers = []
        taken: set[str] = set()
        for scenario in scenarios:
            for n in range(callers):
                caller = scenario.caller if callers == 1 else f"{scenario.caller}-{n + 1}"
                # Concurrent copies must not share a caller: their expectations would read
                # each other's rows.
                base, k = caller, 2
                while caller in taken:
                    caller, k = f"{base}~{k}", k + 1
                taken.add(caller)
                drivers.append(driver_class(env, scenario, caller, emit))
        results = await asyncio.gather(*(d.run() for d in drivers))
        return [r for r in results if r]
    finally:
        await env.close()
