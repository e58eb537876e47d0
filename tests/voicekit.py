"""For the voice tests: a desk whose tools are each pattern with an ack, timed by their
arguments; the fixtures and helpers the voice test modules share."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Iterator

import kit
import pytest

from frontdesk.agents.programs.simulate import Environment
from frontdesk.agents.testing.caller import CallerScript, VoiceCall
from frontdesk.core import Department, ToolContext, hookimpl, host, tool

calls: dict[str, int] = {}
cleanups: list[str] = []
finished: dict[str, int] = {}
done_at: dict[str, float] = {}  # when each tool's work last finished, on the harness clock


def _count(name: str, into: dict[str, int] = calls) -> None:
    into[name] = into.get(name, 0) + 1
    if into is finished:
        done_at[name] = time.monotonic()


@tool(pattern="interruptible", ack="Let me look that up for you.")
async def probe(ctx: ToolContext, seconds: float = 1.0) -> str:
    """A slow lookup."""
    _count("probe")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cleanups.append(f"probe:{ctx.task_id}")
        raise
    _count("probe", finished)
    return f"slow probe finished after {seconds} seconds"


@tool(pattern="critical", ack="Saving that now, one moment.")
async def save(ctx: ToolContext, what: str, seconds: float = 1.0) -> str:
    """Save something that must not be lost."""
    _count("save")
    await asyncio.sleep(seconds)
    _count("save", finished)
    return f"saved {what}"


@tool(pattern="background", ack="I've started the survey")
async def survey(ctx: ToolContext, seconds: float = 0.5) -> dict:
    """A long background survey."""
    _count("survey")
    await asyncio.sleep(seconds)
    return {"summary": "The survey found three open rooms."}


@hookimpl
def register_departments(register) -> None:  # noqa: ANN001
    register(
        Department(
            name="desk",
            description="slow probes, saves and surveys",
            instructions="You are the voice test desk.",
            tools=[probe, save, survey],
        )
    )


DROPPED_TURN = "skipping reply to user input"


class _DroppedTurns(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if DROPPED_TURN in record.getMessage():
            self.messages.append(record.getMessage())


@pytest.fixture
def no_dropped_turns() -> Iterator[None]:
    """Fails the test if LiveKit dropped a caller's turn ("skipping reply to user input"): it
    must never happen in a frontdesk call (issue 19). Use with ``pytestmark``."""
    handler = _DroppedTurns()
    logger = logging.getLogger("livekit.agents")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert not handler.messages, f"LiveKit dropped a caller turn: {handler.messages}"


# -- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture
def voice_settings(settings):
    return settings.model_copy(update={"ack_after_seconds": 0.3, "thinking_after_seconds": 0.4})


@pytest.fixture
async def env(voice_settings):
    calls.clear()
    finished.clear()
    cleanups.clear()
    done_at.clear()
    registry = host.load(voice_settings, extra=[("kit", kit), ("voicekit", sys.modules[__name__])])
    environment = await Environment.open(voice_settings, registry)
    yield environment
    await environment.close()


STALE = "slow probe finished"


@contextlib.asynccontextmanager
async def desk_call(env, caller="vic", **options):
    async with VoiceCall.open(
        store=env.store,
        registry=env.registry,
        settings=env.settings,
        caller=caller,
        watcher=env.watcher,
        **options,
    ) as call:
        call.watch_store(env.runner_store)
        call.llm.script("desk please", [{"tools": [{"transfer_to_desk": {}}]}, {"say": "Desk."}])
        await call.play(CallerScript().say("desk please", 0.3))
        await call.idle()
        yield call


async def ask(call, words, tool, args, then="STALE: here it is."):
    """The caller asks for a tool; returns once its work is running."""
    call.llm.script(words, [{"tools": [{tool: args}]}, {"say": then}])
    await call.play(CallerScript().say(words, 0.3))
    await call.until(lambda: call.runtime.inflight)


def row_event(call, tool, status):
    return next(e for e in call.task_events if e["tool"] == tool and e["status"] == status)


def stale_anywhere(call):
    heard = " ".join(call.pipeline.output.heard_texts())
    asked = " ".join(str(m) for ctx in call.llm.requests for m in ctx.items)
    synthesized = " ".join(call.pipeline.tts.texts())
    return [
        where
        for where, text in (("heard", heard), ("llm", asked), ("tts", synthesized))
        if STALE in text or "STALE" in text
    ]
