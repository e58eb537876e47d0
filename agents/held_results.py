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
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontdesk.agents.call import Call

log = logging.getLogger("frontdesk.session")

# Said when the caller speaks over critical work; their words are answered after its result.
HOLD_LINE = "One moment, I'm just finishing that."


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
    said_for = speech.spoken  # words from here on get a hold line

    def hold_line_due() -> bool:
        return speech.spoken > said_for and not speech.speaking

    async def hold_lines() -> None:
        nonlocal said_for
        while True:
            if hold_line_due():
                said_for = speech.spoken
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
        if speech.spoken > said_for:  # they spoke before the result began
            said_for = speech.spoken
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


def say_hold_line(runtime: Call) -> Any:
    """The hold line, uninterruptible and from its cached clip when there is one; the caller's
    words wait in the gate while it plays. Returns its SpeechHandle (None if it cannot be said)."""
    runtime.emit({"type": "hold", "tasks": list(runtime.critical_turns)})
    try:
        clip = runtime.acks.cached(HOLD_LINE) if runtime.acks is not None else None
        options: dict[str, Any] = {"allow_interruptions": False}
        if clip is not None:
            options["audio"] = runtime.acks.frames(clip)
        return runtime.protect(runtime.session.say(HOLD_LINE, **options))
    except Exception:
        log.warning("saying the hold line failed", exc_info=True)
        return None


async def before_answer(runtime: Call) -> None:
    """A caller turn was committed and is about to be answered (``on_user_turn_completed``). If
    critical work is running or its result is still to be spoken, they hear the hold line, and
    the answer waits until that result has been spoken in full. On voice the gate keeps their
    words back until then, so this is for text and for words that reached LiveKit earlier."""
    turns = [h for h in runtime.critical_turns.values() if h is not None]
    running = [
        work
        for spec, work in runtime.inflight.values()
        if spec.pattern == "critical" and not work.done()
    ]
    if not turns and not running:
        return
    say_hold_line(runtime)
    if running:
        await asyncio.wait(running)
    for handle in turns:
        try:
            await handle.wait_for_playout()
        except Exception:
            log.warning("waiting for the result to be spoken failed", exc_info=True)
