"""§2 Tool-turn overhead and §3 interrupt to settled, on one real text-mode AgentSession.

One session, one ScriptedLLM, one agent carrying both variants of each tool:
- the frontdesk tool, built by ``function_tool_for`` from tests/kit.py's ``@tool`` specs, with
  full persistence through the TaskStore;
- the same body written as a bare LiveKit ``@function_tool`` (fire-and-forget and background
  bare tools start the body as a task and answer at once, as one would without frontdesk).
Turns alternate bare/frontdesk, so drift hits both. A turn is ``await session.run(...)``: the
LLM calls the tool, the tool answers, the LLM speaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from common import bench_settings, kit_registry, ratio, scratch, sqlite_url, summary
from livekit.agents import RunContext, function_tool

# LiveKit reads tool signatures at runtime, so RunContext must be a module global here.

PATTERNS = {
    "interruptible": ("lookup", lambda i: {"query": f"q{i}"}),
    "critical": ("charge", lambda i: {"amount": f"{i}.00"}),  # new args: no idempotent replay
    "fire_and_forget": ("note", lambda i: {"text": f"n{i}", "seconds": 0}),
    "background": ("experiment", lambda i: {"name": f"e{i}", "seconds": 0}),
}


def bare_tools() -> dict[str, Any]:
    spawned: set[asyncio.Task[Any]] = set()

    def spawn(coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        spawned.add(task)
        task.add_done_callback(spawned.discard)

    @function_tool
    async def lookup_bare(query: str, seconds: float = 0.0) -> str:
        """Look something up in the lab's notes."""
        await asyncio.sleep(seconds)
        return f"The lab notes say {query} is fine."

    @function_tool
    async def charge_bare(context: RunContext, amount: str, seconds: float = 0.0) -> str:
        """Charge the caller's lab account."""
        context.disallow_interruptions()
        await asyncio.sleep(seconds)
        return f"Charged {amount} with key 00000000."

    async def note_body(text: str, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "logged"

    @function_tool
    async def note_bare(text: str, seconds: float = 0.3) -> str:
        """Write a note to the lab log."""
        spawn(note_body(text, seconds))
        return "Noted."

    async def experiment_body(name: str, seconds: float) -> dict[str, str]:
        for _ in range(4):
            await asyncio.sleep(seconds / 4)
        return {"summary": f"Experiment {name} finished. It went well."}

    @function_tool
    async def experiment_bare(name: str, seconds: float = 0.5) -> str:
        """Run a long lab experiment."""
        spawn(experiment_body(name, seconds))
        return "I've started the experiment; I'll tell you when it's ready."

    @function_tool
    async def slow_bare(context: RunContext, seconds: float = 5.0) -> str | None:
        """A slow lookup, interruptible, with no persistence (the §3 baseline)."""
        work = asyncio.ensure_future(asyncio.sleep(seconds))
        await context.speech_handle.wait_if_not_interrupted([work])
        if context.speech_handle.interrupted and not work.done():
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            BARE_CANCELLED.append(time.perf_counter())
            return None
        return "done"

    return {
        "lookup": lookup_bare,
        "charge": charge_bare,
        "note": note_bare,
        "experiment": experiment_bare,
        "slow": slow_bare,
    }


BARE_CANCELLED: list[float] = []


async def run(quick: bool) -> dict[str, Any]:
    from livekit.agents import Agent, AgentSession
    from livekit.agents.llm import ChatContext

    from frontdesk.agents.patterns import function_tool_for
    from frontdesk.agents.programs.simulate import Environment
    from frontdesk.agents.runtime import CallRuntime
    from frontdesk.agents.testing import ScriptedLLM

    turns = 20 if quick else 60
    interrupts = 20 if quick else 60
    with scratch("turn-") as dir_:
        settings = bench_settings(sqlite_url(dir_ / "turn.db"))
        registry = kit_registry(settings)
        # No runner: a background turn only enqueues its job, which is the call-side cost.
        env = await Environment.open(settings, registry, runner=False)
        llm = ScriptedLLM()
        session = AgentSession(llm=llm)
        runtime = CallRuntime(
            session, store=env.store, registry=registry, settings=settings, caller="bench"
        )
        bare = bare_tools()
        ours = {
            name: function_tool_for(registry.tools[name], runtime, "lab")
            for name, _ in PATTERNS.values()
        }
        agent = Agent(instructions="You are the lab desk.", tools=[*bare.values(), *ours.values()])
        await session.start(agent)

        async def turn(tool: str, args: dict[str, Any]) -> float:
            llm.clear()
            llm.push({"tools": [{tool: args}]}, {"say": "Done."})
            start = time.perf_counter()
            await session.run(user_input="please")
            return time.perf_counter() - start

        samples: dict[str, dict[str, list[float]]] = {
            p: {"bare": [], "frontdesk": []} for p in PATTERNS
        }
        try:
            for i in range(-2, turns):  # two warm-up rounds
                for pattern, (tool, make_args) in PATTERNS.items():
                    pair = [("bare", f"{tool}_bare"), ("frontdesk", tool)]
                    if i % 2:
                        pair.reverse()
                    for variant, name in pair:
                        took = await turn(name, make_args(i))
                        if i >= 0:
                            samples[pattern][variant].append(took)
                # Keep the history short so turn cost does not grow with the run.
                await agent.update_chat_ctx(ChatContext.empty())
            overhead = {}
            for pattern, by in samples.items():
                b, f = summary(by["bare"], 1e3), summary(by["frontdesk"], 1e3)
                overhead[pattern] = {
                    "bare_ms": b,
                    "frontdesk_ms": f,
                    "median_ratio": ratio(f["median"], b["median"]),
                    "median_added_ms": f["median"] - b["median"],
                }

            interrupt = await _interrupts(session, runtime, llm, env.store, interrupts)
        finally:
            with contextlib.suppress(Exception):
                await session.aclose()
            await llm.aclose()
            await env.close()

    worst = max(v["median_ratio"] or 0 for v in overhead.values())
    return {
        "turns_per_variant": turns,
        "overhead": overhead,
        "interrupt": interrupt,
        "targets": {
            "tool_turn_median_ratio": {"target": "<= 1.25", "value": worst, "worst_of_four": True},
            "interrupt_p99_ms": {"target": "<= 15", "value": interrupt["frontdesk_ms"].get("p99")},
        },
    }


async def _interrupts(session: Any, runtime: Any, llm: Any, store: Any, n: int) -> dict[str, Any]:
    """Interrupt a slow interruptible tool mid-work; time from interrupt() to the cancelled row
    committed (the store's observer fires after the commit) and, for the bare tool, to its work
    being cancelled."""
    cancelled: dict[int, float] = {}
    running: asyncio.Queue[int] = asyncio.Queue()

    def observe(event: Any) -> None:
        if event.status == "cancelled":
            cancelled[event.task_id] = time.perf_counter()
        elif event.status == "running" and event.tool == "lookup":
            running.put_nowait(event.task_id)

    store.observers.append(observe)
    ours: list[float] = []
    bare: list[float] = []
    errors: list[str] = []
    for i in range(-2, n):
        for variant in ("bare", "frontdesk") if i % 2 else ("frontdesk", "bare"):
            llm.clear()
            if variant == "frontdesk":
                llm.push({"tools": [{"lookup": {"query": f"slow{i}", "seconds": 5}}]})
            else:
                llm.push({"tools": [{"slow_bare": {"seconds": 5}}]})
            run = asyncio.ensure_future(session.run(user_input="slow please"))
            task_id = None
            try:
                if variant == "frontdesk":
                    task_id = await asyncio.wait_for(running.get(), 5)
                await asyncio.sleep(0.03)  # the tool is now waiting on its work
                before = len(BARE_CANCELLED)
                start = time.perf_counter()
                await runtime.interrupt()
                deadline = start + 2.0
                while time.perf_counter() < deadline:
                    if variant == "frontdesk" and task_id in cancelled:
                        took = cancelled[task_id] - start
                        break
                    if variant == "bare" and len(BARE_CANCELLED) > before:
                        took = BARE_CANCELLED[-1] - start
                        break
                    await asyncio.sleep(0.0005)
                else:
                    errors.append(f"{variant}: not settled within 2 s")
                    continue
                if i >= 0:
                    (ours if variant == "frontdesk" else bare).append(took)
            except Exception as exc:
                errors.append(f"{variant}: {type(exc).__name__}: {exc}")
            finally:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(run, 5)
    store.observers.remove(observe)
    f, b = summary(ours, 1e3), summary(bare, 1e3)
    return {
        "frontdesk_ms": f,
        "bare_ms": b,
        "p99_ratio": ratio(f.get("p99"), b.get("p99")),
        "median_ratio": ratio(f.get("median"), b.get("median")),
        "errors": errors[:5],
        "note": "frontdesk: interrupt() to the cancelled row committed; bare: to the work cancelled",
    }
