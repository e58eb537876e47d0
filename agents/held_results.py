"""What a tool's turn waits for on voice, so that the caller's sounds and words are heard right.

- ``until_done_or_barge_in`` (interruptible): the work runs until it is done or the caller
  really interrupts (words; ``CallerSpeech.barge_in``). A finished result is *held* while the
  caller may still be interrupting (speaking, words not yet a turn, or less than the
  false-interruption timeout since they stopped): words discard it, anything else (a cough, an
  "uh", an "mm-hm") lets it through, so no sound without words leaves dead air.
- ``critical_turn`` (critical): from the work's start until its result has been spoken, the
  caller's final transcripts wait in the ``TranscriptGate`` (LiveKit would drop a turn committed
  while the uninterruptible result plays). When the caller stops after saying something, they
  hear the hold line; the result does not start while they are speaking (a bounded wait); once
  it has been spoken their words go on to LiveKit and are answered.

docs/patterns.md, "On voice", says what the caller experiences in each case.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontdesk.agents.call import Call


async def _first(handle: Any, *futures: asyncio.Future[Any]) -> None:
    """Until one of ``futures`` is done or ``handle`` (the tool's turn) is interrupted."""
    either = asyncio.ensure_future(asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED))
    try:
        await handle.wait_if_not_interrupted([either])
    finally:
        either.cancel()


async def until_done_or_barge_in(runtime: Call, work: asyncio.Future[Any], handle: Any) -> bool:
    """Wait for the work and for the caller; True when the caller's words interrupt it (the
    work may have finished: its result is then discarded). False: the work is done and its
    result may be spoken, or the turn was interrupted some other way."""
    speech = runtime.caller_speech
    if speech is None:
        await handle.wait_if_not_interrupted([work])
        return False
    barge = speech.barge_in()
    released: asyncio.Future[None] | None = None
    try:
        await _first(handle, work, barge)
        if handle.interrupted or barge.done():
            return barge.done() and not handle.interrupted
        if speech.hold_remaining() == 0.0:
            return False
        runtime.emit({"type": "result_held"})
        released = asyncio.ensure_future(speech.released(runtime.settings.hold_for_caller_seconds))
        await _first(handle, released, barge)
        barged = barge.done() and not handle.interrupted
        if not barged:
            runtime.emit({"type": "result_released"})
        return barged
    finally:
        barge.cancel()
        if released is not None:
            released.cancel()


@contextlib.asynccontextmanager
async def critical_turn(runtime: Call, handle: Any) -> AsyncIterator[None]:
    """Around a critical tool's wait for its work (see the module docstring). On exit the
    caller has stopped speaking (or the wait ran out) and has heard the hold line if they
    spoke; the gate opens when ``handle`` (the turn, result included) is done."""
    gate, speech = runtime.transcripts, runtime.caller_speech
    if gate is None or speech is None or handle is None:
        yield
        return
    key = object()
    gate.hold(key)
    said_for = speech.word_events  # words from here on get a hold line

    def hold_line_due() -> bool:
        return speech.word_events > said_for and not speech.speaking

    async def hold_lines() -> None:
        nonlocal said_for
        while True:
            if hold_line_due():
                said_for = speech.word_events
                runtime.say_hold_line()
            await speech.changed()

    watcher = asyncio.create_task(hold_lines(), name="frontdesk.hold_lines")
    try:
        yield
        watcher.cancel()
        # The result must not start while the caller is speaking.
        limit = runtime.settings.hold_for_caller_seconds
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(_until_silent(speech), limit)
        if speech.word_events > said_for:  # they spoke before the result began
            said_for = speech.word_events
            runtime.say_hold_line()
    finally:
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher
        if handle.done():
            gate.release(key)
        else:
            handle.add_done_callback(lambda _: gate.release(key))


async def _until_silent(speech: Any) -> None:
    while speech.speaking:
        await speech.changed()
