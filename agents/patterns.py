"""The four long-running patterns, as LiveKit function tools.

A plugin author writes ``@tool(pattern=...)``; this module turns the ``ToolSpec`` into a raw
LiveKit function tool whose handler does the plumbing for that pattern and writes every state
change to the TaskStore. The decision table is in docs/patterns.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from livekit.agents import RunContext, llm
from livekit.agents.llm import function_tool

from frontdesk.agents import keys
from frontdesk.agents.held_results import critical_turn, until_done_or_barge_in
from frontdesk.core.context import ToolContext
from frontdesk.core.errors import ToolError
from frontdesk.core.execution import execute, stable_key
from frontdesk.core.execution import failure as core_failure
from frontdesk.core.jobs import client_for
from frontdesk.core.recording import (
    RESTART,
    invalid_input_sentence,
    job_args_problem,
    record,
    stored_args,
    stored_error,
    to_jsonable,
)
from frontdesk.core.tools import REFERENCE, ToolSpec, mask_cards
from frontdesk.db.models import utcnow
from frontdesk.db.outage import OUTAGE, from_database, one_line
from frontdesk.db.store import Task

if TYPE_CHECKING:
    from frontdesk.agents.call import Call

log = logging.getLogger("frontdesk.patterns")

INTERRUPTED = "interrupted by caller"
DISCARDED = "finished as the caller spoke over it; result discarded"
STORE_DOWN = (
    "Sorry, I can't do that right now; our records system isn't answering. Let's try again shortly."
)


def function_tool_for(spec: ToolSpec, runtime: Call, department: str) -> llm.Tool:
    schema = {"name": spec.name, "description": spec.description, "parameters": spec.json_schema()}

    async def handler(raw_arguments: dict[str, Any], context: RunContext) -> Any:
        return await run_tool(spec, runtime, department, raw_arguments, context)

    return function_tool(handler, raw_schema=schema)


def for_llm(result: Any) -> str:
    """What the LLM reads: text as is, anything else as compact JSON; card numbers masked."""
    if result is None:
        return "Done."
    # Masked again here: a replayed row may predate result masking.
    return mask_cards(result if isinstance(result, str) else json.dumps(result, default=str))


def failure(exc: BaseException, spec: ToolSpec) -> tuple[str, str]:
    """As ``frontdesk.core.execution.failure``; LiveKit's own ToolError is a clean message too."""
    if isinstance(exc, llm.ToolError):
        return stored_error(str(exc)), stored_error(str(exc))
    if from_database(exc) and OUTAGE.failed(exc):
        # A tool that reads or writes the store (a ledger, its own table) met an outage: the
        # caller hears that, and the process logs the outage once (db/outage.py).
        return f"the task database was not answering: {one_line(exc)}", STORE_DOWN
    return core_failure(exc, spec)


# The key of a tool call and "the same call again" (agents/keys.py): by the database's clock.
_digest = keys.digest


async def _create_critical(
    runtime: Call, spec: ToolSpec, digest: str, fields: dict[str, Any]
) -> tuple[str, Task | str]:
    """(stable key, the new row or the answer of an earlier attempt).

    The same tool, arguments and caller within the window (by the database's clock, see
    agents/keys.py) are one logical call; they share the stable key that a plugin hands to its
    side effects (a payment gateway), while each row gets a unique suffixed copy because the
    column is unique. The first attempt's lookup and INSERT are one write (no separate read on
    the turn); rows are looked for over ``KEYS_KEPT`` and judged by the times in their keys.
    """
    now = await keys.clock_for(runtime.store).now()
    window = runtime.settings.idempotency_window_seconds
    key = keys.fresh(digest, now)
    row, found = await runtime.store.create_unless_recent(
        key_prefix=digest, since=now - keys.KEYS_KEPT, idempotency_key=key, **fields
    )
    if row is not None:
        return key, row
    prior = keys.same_call(found, now, window)
    if not prior:
        # Only older calls of the same details: this is a new one, under a new key.
        return key, await runtime.store.create(**fields, idempotency_key=key)
    base = stable_key(prior[-1].idempotency_key or "")
    replay = await _replay(runtime, spec, prior)
    if replay is not None:
        return base, replay
    row = await runtime.store.create(**fields, idempotency_key=keys.attempt(base, now))
    return base, row


