"""What a caller hears, and what the log says, when a provider fails for good.

LiveKit retries a failed LLM, STT or TTS request (``Retries``), a chain moves to its next
entry, and only when all of that fails does the session emit an unrecoverable ``error`` event.
``FailureGuard`` answers that event:

- the caller hears a short apology, with audio synthesized ahead of time by the ack cache, so
  it plays even when the TTS is what failed (text mode: the apology is the text reply);
- the log gets one line naming the provider entries and the cause; LiveKit's own tracebacks
  for these failures are dropped unless debug logging is on (``quiet_provider_noise``);
- the call goes on: the next turn tries again (a chain's failed entries are probed in the
  background and rejoin when they recover). After ``FRONTDESK_MAX_PROVIDER_FAILURES`` failed
  turns in a row (3) with no reply in between, the agent says goodbye and ends the call, and
  rows of tools still in flight are closed with the failure as the reason.

LiveKit would close the session itself after 3 unrecoverable errors in a row, but it counts a
played apology as the agent speaking and starts again, so this guard owns the policy.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

log = logging.getLogger("frontdesk.providers")

APOLOGY = "Sorry, I'm having a technical problem and couldn't answer that. Could you say it again?"
GOODBYE = (
    "I'm sorry, our system is having technical trouble right now. "
    "Please call back in a few minutes. Goodbye."
)
PHRASES = (APOLOGY, GOODBYE)

_NOISE = re.compile(
    r"failed to (generate|recognize|synthesize)|switching to next|recovery (failed|timed out)"
    r"|are unavailable|failed after sending chunk|closing due to unrecoverable error"
    r"|unexpected error, switching|timed out"
)
_QUIETED: set[str] = set()


def _api_error_in(exc: BaseException | None) -> bool:
    from livekit.agents import APIError

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, APIError | TimeoutError):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class _ProviderNoise(logging.Filter):
    """Drops LiveKit's records about a provider failure (retries, fallbacks, the inference
    task's traceback) unless its logger is at DEBUG: the guard logs one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or logging.getLogger(record.name).isEnabledFor(
            logging.DEBUG
        ):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _api_error_in(exc):
            return False
        return not _NOISE.search(record.getMessage())


def quiet_provider_noise(loggers: Iterable[str] = ()) -> None:
    """Install the filter on livekit.agents and the given plugin loggers (idempotent). A
    logger's filter sees only its own records, so each emitting logger gets one."""
    names = ["livekit.agents", *loggers]
    for name in names:
        if name not in _QUIETED:
            logging.getLogger(name).addFilter(_ProviderNoise())
            _QUIETED.add(name)


def cause_of(exc: BaseException | None) -> str:
    """The error and its root cause, one line: ``APIConnectionError: Connection error.
    (ConnectError: All connection attempts failed)``."""
    if exc is None:
        return "unknown error"

    def one(e: BaseException) -> str:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"{type(e).__name__}: {text}" if text else type(e).__name__

    root, depth = exc, 0
    while (root.__cause__ or root.__context__) is not None and depth < 8:
        root, depth = root.__cause__ or root.__context__, depth + 1  # type: ignore[assignment]
    if root is exc or type(root).__name__ in str(exc):  # LiveKit often names the cause already
        return one(exc)
    return f"{one(exc)} ({one(root)})"


# The longest an apology or goodbye waits for the caller's pending turn to be committed.
PENDING_TURN_WAIT = 3.0


