"""``frontdesk simulate``: real text-mode AgentSessions driven by scenario files.

Built from the production parts: each call is a ``CallRuntime`` on a real ``AgentSession``
with a ``ScriptedLLM`` (the offline brain answers when a step's script runs out), and
background jobs run in an embedded ``Runner`` (a DBOS executor) with its own store connection,
so calls and jobs talk only through the store, as they do across processes in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import AgentSession, llm

from frontdesk.agents.brain import OfflineBrain, critical_tools
from frontdesk.agents.followups import FollowupWatcher
from frontdesk.agents.programs.scenario import Scenario, Step
from frontdesk.agents.runtime import CallRuntime, start_call
from frontdesk.agents.testing import ScriptedLLM
from frontdesk.core.host import Registry
from frontdesk.core.recording import mask_secrets
from frontdesk.core.runner import Runner
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.db.outage import OUTAGE, from_database, one_line
from frontdesk.db.store import TaskEvent, TaskStore

Emit = Callable[[dict[str, Any]], None]
TURN_TIMEOUT = 30.0


class ExpectationFailed(Exception):
    pass


class _ReportingBrain(OfflineBrain):
    """The offline brain, telling the driver each time it answers (the script ran out)."""

    def __init__(self, on_answer: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_answer = on_answer

    def chat(self, **kwargs: Any) -> llm.LLMStream:
        self._on_answer()
        return super().chat(**kwargs)


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
        store = await open_store(settings.database_url, registry)
        runner_store = await open_store(settings.database_url, registry)
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
        *,
        strict: bool = False,
    ) -> None:
        self.env = env
        self.strict = strict
        # What fails the call without stopping it: an unknown tool, a brain turn with --strict.
        self.problems: list[str] = []
        self.step: Step | None = None
        self.in_turn = False
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
        elif event["type"] == "tool_call":
            event["arguments"] = self._as_stored(event["name"], event.get("arguments"))
        elif event["type"] == "tool_output":
            event["output"] = mask_secrets(event.get("output"))
            if event.get("is_error") and str(event["output"]).startswith("Unknown function:"):
                self._problem(f"the LLM called unknown tool {event['name']!r}")
        self._emit(event)

    def _as_stored(self, name: str, arguments: Any) -> Any:
        """A tool call's arguments as the task row keeps them: sensitive ones redacted, card
        numbers masked. Never the raw text: a PIN must not reach the transcript."""
        spec = self.env.registry.tools.get(name)
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = None
        if spec is not None and isinstance(parsed, dict):
            return json.dumps(mask_secrets(spec.redact(parsed)), default=str)
        return mask_secrets(arguments)

    def _where(self) -> str:
        return self.step.label if self.step is not None else "greeting"

    def _problem(self, what: str) -> None:
        message = f"{self.scenario.name}: {self._where()}: {what}"
        self.problems.append(message)
        self.emit({"type": "problem", "message": message})

    def _brain_answered(self) -> None:
        """The script had no reply left, so the offline brain answered this LLM request."""
        turn = self.step is not None and self.step.kind == "user" and self.in_turn
        self.emit(
            {
                "type": "brain",
                "step": self.step.index if turn and self.step is not None else None,
                "what": self._where() if turn else "a reply outside a scripted turn",
            }
        )
        if turn and self.strict:
            self._problem("no scripted llm reply left; the offline brain answered (--strict)")

    async def run(self) -> str | None:
        """Play every step; the first failure's description, or None."""
        self.env.routes[self.caller] = self.emit
        try:
            await self.connect()
            for i, step in enumerate(self.scenario.steps):
                following = self.scenario.steps[i + 1] if i + 1 < len(self.scenario.steps) else None
                self.step = step
                try:
                    await self.play(step, following)
                except ExpectationFailed as exc:
                    message = f"{self.scenario.name}: {step.label} failed: {exc}"
                    self.emit({"type": "expect_failed", "step": step.index, "message": message})
                    return "; ".join([*self.problems, message])
                except Exception as exc:
                    if not (from_database(exc) and OUTAGE.failed(exc)):
                        raise
                    # The database not answering fails this step, not the run: the call goes
                    # on, as a real call does (its tools say the records system is down).
                    self._problem(f"the task database was not answering ({one_line(exc)})")
            return "; ".join(self.problems) or None
        finally:
            await self.hangup()
            self.env.routes.pop(self.caller, None)

    def fallback_llm(self) -> tuple[Any, Any]:
        """What answers when the script has no reply, and the built Providers if any: a
        configured model (the console's chain, with its retries and labels), else the offline
        brain, which reports each answer (``--strict`` fails a turn it answered)."""
        from frontdesk.agents.provider_build import Providers

        made = self.make_llm() if self.make_llm else None
        built = made if isinstance(made, Providers) else None
        if built is not None:
            return built.llm, built
        brain = _ReportingBrain(self._brain_answered, critical=critical_tools(self.env.registry))
        return made or brain, None

    async def connect(self) -> None:
        fallback, built = self.fallback_llm()
        self.llm = ScriptedLLM(fallback=fallback)
        options = {"conn_options": built.session_kwargs()["conn_options"]} if built else {}
        self.session = AgentSession(llm=self.llm, **options)
        self.runtime = await start_call(
            self.session,
            store=self.env.store,
            registry=self.env.registry,
            settings=self.env.settings,
            caller=self.caller,
            watcher=self.env.watcher,
            providers=built,
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
                self.in_turn = True
                try:
                    await session.run(user_input=step.value)
                except Exception as exc:
                    self.emit({"type": "error", "message": f"turn failed: {exc}"})
                finally:
                    self.in_turn = False

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
        wanted = spec.get("status")
        told = spec.get("delivered")
        while True:
            task = await self.latest(spec["task"])
            if (
                task is not None
                and wanted in (None, task.status)
                and told in (None, bool(task.delivered_at))
            ):
                break
            if time.monotonic() > deadline:
                state = task.status if task else "no task"
                goal = wanted or ("delivered" if told else "undelivered")
                raise ExpectationFailed(f"{spec['task']} did not reach {goal} in time ({state})")
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
        # said / not_said are case-insensitive regular expressions (checked when loaded).
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
    strict: bool = False,
    driver_class: type[CallDriver] | None = None,
) -> list[str]:
    """Run every scenario (``callers`` copies each) concurrently; returns the failures.
    With ``strict`` a user turn the offline brain had to answer is a failure too.
    ``driver_class`` plays each call (simulate_voice.VoiceCallDriver: on voice sessions)."""
    driver_class = driver_class or CallDriver
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
                drivers.append(driver_class(env, scenario, caller, emit, strict=strict))
        results = await asyncio.gather(*(d.run() for d in drivers), return_exceptions=True)
        # Every call played to its end before any error is raised: one call's bug must not
        # cut the others short.
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return [r for r in results if isinstance(r, str) and r]
    finally:
        await env.close()