async def run_tool(
    spec: ToolSpec, runtime: Call, department: str, raw_args: Any, run_ctx: RunContext | None
) -> Any:
    store = runtime.store
    common = dict(
        caller=runtime.caller,
        tool=spec.name,
        pattern=spec.pattern,
        session_id=runtime.session_id,
        department=department,
        plugin=spec.plugin,
    )
    config = runtime.registry.configs.get(spec.plugin or "")
    try:
        args = spec.validate(raw_args, config)  # typed, as the tool declares them
        stored = _stored(spec, args)  # the same in JSON mode, for the row
        problem = job_args_problem(stored) if spec.pattern == "background" else None
        if problem is not None:
            raise ToolError(problem)
    except ToolError as exc:
        sentence = invalid_input_sentence(spec, str(exc))
        # Bad input still leaves a trace: a failed row saying what was wrong. It is written
        # under a lease, so a crash between the two writes cannot leave it running for ever.
        try:
            row = await store.create(
                **common,
                status="running",
                args=stored_args(spec, raw_args),
                lease_owner=runtime.owner,
                lease_seconds=runtime.settings.job_lease_seconds,
            )
            await _close(
                runtime,
                row.id,
                "failed",
                error=sentence,
                note="invalid arguments",
                delivered_at=utcnow(),
            )
        except Exception:
            # The caller still hears what was wrong; the trace is what the database lost.
            log.warning("could not record invalid arguments for %s", spec.name, exc_info=True)
        raise llm.ToolError(sentence) from None

    if spec.pattern == "critical" and run_ctx is not None:
        # Before any row or side effect: once this returns, the caller cannot cut us off.
        try:
            run_ctx.disallow_interruptions()
        except RuntimeError:
            log.info("%s not started: the caller interrupted before it began", spec.name)
            return None
    # The same critical call twice at once (an LLM can emit duplicate parallel calls) must
    # not race past the idempotency check: the second waits and is answered from the first.
    digest = _digest(runtime.caller, spec.name, stored)
    same_call = (
        runtime.critical_lock(digest) if spec.pattern == "critical" else contextlib.nullcontext()
    )
    async with same_call:
        try:
            if spec.pattern == "background":
                row = await store.create(
                    **common, status="queued", args=stored, note="queued for the runner"
                )
                await enqueue(runtime, row.id)
                return background_ack(spec, row)
            fields = dict(
                common,
                status="running",
                args=spec.redact(stored),
                lease_owner=runtime.owner,
                lease_seconds=runtime.settings.job_lease_seconds,
            )
            if spec.pattern == "critical":
                logical_key, created = await _create_critical(runtime, spec, digest, fields)
                if isinstance(created, str):
                    return created
                row = created
            else:
                # No window to judge here: unique is enough (no round trip for the time).
                logical_key = keys.fresh(digest, utcnow())
                row = await store.create(**fields)
        except llm.ToolError:
            raise
        except Exception as exc:
            if not OUTAGE.failed(exc):  # an outage is logged once per process, not per call
                log.exception("task store unavailable for %s", spec.name)
            raise llm.ToolError(STORE_DOWN) from None

    ctx = ToolContext(
        caller=runtime.caller,
        session_id=runtime.session_id,
        task_id=row.id,
        department=department,
        idempotency_key=logical_key,
        store=store,
        run_ctx=run_ctx,
        hook=runtime.registry.pm.hook,
        config=config,
    )
    work = asyncio.ensure_future(execute(spec, ctx, args))
    runtime.track(row.id, spec, work)

    if spec.pattern == "fire_and_forget":
        work.add_done_callback(lambda w: runtime.spawn(finish(runtime, spec, row.id, w)))
        return spec.ack or "Okay, that's taken care of."

    if spec.pattern == "critical":
        handle = run_ctx.speech_handle if run_ctx is not None else None
        if handle is not None:
            runtime.critical_turns[row.id] = handle
        try:
            with _in_turn(runtime, handle):
                async with critical_turn(runtime, handle):
                    async with runtime.progress.working(), _ack(spec, runtime, run_ctx):
                        await asyncio.wait([work])
        finally:
            runtime.critical_turns.pop(row.id, None)
        return await finish(runtime, spec, row.id, work)

    # interruptible
    if run_ctx is None:
        await asyncio.wait([work])
        return await finish(runtime, spec, row.id, work)
    handle = run_ctx.speech_handle
    with _in_turn(runtime, handle):
        async with runtime.progress.working(), _ack(spec, runtime, run_ctx):
            barged = await until_done_or_barge_in(runtime, work, handle)
    if barged or (handle.interrupted and not work.done()):
        work.cancel()
        with contextlib.suppress(BaseException):
            await work  # let the tool's own cleanup (close a request, stop a query) run
        runtime.untrack(row.id)
        note = INTERRUPTED if work.cancelled() else DISCARDED
        await _close(
            runtime, row.id, "cancelled", error=INTERRUPTED, note=note, delivered_at=utcnow()
        )
        if barged:
            runtime.emit({"type": "barge_in", "task_id": row.id, "tool": spec.name})
            # The turn is over: no reply with this tool's output (the caller's new turn is
            # answered when LiveKit commits it), and no ack still queued.
            with contextlib.suppress(RuntimeError):
                handle.interrupt()
        return None  # no stale result reaches the LLM
    return await finish(runtime, spec, row.id, work)


