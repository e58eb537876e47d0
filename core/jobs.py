"""Background jobs on DBOS, as seen from outside the runner: names, the system database, and
``JobClient`` (enqueue, cancel, retry) for call processes and operator commands.

A background job is a ``tasks`` row (the record everyone reads) plus a DBOS workflow that runs
it (core/runner.py, core/durable.py). The workflow's id is derived from the task's id, so
enqueueing twice is one workflow, and any process can find a task's workflow. Nothing here
launches DBOS: ``JobClient`` wraps ``DBOSClient``, which only writes DBOS's tables. The dbos
package is imported lazily (about a second cold), so commands that never touch a job never pay
for it; a call process imports it in prewarm (worker.py), not on a call's event loop.

Where DBOS keeps its tables:
- Postgres: schema ``dbos`` of the same database;
- SQLite: a separate file beside the main one (``frontdesk.db`` -> ``frontdesk.dbos.db``), so its
  generic table names (``queues``, ``notifications``, ``streams``) never meet a plugin's.
``FRONTDESK_JOBS_DATABASE_URL`` overrides either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL, make_url

if TYPE_CHECKING:
    import sqlalchemy as sa

    from frontdesk.core.settings import Settings
    from frontdesk.db.store import Task, TaskStore

log = logging.getLogger("frontdesk.jobs")

APP_NAME = "frontdesk"
QUEUE = "frontdesk-jobs"
WORKFLOW = "frontdesk.job"
SCHEMA = "dbos"  # Postgres only
# The DBOS system schema version dbos 3.4 migrates to (tests/test_jobs_schema.py checks it
# against dbos's own list), so `db current` can say "head" without importing dbos (~1 s).
DBOS_SCHEMA_VERSION = 125
# DBOS statuses of a workflow that may still run (or is running).
ACTIVE = ("ENQUEUED", "PENDING", "DELAYED")


def workflow_id(task_id: int) -> str:
    """The workflow of a task's first run (a retry forks it under a fresh id)."""
    return f"frontdesk-task-{int(task_id)}"


def task_of(workflow: str) -> int | None:
    prefix = "frontdesk-task-"
    return int(workflow[len(prefix) :]) if workflow.startswith(prefix) else None


def system_url(settings: Settings) -> str:
    """DBOS's system database: the setting, else derived from ``database_url``."""
    if settings.jobs_database_url:
        return settings.jobs_database_url
    return derived_system_url(settings.database_url)


def derived_system_url(database_url: str) -> str:
    url: URL = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        path = Path(url.database or "frontdesk.db")
        beside = path.with_name(f"{path.stem}.dbos{path.suffix or '.db'}")
        return f"sqlite:///{beside}"
    return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def system_engine(url: str, *, pool_size: int = 5) -> sa.Engine:
    """The engine DBOS (and our client) use for the system database.

    On SQLite: WAL and synchronous=NORMAL, as our own store runs (DBOS's own engine leaves the
    file in rollback-journal mode: 24 ms a workflow against 3.4 ms), a busy timeout, and
    BEGIN IMMEDIATE so writers queue instead of failing on lock upgrades."""
    import sqlalchemy as sa
    from sqlalchemy import event

    if not is_sqlite(url):
        return sa.create_engine(
            url, pool_size=pool_size, max_overflow=0, pool_pre_ping=True, pool_timeout=30
        )
    path = make_url(url).database or ""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, pool_size=pool_size, max_overflow=0, pool_timeout=30)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        # DBOS's file shares the disk: its WAL kept as small as the store's (db/walcare.py).
        from frontdesk.db.walcare import apply_pragmas

        apply_pragmas(dbapi_conn)
        dbapi_conn.isolation_level = "IMMEDIATE"

    return engine


def job_version(settings: Settings) -> str:
    """The pinned application version every runner and enqueue uses: a redeployed runner
    with changed job code still picks up the old runner's work (DBOS's default is a hash of
    the code, which would strand it)."""
    return settings.job_version


