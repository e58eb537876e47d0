"""The background-job runner: claims queued jobs under a lease and runs them by tool name.

It loads the same plugins as the call processes and talks to them only through the store.
``frontdesk runner`` runs one on its own; ``start``, ``simulate`` and ``console`` embed one.
Leases are renewed while a job runs; a job whose runner died is re-queued (resumable, under
the attempt limit) or failed with "interrupted by restart" by whichever runner notices first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from frontdesk.core.context import ToolContext
from frontdesk.core.errors import ToolError
from frontdesk.core.execution import execute, failure, stable_key
from frontdesk.core.host import Registry
from frontdesk.core.recording import RESTART, record, stored_error, to_jsonable
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.db.models import utcnow
from frontdesk.db.store import Task, TaskStore

log = logging.getLogger("frontdesk.runner")

# How long a stopping runner waits for its cancelled jobs before giving their leases back.
STOP_GRACE_SECONDS = 5.0


class Runner:
    def __init__(
        self, store: TaskStore, registry: Registry, settings: Settings, owner: str | None = None
    ) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.owner = owner or f"runner:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.jobs: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()

    def poke(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then give unfinished jobs back to the queue."""
        log.info("runner %s started", self.owner)
        await self.recover()
        last_recover = asyncio.get_running_loop().time()
        try:
            while not stop.is_set():
                claimed = None
                if len(self.jobs) < self.settings.runner_concurrency:
                    try:
                        claimed = await self.store.claim(
                            self.owner, self.settings.job_lease_seconds
                        )
                    except Exception:
                        log.exception("claim failed; retrying")
                if claimed is not None:
                    self.jobs[claimed.id] = asyncio.create_task(self._run_job(claimed))
                    continue
                now = asyncio.get_running_loop().time()
                if now - last_recover > self.settings.job_lease_seconds / 2:
                    last_recover = now
                    await self.recover()
                with contextlib.suppress(asyncio.TimeoutError):
                    waiter = asyncio.ensure_future(self._wake.wait())
                    stopper = asyncio.ensure_future(stop.wait())
                    await asyncio.wait(
                        [waiter, stopper],
                        timeout=self.settings.runner_poll_seconds,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    waiter.cancel()
                    stopper.cancel()
                self._wake.clear()
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Cancel running jobs and release their leases so another runner takes them at once.

        Bounded: a job that ignores its cancellation gets ``STOP_GRACE_SECONDS``, then its
        lease is given back anyway (the process is about to exit, so it cannot finish)."""
        jobs = dict(self.jobs)
        for job in jobs.values():
            job.cancel()
        if jobs:
            await asyncio.wait(jobs.values(), timeout=STOP_GRACE_SECONDS)
        for task_id in jobs:
            try:
                await self._give_back(task_id)
            except Exception:
                log.warning(
                    "job %s: lease not given back; it expires instead", task_id, exc_info=True
                )
        self.jobs.clear()

    async def _give_back(self, task_id: int) -> None:
        """A job stopped by shutdown: re-queued if it may run again (resumable, under the
        attempt limit), as lease recovery would; otherwise failed, and the caller told."""
        task = await self.store.get(task_id)
        spec = self.registry.tools.get(task.tool)
        resumable = spec is None or spec.resumable
        if resumable and task.attempts < self.settings.job_max_attempts:
            await self.store.release(
                self.owner,
                task_id,
                note=f"released by {self.owner} at shutdown",
                held_by=self.owner,
            )
        else:
            why = "not resumable" if not resumable else "attempt limit reached"
            await self.store.transition(
                task_id,
                "failed",
                error=f"interrupted by shutdown ({why})",
                note=f"stopped by {self.owner} at shutdown",
                expect=("running",),
                owner=self.owner,
            )

    async def recover(self) -> list[Task]:
        """Close or re-queue every running task whose lease expired (its process died).

        Background jobs are re-queued while resumable and under ``job_max_attempts``, else
        failed. In-turn rows (their call process died) are failed; a critical one whose retry
        already succeeded under the same key is closed as told. Every change is compare-and-set
        on the expired lease, so runners racing here, or a holder that renews late, never double
        a job. A failed row keeps ``delivered_at`` empty, so the caller is told at their next
        chance."""
        handled: list[Task] = []
        try:
            expired = await self.store.expired()
        except Exception:
            log.exception("lease scan failed")
            return handled
        for task in expired:
            try:
                done = await self._reclaim(task)
            except Exception:
                log.exception("could not reclaim task %s", task.id)
                continue
            if done is not None:
                log.info("task %s (%s) reclaimed: now %s", task.id, task.tool, done.status)
                handled.append(done)
        return handled

    async def _reclaim(self, task: Task) -> Task | None:
        holder = task.lease_owner
        guard: dict[str, Any] = {"expect": ("running",), "owner": holder, "lease_expired": True}
        if task.pattern == "background":
            spec = self.registry.tools.get(task.tool)
            resumable = spec is None or spec.resumable
            limit = self.settings.job_max_attempts
            if resumable and task.attempts < limit:
                return await self.store.release(
                    self.owner,
                    task.id,
                    note=f"lease expired ({holder}); re-queued after attempt {task.attempts}",
                    held_by=holder,
                    lease_expired=True,
                )
            why = "not resumable" if not resumable else f"attempt {task.attempts} of {limit}"
            return await self.store.transition(
                task.id, "failed", error=RESTART, note=f"{RESTART} ({holder}; {why})", **guard
            )
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
        (billing reconciles its pending payment through the gateway on the caller's retry)."""
        if not task.idempotency_key:
            return None
        base = stable_key(task.idempotency_key)
        since = task.created_at - timedelta(seconds=self.settings.idempotency_window_seconds)
        rows = await self.store.recent_keys(task.caller, task.tool, base, since)
        return next((t for t in rows if t.id != task.id and t.status == "succeeded"), None)

    async def _run_job(self, job: Task) -> None:
        try:
            await self._execute(job)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("job %s crashed the runner's bookkeeping", job.id)
        finally:
            self.jobs.pop(job.id, None)
            self._wake.set()

    async def _execute(self, job: Task) -> None:
        spec = self.registry.tools.get(job.tool)
        if spec is None or spec.pattern != "background":
            await self._finish(
                job, "failed", error=f"no background tool named {job.tool!r} is loaded here"
            )
            return
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
        )
        try:
            # The row holds JSON; validating it again gives the tool its typed arguments (a
            # date, a Decimal, a model), and catches a row that predates a signature change.
            args = spec.validate(dict(job.args or {}), config)
        except ToolError as exc:
            await self._finish(job, "failed", error=stored_error(str(exc)))
            return
        work = asyncio.ensure_future(execute(spec, ctx, args))
        lost = False
        try:
            while not work.done():
                await asyncio.wait([work], timeout=self.settings.job_lease_seconds / 3)
                if work.done():
                    break
                try:
                    held = await self.store.renew(
                        self.owner, self.settings.job_lease_seconds, [job.id]
                    )
                except Exception:
                    # The database is unreachable: keep working and try again next beat. If the
                    # lease runs out meanwhile and another runner takes the job, the next renew
                    # says so and this copy stops.
                    log.warning("could not renew the lease on job %s", job.id, exc_info=True)
                    continue
                if job.id not in held:
                    lost = True  # cancelled by the caller or operator, or reclaimed
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    return
        except asyncio.CancelledError:
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            raise
        if lost:
            return
        exc = work.exception()
        if exc is None:
            await self._finish(job, "succeeded", result=to_jsonable(work.result()))
        else:
            error, _ = failure(exc, spec)
            await self._finish(job, "failed", error=error)

    async def _finish(self, job: Task, status: str, **values: Any) -> None:
        # Retried through a database outage: the result is not thrown away and re-run.
        done = await record(
            self.store,
            job.id,
            status,
            expect=("running",),
            note=values.get("error"),
            owner=self.owner,
            **values,
        )
        if done is None:
            log.info("job %s was cancelled or reclaimed before it finished here", job.id)


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