@contextlib.contextmanager
def _in_turn(runtime: Call, handle: Any) -> Iterator[None]:
    """In-turn work is running, and then its result is spoken (until ``handle``, the tool's
    turn, is done): a backchannel alone is not passed on as a turn, which would interrupt it."""
    gate = runtime.transcripts
    if gate is None:
        yield
        return
    gate.busy += 1

    def done(_: Any = None) -> None:
        gate.busy -= 1

    try:
        yield
    finally:
        if handle is not None:
            handle.add_done_callback(done)
        else:
            done()


@contextlib.asynccontextmanager
async def _ack(spec: ToolSpec, runtime: Call, run_ctx: RunContext | None) -> AsyncIterator[None]:
    """Say the tool's ``ack`` if its work is still running after the threshold. An ack that
    has not started playing when the work ends is dropped: it never starts after the work."""
    if not (spec.ack and run_ctx is not None):
        yield
        return
    ack: str = spec.ack
    made: list[Any] = []

    def source(step: int) -> Any:
        # Cached audio plays at once; an uncached phrase is synthesized as usual.
        clip = runtime.acks.cached(ack) if runtime.acks is not None else None
        audio = runtime.acks.frames(clip) if clip is not None else None
        handle = runtime.session.say(ack, audio=audio) if audio is not None else None
        handle = handle or runtime.session.say(ack)
        made.append(handle)
        return handle

    try:
        async with run_ctx.with_filler(source, delay=runtime.settings.ack_after_seconds):
            yield
    finally:
        for handle in made:
            if not handle.done() and not _playing(runtime, handle):
                with contextlib.suppress(RuntimeError):
                    handle.interrupt()


def _playing(runtime: Call, handle: Any) -> bool:
    session = runtime.session
    return session.current_speech is handle and session.agent_state == "speaking"


async def finish(runtime: Call, spec: ToolSpec, task_id: int, work: asyncio.Future[Any]) -> Any:
    """Record how ``work`` ended and return what the LLM should read (or raise ToolError)."""
    runtime.untrack(task_id)
    if work.cancelled():
        await _close(
            runtime,
            task_id,
            "cancelled",
            error="cancelled",
            note="cancelled",
            delivered_at=utcnow(),
        )
        return None
    exc = work.exception()
    if exc is None:
        result = to_jsonable(work.result())
        await _close(runtime, task_id, "succeeded", result=result, delivered_at=utcnow())
        return for_llm(result)
    error, sentence = failure(exc, spec)
    await _close(runtime, task_id, "failed", error=error, note=error, delivered_at=utcnow())
    if spec.pattern == "fire_and_forget":
        return None  # errors are recorded, never raised into the session
    raise llm.ToolError(sentence)