class JobClient:
    """Enqueue, cancel and retry background jobs from any process, through ``DBOSClient``.

    One per process and database; built lazily (no connection until first used), so a call
    process that never starts a job opens nothing. Every method runs DBOS's synchronous client
    on a worker thread, so a call's event loop is never held by it."""

    def __init__(self, settings: Settings, *, pool_size: int = 2) -> None:
        self.url = system_url(settings)
        self.version = job_version(settings)
        self._pool_size = pool_size
        self._client: Any = None
        self._engine: Any = None

    def _get(self) -> Any:
        if self._client is None:
            from dbos import DBOSClient

            self._engine = system_engine(self.url, pool_size=self._pool_size)
            self._client = DBOSClient(
                system_database_engine=self._engine,
                dbos_system_schema=SCHEMA,
                application_name=APP_NAME,
                lazy=True,
                retry_connection_errors=False,  # an outage is an error here, not a hang
            )
        return self._client

    def prepare(self) -> None:
        """Import dbos and build the client now (worker prewarm), not on a call's loop."""
        self._get()

    def _enqueue(self, task_id: int) -> str:
        options: dict[str, Any] = {
            "queue_name": QUEUE,
            "workflow_name": WORKFLOW,
            "workflow_id": workflow_id(task_id),
            "app_version": self.version,
            "application_name": APP_NAME,
        }
        return str(self._get().enqueue(options, int(task_id)).get_workflow_id())

    async def enqueue(self, task_id: int) -> str:
        """Enqueue the task's workflow; idempotent (the id is the task's). Raises if the
        system database cannot take it: the row stays queued and a runner enqueues it."""
        return await asyncio.to_thread(self._enqueue, task_id)

    def _workflows(self, task_id: int) -> list[Any]:
        """The task's workflows, oldest first: its first run and every retry's fork."""
        client = self._get()
        found = client.list_workflows(
            workflow_ids=[workflow_id(task_id)], load_input=False, load_output=False
        )
        frontier = [w.workflow_id for w in found]
        while frontier:
            forks = client.list_workflows(forked_from=frontier, load_input=False, load_output=False)
            found += forks
            frontier = [w.workflow_id for w in forks]
        return sorted(found, key=lambda w: w.created_at or 0)

    def _cancel(self, task_id: int) -> list[str]:
        active = [w.workflow_id for w in self._workflows(task_id) if w.status in ACTIVE]
        if active:
            self._get().cancel_workflows(active)
        return active

    async def cancel(self, task_id: int) -> list[str]:
        """Cancel every workflow of the task that may still run; the ids cancelled."""
        return await asyncio.to_thread(self._cancel, task_id)

    def _retry(self, task_id: int) -> str:
        """Fork the task's latest workflow from the step where it failed, so the steps that
        finished are not redone; a task with no workflow yet is simply enqueued."""
        client = self._get()
        runs = self._workflows(task_id)
        if not runs:
            return self._enqueue(task_id)
        latest = runs[-1]
        steps = client.list_workflow_steps(latest.workflow_id)
        # The first step that raised; else after the last step (the tool failed between
        # steps, and its code after the last finished step runs again).
        failed = [s["function_id"] for s in steps if s.get("error") is not None]
        last = max((s["function_id"] for s in steps), default=0) + 1
        start = (failed or [last])[0]
        handle = client.fork_workflow(
            latest.workflow_id, start, application_version=self.version, queue_name=QUEUE
        )
        return str(handle.get_workflow_id())

    async def retry(self, task_id: int) -> str:
        return await asyncio.to_thread(self._retry, task_id)

    def _latest(self, task_ids: list[int]) -> dict[int, str | None]:
        """Each task's latest workflow status (None: it has no workflow), in few queries:
        the first runs at once, then the forks of those that ended."""
        client = self._get()
        by_id = {workflow_id(t): t for t in task_ids}
        out: dict[int, str | None] = dict.fromkeys(task_ids)
        runs = client.list_workflows(workflow_ids=list(by_id), load_input=False, load_output=False)
        owner = {w.workflow_id: by_id[w.workflow_id] for w in runs}
        for w in runs:
            out[owner[w.workflow_id]] = w.status
        frontier = [w.workflow_id for w in runs if w.status not in ACTIVE]
        while frontier:
            forks = client.list_workflows(forked_from=frontier, load_input=False, load_output=False)
            for w in sorted(forks, key=lambda w: w.created_at or 0):
                task = owner[w.forked_from]
                owner[w.workflow_id] = task
                out[task] = w.status
            frontier = [w.workflow_id for w in forks]
        return out

    async def latest(self, task_ids: list[int]) -> dict[int, str | None]:
        return await asyncio.to_thread(self._latest, task_ids)

    async def statuses(self, task_id: int) -> list[tuple[str, str]]:
        """(workflow id, DBOS status) of each of the task's workflows, oldest first."""
        runs = await asyncio.to_thread(self._workflows, task_id)
        return [(w.workflow_id, w.status) for w in runs]

    async def aclose(self) -> None:
        if self._client is not None:
            client, engine = self._client, self._engine
            self._client = self._engine = None
            await asyncio.to_thread(client.destroy)
            await asyncio.to_thread(engine.dispose)


_clients: dict[str, JobClient] = {}


