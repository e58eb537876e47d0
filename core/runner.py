"""The background-job runner: a DBOS executor that runs queued jobs by tool name.

It loads the same plugins as the call processes and talks to them only through the store.
``frontdesk runner`` runs one on its own; ``start``, ``simulate`` and ``console`` embed one.

A job is a ``tasks`` row plus a DBOS workflow (core/durable.py) whose id is derived from the
task's (core/jobs.py). DBOS keeps the queue, the steps a job finished (``ctx.step``), its
durable sleeps and which executor runs what; this runner keeps our rows the truth callers and
operators read: ``running`` when a run starts, the result or error once, compare-and-set on
``running`` (a run resumed after that write finds the row finished and does nothing).

Beside the jobs a runner:
- beats and takes over dead runners' work (core/takeover.py);
- reconciles rows and workflows (a row whose enqueue failed is enqueued; a row whose workflow
  ended without writing it is closed);
- watches its jobs' rows, so a job cancelled by its caller or an operator stops at once;
- closes in-turn rows whose call process died (their lease ran out), as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from frontdesk.core import jobs as jobnames
from frontdesk.core.context import ToolContext
from frontdesk.core.errors import ToolError
from frontdesk.core.execution import execute, failure, stable_key
from frontdesk.core.host import Registry
from frontdesk.core.housekeeping import Housekeeper
from frontdesk.core.leasewatch import LeaseWatch
from frontdesk.core.reconcile import Reconciler
from frontdesk.core.recording import (
    RESTART,
    record,
    stored_error,
    to_jsonable,
)
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.core.takeover import Sweeper, claim_id, every
from frontdesk.db.models import utcnow
from frontdesk.db.outage import OUTAGE, quiet
from frontdesk.db.runners import STOPPED
from frontdesk.db.store import Task, TaskStore

log = logging.getLogger("frontdesk.runner")

# How long a stopping runner waits for its cancelled jobs (they stay pending in DBOS, and
# this runner's restart, or another runner, resumes them after their last finished step).
STOP_GRACE_SECONDS = 5.0
# How often a runner looks at its running jobs' rows for a cancel.
WATCH_SECONDS = 1.0


class Runner:
    def __init__(self, store: TaskStore, registry: Registry, settings: Settings) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.executor_id = ""
        self.jobs: dict[int, asyncio.Future[Any]] = {}  # task id -> the tool's running body
        self.workflows: dict[int, asyncio.Task[Any]] = {}  # task id -> its workflow's task
        self.cancelled: set[int] = set()
        self.stopping = False
        self.client = jobnames.JobClient(settings)
        self.sweeper: Sweeper | None = None
        self.started = asyncio.Event()
        self.leases = LeaseWatch(settings.job_lease_seconds)

    def poke(self) -> None:
        """Nothing to do: DBOS polls its queue every ``runner_poll_seconds``."""

    # -- lifecycle -----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run jobs until ``stop`` is set; unfinished ones stay pending for a restart or
        another runner."""
        from frontdesk.core import durable

        version = jobnames.job_version(self.settings)
        self.executor_id = await claim_id(self.store, self.settings, version)
        durable.install(self)
        try:
            await self._launch(version)
            self.sweeper = Sweeper(
                self.store,
                self.executor_id,
                self.settings.runner_takeover_seconds,
                self._resume_executor,
            )
            log.info("runner %s started (job version %s)", self.executor_id, version)
            self.started.set()
            # Plugins' own periodic jobs (register_housekeeping), each isolated.
            chores = Housekeeper(self.store, self.registry).run(stop)
            await asyncio.gather(self._watch(stop), self._housekeeping(stop), chores)
        finally:
            await self.stop()
            durable.install(None)

    async def _launch(self, version: str) -> None:
        from dbos import DBOS

        url = jobnames.system_url(self.settings)
        config: Any = {
            "name": jobnames.APP_NAME,
            "system_database_url": url,
            "system_database_engine": jobnames.system_engine(url),
            "dbos_system_schema": jobnames.SCHEMA,
            "executor_id": self.executor_id,
            "application_version": version,
            "log_level": "WARNING",
            "scheduler_polling_interval_sec": 3600.0,
        }
        DBOS(config=config)
        quiet("dbos")  # its queue thread logs each failed poll: the outage log says it once
        # On this loop, so DBOS runs the workflows it dequeues here, beside our store.
        DBOS.launch()
        await DBOS.register_queue_async(
            jobnames.QUEUE,
            worker_concurrency=self.settings.runner_concurrency,
            polling_interval_sec=self.settings.runner_poll_seconds,
            on_conflict="always_update",
        )

    async def stop(self) -> None:
        """Stop taking jobs, cancel the running ones (bounded), and say so in ``runners``
        so another runner resumes them at once rather than after the takeover bound."""
        if self.stopping:
            return
        self.stopping = True
        running = list(self.workflows.values())
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=STOP_GRACE_SECONDS)
        with contextlib.suppress(Exception), jobnames.late_starts() as late:
            from dbos import DBOS

            # On a thread: DBOS's queue thread may be handing this loop a workflow meanwhile.
            await asyncio.to_thread(DBOS.destroy)
        if late.count:
            log.info("runner %s: %d job(s) dequeued as it stopped stay pending for the next "
                     "runner", self.executor_id, late.count)  # fmt: skip
        # DBOS made its thread pool this loop's default executor and has just shut it down;
        # the loop goes on (console and simulate keep calls on it), so give it a fresh one.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())
        with contextlib.suppress(Exception):
            await self.client.aclose()
        if self.executor_id:
            try:
                await self.store.mark_runner(self.executor_id, STOPPED)
            except Exception:
                log.warning(
                    "runner %s: stop not recorded; others wait out the bound", self.executor_id
                )

    async def _resume_executor(self, executor_id: str) -> int:
        from dbos import DBOS

        handles = await asyncio.to_thread(DBOS._recover_pending_workflows, [executor_id])
        return len(handles)

    # -- the loops -------------------------------------------------------------------------

    async def _watch(self, stop: asyncio.Event) -> None:
        """Stop a job whose row was cancelled (by its caller or an operator) within
        ``WATCH_SECONDS`` (a job that uses ``ctx.step`` stops sooner: DBOS cancels the step)."""
        while await every(WATCH_SECONDS, stop):
            if not self.jobs:
                continue
            try:
                statuses = await self.store.task_statuses(list(self.jobs))
            except Exception as exc:
                OUTAGE.failed(exc)
                log.debug("runner %s: job watch skipped: %r", self.executor_id, exc)
                continue
            for task_id, status in statuses.items():
                work = self.jobs.get(task_id)
                if status == "cancelled" and work is not None and not work.done():
                    self.cancelled.add(task_id)
                    work.cancel()

    async def _housekeeping(self, stop: asyncio.Event) -> None:
        """Heartbeat, takeover, reconciliation and in-turn recovery, each on its interval."""
        assert self.sweeper is not None
        reconcile = Reconciler(self.store, self.client, lambda: set(self.workflows))
        loop = asyncio.get_running_loop()
        last_recover = -1e9
        while True:
            if not await self.sweeper.beat():
                log.critical(
                    "runner %s: another process holds this runner's id; stopping",
                    self.executor_id,
                )
                stop.set()
                return
            for step in (self.sweeper.sweep, reconcile.run):
                try:
                    await step()
                except Exception as exc:
                    if not OUTAGE.failed(exc):  # an outage is logged once, not per step
                        log.warning(
                            "runner %s: %s failed",
                            self.executor_id,
                            step.__qualname__,
                            exc_info=True,
                        )
            if loop.time() - last_recover > self.settings.job_lease_seconds / 2:
                last_recover = loop.time()
                await self.recover()
            if not await every(self.sweeper.interval, stop):
                return

    # -- one job (called by the workflow, core/durable.py) ---------------------------------

    async def run_job(self, task_id: int) -> str:
        if self.stopping:
            raise asyncio.CancelledError()  # left pending: resumed after the restart
        me = asyncio.current_task()
        assert me is not None
        self.workflows[task_id] = me
        try:
            return await self._run_job(task_id)
        finally:
            self.workflows.pop(task_id, None)
            self.jobs.pop(task_id, None)
            self.cancelled.discard(task_id)

    async def _begin(self, task_id: int) -> tuple[Task | None, bool]:
        """Mark the row running for this run: (the row, whether this run resumes an earlier
        one of the same workflow). Compare-and-set: a queued row becomes this workflow's
        (``lease_owner`` holds the workflow id, the note names the runner), a running row only
        resumes under the workflow that holds it, so two workflows of one task (a retry's fork
        made twice) never both run. (None, False) when there is nothing to run: finished,
        cancelled, or another workflow's."""
        from dbos import DBOS

        from frontdesk.db.hotpath import Add

        workflow = DBOS.workflow_id or ""
        values: dict[str, Any] = dict(
            note=f"started by runner {self.executor_id}",
            attempts=Add(1),
            lease_owner=workflow,
            lease_expires_at=None,
        )
        fresh = await self.store.transition(task_id, "running", expect=("queued",), **values)
        if fresh is not None:
            return fresh, False
        again = await self.store.transition(
            task_id, "running", expect=("running",), owner=workflow, **values
        )
        return again, again is not None

    async def _run_job(self, task_id: int) -> str:
        from frontdesk.core.durable import DurableSteps, is_cancellation

        job, resumed = await self._begin(task_id)
        if job is None:
            return "not runnable"
        steps = DurableSteps()
        spec = self.registry.tools.get(job.tool)
        if spec is None or spec.pattern != "background":
            error = f"no background tool named {job.tool!r} is loaded here"
            return await self._finish(steps, job, None, "failed", error=error)
        if resumed and not spec.resumable:
            error = f"{RESTART} (not resumable)"
            return await self._finish(steps, job, spec, "failed", error=error)
        config = self.registry.configs.get(spec.plugin or "")
        ctx = ToolContext(
            caller=job.caller,
            session_id=job.session_id,
            task_id=job.id,
            department=job.department,
            idempotency_key=f"job-{job.id}",
            store=self.store,
            hook=self.registry.pm.hook,
            config=config,
            durable=steps,
        )
        try:
            # The row holds JSON; validating it again gives the tool its typed arguments (a
            # date, a Decimal, a model), and catches a row that predates a signature change.
            args = spec.validate(dict(job.args or {}), config)
        except ToolError as exc:
            return await self._finish(steps, job, spec, "failed", error=stored_error(str(exc)))
        work = asyncio.ensure_future(execute(spec, ctx, args))
        self.jobs[task_id] = work
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError:
            # The runner is stopping: the job stays pending in DBOS, resumed after its last
            # finished step by this runner's restart or by another runner.
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            raise
        if work.cancelled():
            return "cancelled"  # its row was cancelled; whoever cancelled it wrote that
        exc = work.exception()
        if exc is None:
            return await self._finish(
                steps, job, spec, "succeeded", result=to_jsonable(work.result())
            )
        if is_cancellation(exc):
            raise exc  # cancelled through DBOS: DBOS parks the workflow
        error, _ = failure(exc, spec)
        return await self._finish(steps, job, spec, "failed", error=error)

    async def _finish(self, steps: Any, job: Task, spec: Any, status: str, **values: Any) -> str:
        """The job's end, written once: compare-and-set on ``running``.

        Not a DBOS step (a step costs two more writes to DBOS's tables): a run that resumes
        after this write finds the row finished and does nothing (``_begin``), so the end is
        written once whether or not DBOS recorded the workflow's own end. Through a database
        outage the write is retried for as long as the job's own timeout allows (at least
        ``record_retry_seconds``; no limit for a job without one), and DBOS waits for its own
        tables meanwhile, so a finished job is never re-run while its runner lives."""
        timeout = getattr(spec, "timeout", None)
        floor = self.settings.record_retry_seconds
        retry_for = None if timeout is None else max(timeout, floor)
        done = await record(
            self.store,
            job.id,
            status,
            expect=("running",),
            note=values.get("error"),
            retry_seconds=retry_for,
            **values,
        )
        if done is None:
            log.info("job %s was cancelled or closed before it finished here", job.id)
            return "already closed"
        return status

    # -- in-turn rows left by dead call processes ------------------------------------------

    async def recover(self) -> list[Task]:
        """Close every in-turn row whose lease nobody renewed for a full lease (its call
        process died), judged by the lease's value on this runner's monotonic clock, never by
        comparing clocks (core/leasewatch.py).

        Background jobs are not here: DBOS resumes them. A critical row whose retry already
        succeeded under the same key is closed as told. Every change is compare-and-set on
        the lease value judged, so runners racing here, or a holder that renews late, never
        double a close. A failed row keeps ``delivered_at`` empty, so the caller is told at
        their next chance."""
        handled: list[Task] = []
        if self.sweeper is not None and self.sweeper.healthy_since is None:
            self.leases.store_failed()  # our heartbeat failed: nobody could renew either
        try:
            stale = self.leases.stale(await self.store.leased())
        except Exception as exc:
            self.leases.store_failed()
            if not OUTAGE.failed(exc):
                log.exception("lease scan failed")
            return handled
        for task in stale:
            try:
                done = await self._reclaim(task)
            except Exception as exc:
                if not OUTAGE.failed(exc):
                    log.exception("could not close task %s", task.id)
                continue
            if done is not None:
                log.info("task %s (%s) closed: now %s", task.id, task.tool, done.status)
                handled.append(done)
        return handled

    async def _reclaim(self, task: Task) -> Task | None:
        holder = task.lease_owner
        guard: dict[str, Any] = {
            "expect": ("running",),
            "owner": holder,
            "lease": task.lease_expires_at,  # still the value judged: nobody renewed since
        }
        if task.pattern == "critical":
            twin = await self._completed_twin(task)
            if twin is not None:
                # The caller retried and the retry completed: they have heard that outcome.
                return await self.store.transition(
                    task.id,
                    "failed",
                    error=RESTART,
                    note=f"{RESTART} ({holder}); the same request completed as task {twin.id}",
                    delivered_at=utcnow(),
                    **guard,
                )
        return await self.store.transition(
            task.id, "failed", error=RESTART, note=f"{RESTART} ({holder})", **guard
        )

    async def _completed_twin(self, task: Task) -> Task | None:
        """Another row of the same logical critical call (same stable idempotency key) that
        succeeded. What a tool did outside the store under the key only the tool can check
        (billing's reconciler settles its pending payment through the gateway)."""
        if not task.idempotency_key:
            return None
        base = stable_key(task.idempotency_key)
        since = task.created_at - timedelta(seconds=self.settings.idempotency_window_seconds)
        rows = await self.store.recent_keys(task.caller, task.tool, base, since)
        return next((t for t in rows if t.id != task.id and t.status == "succeeded"), None)


async def serve(
    settings: Settings,
    registry: Registry,
    stop: asyncio.Event,
    ready: Callable[[], None] | None = None,
) -> None:
    """Open the store, run a Runner until ``stop``, close. ``ready`` is called once the store
    is open, so an embedder can tell a database that cannot be opened from a running runner.
    Used by `frontdesk runner` and the runner `frontdesk start` embeds."""
    store = await open_store(settings.database_url, registry)
    store.observers.append(registry.observe)
    if ready is not None:
        ready()
    try:
        await Runner(store, registry, settings).run(stop)
    finally:
        await registry.drain(2.0)
        await store.close()