class FailureGuard:
    """One per call: listens to the session's ``error`` events (see the module docstring)."""

    def __init__(
        self,
        session: Any,
        *,
        describe: Callable[[Any], str] = lambda obj: getattr(obj, "label", type(obj).__name__),
        parts: Iterable[Any] = (),
        acks: Any = None,
        max_failures: int = 3,
        secrets: Iterable[str] = (),
        on_end: Callable[[str], Awaitable[None]] | None = None,
        emit: Callable[[dict[str, Any]], None] | None = None,
        protect: Callable[[Any], Any] | None = None,
        pending_turn: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.session = session
        # The apology and goodbye are uninterruptible: ``protect`` keeps the caller's words
        # from LiveKit while they play, and they first wait (at most the given seconds) for a
        # turn of the caller's still to be committed, because LiveKit drops a turn committed
        # during such speech.
        self.protect = protect or (lambda handle: handle)
        self.pending_turn = pending_turn
        self.describe = describe
        self.acks = acks
        self.max_failures = max_failures
        self.secrets = [s for s in secrets if s and len(s) >= 4]
        self.on_end = on_end
        self.emit = emit or (lambda event: None)
        self.failures = 0  # failed turns in a row
        self.ended = False
        # A voice turn may ask the LLM twice (preemptive generation on the final transcript,
        # again at turn commit), so failures are counted once per caller turn: a turn starts
        # when the caller starts speaking, or (text, no speech events) when their words arrive.
        self._turn = 0
        self._counted_turn = -1
        self._spoke = False
        self._last: dict[int, BaseException] = {}  # a chain entry's latest failure
        self._parts = list(parts)
        self._tasks: set[asyncio.Task[Any]] = set()
        session.on("error", self._on_error)
        session.on("conversation_item_added", self._on_item)
        session.on("user_state_changed", self._on_user_state)
        for part in self._parts:  # the entries behind an adapter: their own causes
            part.on("error", lambda err, part=part: self._on_part_error(part, err))

    def _scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def _on_part_error(self, part: Any, err: Any) -> None:
        if not getattr(err, "recoverable", True):
            self._last[id(part)] = err.error

    def _on_user_state(self, ev: Any) -> None:
        if getattr(ev, "new_state", None) == "speaking":
            self._turn += 1
            self._spoke = True

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        role = getattr(item, "role", None)
        if role == "user":
            if not self._spoke:
                self._turn += 1
            self._spoke = False
        elif role == "assistant" and item.text_content not in PHRASES:
            self.failures = 0  # a real reply: the providers work again

    def _on_error(self, ev: Any) -> None:
        err = ev.error
        if getattr(err, "recoverable", True) or self.ended:
            return  # LiveKit retries (or the chain moves on); only the final failure counts
        if self._counted_turn == self._turn:
            log.debug("provider failed again in the same caller turn: %r", err)
            return
        self._counted_turn = self._turn
        kind = str(getattr(err, "type", "provider_error")).split("_")[0].upper()
        entries = [p for p in self._parts if id(p) in self._last and self._belongs(p, ev.source)]
        if entries:
            detail = "; ".join(
                f"{self.describe(p)}: {cause_of(self._last.pop(id(p)))}" for p in entries
            )
        else:
            detail = f"{self.describe(ev.source)}: {cause_of(getattr(err, 'error', None))}"
        self.failures += 1
        log.warning(self._scrub(f"{kind} failed ({self.failures} in a row): {detail}"))
        self.emit({"type": "provider_failed", "kind": kind.lower(), "detail": self._scrub(detail)})
        if self.failures >= self.max_failures:
            self.ended = True
            self._spawn(
                self._end(f"{kind} failed {self.failures} times in a row: {self._scrub(detail)}")
            )
        else:
            # On voice the failure may come from the preemptive request, before the caller's
            # turn is committed: the apology follows the commit, and is not cut short by it.
            self._spawn(self._apologise())

    async def _apologise(self) -> None:
        await self._after_pending_turn()
        if not self.ended:
            self._say(APOLOGY, allow_interruptions=False)

    def _belongs(self, part: Any, source: Any) -> bool:
        from frontdesk.agents.provider_build import inner

        return any(part is p or part is getattr(p, "_stt", None) for p in inner(source))

    async def _after_pending_turn(self) -> None:
        if self.pending_turn is not None:
            await self.pending_turn(PENDING_TURN_WAIT)

    def _say(self, text: str, **options: Any) -> Any:
        clip = self.acks.cached(text) if self.acks is not None else None
        try:
            if clip is not None:
                handle = self.session.say(text, audio=self.acks.frames(clip), **options)
            else:
                handle = self.session.say(text, **options)
        except RuntimeError as exc:  # the session is already closing
            log.debug("could not say %r: %r", text, exc)
            return None
        return self.protect(handle)

    async def _end(self, reason: str) -> None:
        await self._after_pending_turn()
        handle = self._say(GOODBYE, allow_interruptions=False)  # heard whole before hang-up
        if handle is not None:
            try:
                await asyncio.wait_for(handle.wait_for_playout(), 15)
            except Exception as exc:  # a goodbye that cannot play must not keep the call open
                log.debug("goodbye did not play: %r", exc)
        if self.on_end is not None:
            await self.on_end(reason)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


__all__ = ["APOLOGY", "GOODBYE", "PHRASES", "FailureGuard", "cause_of", "quiet_provider_noise"]