def client_for(settings: Settings) -> JobClient:
    """This process's ``JobClient`` for the settings' system database."""
    url = system_url(settings)
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = JobClient(settings)
    return client


def system_url_for(database_url: str) -> str:
    """``system_url`` for a store's URL (``FRONTDESK_JOBS_DATABASE_URL`` still applies)."""
    from frontdesk.core.settings import Settings

    return system_url(Settings(database_url=database_url))


def current_version(database_url: str) -> int | None:
    """The DBOS system schema version of this database (None: DBOS's tables are not there),
    read with plain SQL: no dbos import, and a missing SQLite file is not created."""
    import sqlalchemy as sa

    url = system_url_for(database_url)
    if is_sqlite(url):
        from frontdesk.db.engine import sqlite_tables

        path = make_url(url).database or ""
        if not Path(path).is_file() or "dbos_migrations" not in (sqlite_tables(path) or set()):
            return None
        import sqlite3

        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT version FROM dbos_migrations").fetchone()
        finally:
            conn.close()
        return int(row[0]) if row else None
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            there = conn.execute(sa.text(f"SELECT to_regclass('{SCHEMA}.dbos_migrations')"))
            if there.scalar() is None:
                return None
            row = conn.execute(sa.text(f"SELECT version FROM {SCHEMA}.dbos_migrations")).first()
    finally:
        engine.dispose()
    return int(row[0]) if row else None


def migrate(database_url: str) -> None:
    """Create or migrate DBOS's tables for this database (blocking: run it on a thread).
    Every process that migrates our schema does this too, so a job can be enqueued before
    any runner has started."""
    from dbos import DBOS

    DBOS.migrate(system_url_for(database_url), schema=SCHEMA)


def client_for_url(database_url: str) -> JobClient:
    """As ``client_for``, for code that knows only the store's URL (the job system's own
    URL, if set, comes from the environment)."""
    from frontdesk.core.settings import Settings

    return client_for(Settings(database_url=database_url))


async def cancel_job(store: TaskStore, task_id: int, *, by: str, caller: str | None = None) -> Task:
    """Cancel a queued or running background job: its workflows in DBOS first (a cancelled
    workflow is never dequeued, and a running one stops at its next step), then its row, the
    one rule behind the cancel tool, `frontdesk tasks cancel`, the app's RPC and the web
    console. ``TaskNotFound`` (also another caller's task with ``caller``), or
    ``NotCancellable`` when it is not a background job or already finished.

    If DBOS cannot be reached the row is still cancelled: the row is what a runner obeys (it
    never starts a cancelled row's job, and stops a running one within a poll)."""
    from frontdesk.db.errors import NotCancellable
    from frontdesk.db.models import FINISHED

    task = await store.get(task_id, caller=caller)
    if task.pattern != "background":
        raise NotCancellable(task, "not background")
    if task.status in FINISHED:
        raise NotCancellable(task, "finished")
    try:
        await client_for_url(store.url).cancel(task.id)
    except Exception as exc:
        log.warning("task %s: job system not told of the cancel (%s); the row rules", task.id, exc)
    return await store.cancel(task.id, by=by, caller=caller)


async def retry_job(store: TaskStore, task_id: int, *, by: str) -> Task:
    """Queue a failed background job again (``TaskNotFound``, or ``NotRetryable``): the row
    first (compare-and-set on "failed", so two operators retrying at once queue it once), then
    a fork of its workflow from the step where it failed, so finished steps are not redone.
    If DBOS cannot be reached, a runner forks it at its next reconciliation."""
    task = await store.retry(task_id, by=by)
    try:
        await client_for_url(store.url).retry(task.id)
    except Exception as exc:
        log.warning(
            "task %s: retry not yet in the job system (%s); a runner will enqueue it", task.id, exc
        )
    return task


class _LateStarts(logging.Filter):
    """Counts, and keeps out of the log, the workflows DBOS fails to start as it is destroyed."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RuntimeError) and "after shutdown" in str(exc):
            self.count += 1
            return False
        return True


@contextlib.contextmanager
def late_starts() -> Iterator[_LateStarts]:
    """Around ``DBOS.destroy``: its queue thread may dequeue a workflow in the moment between
    the stop and the end of its thread pool; that workflow cannot start ("cannot schedule new
    futures after shutdown"), stays PENDING, and the next runner resumes it. DBOS logs each with
    a traceback; the runner counts them and says so in one line instead."""
    logger = logging.getLogger("dbos")
    late = _LateStarts()
    logger.addFilter(late)
    try:
        yield late
    finally:
        logger.removeFilter(late)
