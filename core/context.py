"""``ToolContext``: what a running tool knows about its call, and what it may read and write.

A plugin never touches the TaskStore or imports ``frontdesk.db``. It reads the current caller's
own tasks through ``ctx.tasks``, and keeps its own tables (created by its own migrations, see
``register_migrations``) through ``ctx.database``, which runs its writes in the store's one
serialized writer so they share its transactions and group commit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from frontdesk.db.records import Task
    from frontdesk.db.store import TaskStore

_log = logging.getLogger("frontdesk.tools")

T = TypeVar("T")


class CallerTasks:
    """The current caller's own tasks. Another caller's task is "not found", exactly as an id
    that does not exist, so ids cannot be probed."""

    def __init__(self, store: TaskStore, caller: str, session_id: str | None) -> None:
        self._store = store
        self._caller = caller
        self._session_id = session_id

    async def list(
        self,
        *,
        status: str | None = None,
        tool: str | None = None,
        this_call: bool = False,
        limit: int | None = 50,
    ) -> list[Task]:
        """Newest first; ``this_call`` keeps only the current call's tasks."""
        return await self._store.list(
            caller=self._caller,
            status=status,
            tool=tool,
            session_id=self._session_id if this_call else None,
            limit=limit,
        )

    async def get(self, task_id: int) -> Task:
        """The task, or ``TaskNotFound`` (also for an id that is not a valid number)."""
        return await self._store.get(task_id, caller=self._caller)

    async def cancel(self, task_id: int) -> Task:
        """Cancel one of the caller's queued or running background jobs; ``NotCancellable``
        when it is finished or not a background job, ``TaskNotFound`` when it is not theirs
        (or not a valid number)."""
        from frontdesk.core.jobs import cancel_job

        return await cancel_job(self._store, task_id, by="caller", caller=self._caller)

    async def this_call(self) -> dict[str, Any] | None:
        """The current call's record: caller, started_at, ended_at and its ``handoffs``."""
        if self._session_id is None:
            return None
        return await self._store.get_call(self._session_id)


class Database:
    """SQL on the frontdesk database for a plugin's own tables, with SQLAlchemy Core.

    ``read()`` lends a connection for queries. ``write(fn)`` runs ``await fn(conn)`` inside one
    transaction of the store's serialized writer and returns its result; keep each
    check-then-write inside one ``fn`` so two calls racing for the same row cannot both pass
    the check (SQLite's ``BEGIN IMMEDIATE`` serializes writers; on Postgres lock the rows
    ``FOR UPDATE``). ``fn`` may be run again on a transient lock error, so it must only touch
    the database.
    """

    def __init__(self, store: TaskStore) -> None:
        self._store = store

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._store.dialect

    @staticmethod
    def now(offset_seconds: float = 0.0) -> Any:
        """The database's clock plus ``offset_seconds``, as a SQL expression the database
        evaluates in the statement (Postgres ``now()``; SQLite's own ``'now'``, in the form
        DateTime columns are stored in). Judge ages and write times with it, never with one
        process's wall clock against another's."""
        from frontdesk.db.hotpath import DbNow

        return DbNow(offset_seconds).clause()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self._store.read_engine.connect() as conn:
            yield conn

    async def write(self, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        async def write(conn: AsyncConnection, events: list[Any]) -> T:
            return await fn(conn)

        return await self._store.run_write(write)


@dataclass
class ToolContext:
    """What a running tool knows about its call. Passed as the tool's first argument.

    - ``caller``, ``session_id``, ``task_id``, ``department``: who and where;
    - ``idempotency_key``: stable across retries of the same logical call (hand it to any
      side effect that must happen once, such as a payment gateway);
    - ``progress(fraction, note)``: record progress where ``task_status`` can read it;
    - ``run_ctx``: LiveKit's ``RunContext`` while a live turn is running, else None;
    - ``config``: the plugin's own settings object (see ``register_settings``), or None;
    - ``hook``: the plugin manager's hook relay, to call hooks that plugins define;
    - ``tasks``: the caller's own tasks (``list``, ``get``, ``cancel``, ``this_call``);
    - ``database``: SQL for the plugin's own tables (see ``Database``);
    - ``step(name, fn, *args)`` and ``sleep(seconds)``: durable steps and sleeps in a
      background job (see "Durable steps" in docs/plugins.md).
    """

    caller: str
    session_id: str | None
    task_id: int
    department: str | None
    idempotency_key: str
    store: InitVar[TaskStore]
    run_ctx: Any = None
    hook: Any = None
    config: Any = None
    # The runner's DBOS steps (core/durable.py) in a background job; None elsewhere.
    durable: Any = field(default=None, repr=False)
    tasks: CallerTasks = field(init=False, repr=False)
    database: Database = field(init=False, repr=False)

    def __post_init__(self, store: TaskStore) -> None:
        self.tasks = CallerTasks(store, self.caller, self.session_id)
        self.database = Database(store)

    async def progress(self, fraction: float, note: str = "") -> None:
        """Record progress (0..1) on this task's row, where ``task_status`` can read it.
        Progress is a courtesy: if the database cannot take it, the work goes on."""
        from frontdesk.core.tools import mask_cards

        try:
            await self.database._store.set_progress(
                self.task_id, max(0.0, min(1.0, float(fraction))), mask_cards(note)
            )
        except Exception as exc:
            from frontdesk.db.outage import OUTAGE

            if not OUTAGE.failed(exc):  # an outage is logged once per process
                _log.warning("task %s: progress not recorded: %r", self.task_id, exc)

    # -- durable steps (background jobs) ------------------------------------------------
    # Self-contained: what the runner hands a job is in core/durable.py; here only the API.

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` (a function or a coroutine function) as a durable step and return
        its result. In a background job the result is recorded, so a job killed later resumes
        after its last finished step without running this one again; a step killed before it
        was recorded runs again (at least once), so a side effect inside it must be keyed by
        ``f"{ctx.idempotency_key}:{name}"``. Names must be stable and in a stable order. The
        result must be picklable. Outside a runner (in a call, or under frontdesk.testing)
        it simply calls ``fn``."""
        if self.durable is not None:
            return await self.durable.step(name, fn, *args)
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; in a background job durably (a runner restart in the middle
        wakes the job at the time first set, not ``seconds`` after the restart)."""
        if self.durable is not None:
            await self.durable.sleep(seconds)
        else:
            await asyncio.sleep(seconds)
