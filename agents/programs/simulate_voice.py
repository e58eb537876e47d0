"""``frontdesk simulate --voice``: the same scenarios on voice sessions with timed speech.

Each call runs on the voice test harness (frontdesk.agents.testing: fake VAD and STT fed by
a timed caller, a fake TTS, a pausable audio output), through ``start_call`` like every
other call. A ``user`` step is spoken (``for`` seconds, else about 0.1 s a word); a step with
``after`` is spoken that many seconds after the previous caller turn was taken, over whatever
the agent is doing: barge-in is speech, never ``session.interrupt()``. ``said``/``not_said``
look at what the caller actually heard. The format is in docs/scenarios.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from frontdesk.agents.programs.scenario import Step
from frontdesk.agents.programs.simulate import TURN_TIMEOUT, CallDriver
from frontdesk.agents.testing.caller import VoiceCall

SECONDS_PER_WORD = 0.1
BARGE_WORDS = "Wait."  # what an `interrupt` step says on voice


def speaking_time(step: Step) -> float:
    if step.seconds is not None:
        return step.seconds
    return min(2.0, max(0.3, SECONDS_PER_WORD * len(str(step.value).split())))


class VoiceCallDriver(CallDriver):
    """A ``CallDriver`` whose caller speaks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.call: VoiceCall | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._heard_before: list[str] = []  # earlier connections of this caller
        self.turn_taken = 0.0

    def emit(self, event: dict[str, Any]) -> None:
        if event.get("type") == "user":
            self.turn_taken = time.monotonic()
        super().emit(event)

    async def connect(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        fallback, _ = self.fallback_llm()
        self.call = await self._stack.enter_async_context(
            VoiceCall.open(
                store=self.env.store,
                registry=self.env.registry,
                settings=self.env.settings,
                caller=self.caller,
                watcher=self.env.watcher,
                fallback=fallback,
                listeners=[self.emit],
            )
        )
        self.runtime, self.session = self.call.runtime, self.call.session
        self.llm = None

    async def hangup(self) -> None:
        if self._stack is None:
            return
        stack, call = self._stack, self.call
        self._stack = self.call = None
        self.runtime = self.session = None
        if call is not None:
            self._heard_before += call.pipeline.output.heard_texts()
        await stack.aclose()

    async def settle(self, timeout: float = TURN_TIMEOUT) -> None:
        if self.call is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await self.call.idle(timeout=timeout)

    def _talks_over_next(self, following: Step | None) -> bool:
        return following is not None and (
            following.kind == "interrupt"
            or (following.kind == "user" and following.after is not None)
        )

    async def play(self, step: Step, following: Step | None) -> None:
        if step.kind not in ("user", "interrupt"):
            await super().play(step, following)
            return
        assert self.call is not None
        if step.kind == "interrupt" or step.after is not None:
            after = step.value["after"] if step.kind == "interrupt" else step.after
            await asyncio.sleep(max(0.0, self.turn_taken + float(after) - time.monotonic()))
        else:
            await self.settle()
        words = BARGE_WORDS if step.kind == "interrupt" else str(step.value)
        seconds = 0.6 if step.kind == "interrupt" else speaking_time(step)
        if step.kind == "user":
            self.call.llm.script(words, step.llm)
        self.in_turn = step.kind == "user"  # the brain answering now answers this turn
        try:
            await self._say_and_wait(words, seconds, following)
        finally:
            self.in_turn = False

    async def _say_and_wait(self, words: str, seconds: float, following: Step | None) -> None:
        assert self.call is not None
        taken = self.turn_taken
        await self.call.say(words, seconds)
        if self._talks_over_next(following):
            # the next step talks over this turn: wait only until this turn is taken
            with contextlib.suppress(asyncio.TimeoutError):
                await self.call.until(lambda: self.turn_taken > taken, timeout=TURN_TIMEOUT)
            return
        if following is not None and following.kind == "hangup":
            # hang up once the reply has been heard, not after whatever comes next
            replies = len(self.call.of("agent"))
            with contextlib.suppress(asyncio.TimeoutError):
                await self.call.until(
                    lambda: self.turn_taken > taken and len(self.call.of("agent")) > replies,
                    timeout=TURN_TIMEOUT,
                )
            return
        await self.settle()

    async def expect(self, spec: dict[str, Any]) -> None:
        # On voice, what counts is what the caller heard (a reply cut off is partly heard).
        heard = self.call.pipeline.output.heard_texts() if self.call is not None else []
        self.spoken = [*self._heard_before, *heard]
        await super().expect(spec)