async def _close(runtime: Call, task_id: int, status: str, **values: Any) -> None:
    """Write a task's end. If the database is down the caller still gets the answer now, and
    the write is retried in the background until the database is back (or the call ends)."""
    try:
        await runtime.store.transition(task_id, status, **values)
    except Exception as exc:
        if not OUTAGE.failed(exc):
            log.warning("could not record the end of task %s; retrying", task_id, exc_info=True)
        retry = runtime.settings.record_retry_seconds
        runtime.spawn(record(runtime.store, task_id, status, retry_seconds=retry, **values))


async def _replay(runtime: Call, spec: ToolSpec, prior: list[Task]) -> str | None:
    """A critical call repeated within the window: answer from the first, never redo it.

    A row left running by a dead call process (its lease expired) is closed here rather than
    waiting for a runner, and earlier failures the caller was never told about are marked
    told: the caller is retrying now and hears this attempt's outcome. The retry runs under
    the same stable key, so a plugin reconciles its side effect (billing asks the gateway)."""
    done = next((t for t in prior if t.status == "succeeded"), None)
    if done is not None:
        log.info("critical %s replayed from task %s", spec.name, done.id)
        if done.delivered_at is None:
            # Settled later (a housekeeping job wrote how it ended): the caller hears it now,
            # so no follow-up says it again.
            with contextlib.suppress(Exception):
                await runtime.store.mark_delivered(done.id, note="replayed to the caller")
        return for_llm(done.result)
    now = utcnow()
    for task in prior:
        if task.status == "running" and task.id not in runtime.inflight:
            if task.lease_expires_at is None or task.lease_expires_at > now:
                raise llm.ToolError(
                    "That request is still being processed. I'll let you know when it completes."
                )
            await runtime.store.transition(
                task.id,
                "failed",
                error=RESTART,
                note=f"{RESTART} ({task.lease_owner}); the caller retried",
                expect=("running",),
                owner=task.lease_owner,
                lease_expired=True,
                delivered_at=now,
            )
        elif task.status == "failed" and task.delivered_at is None:
            await runtime.store.mark_delivered(task.id, note="superseded by the caller's retry")
    running = next((t for t in prior if t.id in runtime.inflight), None)
    if running is not None:
        work = runtime.inflight[running.id][1]
        await asyncio.wait([work])
        # The twin's own outcome, not its row: its end may not be written yet (the write
        # queues behind the writer's checkpoint or another process's lock), and a row read
        # as still running here would charge the caller a second time.
        if not work.cancelled() and work.exception() is None:
            return for_llm(to_jsonable(work.result()))
    return None


async def enqueue(runtime: Call, task_id: int) -> None:
    """Hand a queued job to the runners through DBOS's client (on a worker thread: the call's
    loop is not held). The row is already the promise: if the job system cannot take it now,
    a runner finds the row and enqueues it (core/reconcile.py), so the caller's ack stands."""
    try:
        await client_for(runtime.settings).enqueue(task_id)
    except Exception as exc:
        if not OUTAGE.failed(exc):
            log.warning("task %s queued; a runner will pick it up from its row (%s)", task_id, exc)


def _stored(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` in JSON mode; a type that validated but will not dump is the caller's bad
    input, said plainly, and the author's bug, logged."""
    try:
        return spec.to_json(args)
    except Exception:
        log.exception("arguments of %s validated but cannot be stored as JSON", spec.name)
        raise ToolError("I couldn't use those details.") from None


def background_ack(spec: ToolSpec, row: Task) -> str:
    """What the LLM is told when a job is queued: the tool's ``ack`` with the reference and a
    promise, or its ``ack`` alone when it says ``{reference}`` itself."""
    if spec.ack and REFERENCE in spec.ack:
        return spec.ack.replace(REFERENCE, str(row.id))
    what = spec.ack or f"I've started your {spec.what}"
    return f"{what.rstrip('.')}; reference number {row.id}. I'll tell you when it's ready."
