"""``frontdesk tasks``: query and manage task history."""

from __future__ import annotations

import json
from typing import Any

import typer

from frontdesk.agents.programs.exits import run_async
from frontdesk.core.settings import load_settings
from frontdesk.db.models import STATUSES

app = typer.Typer(help="Query task history.", no_args_is_help=True)

DbOption = typer.Option(None, "--db", help="Database URL (default: FRONTDESK_DATABASE_URL).")
JsonOption = typer.Option(False, "--json", help="Machine-readable output.")


async def _store(db: str | None) -> Any:
    from frontdesk.core.schema import open_existing

    return await open_existing(db or load_settings().database_url)


def _check_status(status: str | None) -> None:
    if status is not None and status not in STATUSES:
        from frontdesk.agents.programs.exits import fail

        raise fail(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")


@app.command("list")
def list_(
    caller: str | None = typer.Option(None, help="Only this caller's tasks."),
    status: str | None = typer.Option(
        None, help="queued, running, succeeded, failed or cancelled."
    ),
    tool: str | None = typer.Option(None, help="Only this tool's tasks."),
    limit: int = typer.Option(50, min=1, help="At most this many, newest first."),
    as_json: bool = JsonOption,
    db: str | None = DbOption,
) -> None:
    """List tasks, newest first."""
    _check_status(status)

    async def go() -> list[Any]:
        store = await _store(db)
        try:
            return await store.list(caller=caller, status=status, tool=tool, limit=limit)
        finally:
            await store.close()

    rows = run_async(go())
    if as_json:
        typer.echo(json.dumps([t.to_json() for t in rows], indent=None, default=str))
        return
    from frontdesk.agents.programs.render import task_table

    task_table(rows)


@app.command()
def show(task_id: int, as_json: bool = JsonOption, db: str | None = DbOption) -> None:
    """Show one task with its events."""

    async def go() -> tuple[Any, list[dict[str, Any]]]:
        store = await _store(db)
        try:
            task = await store.get(task_id)
            return task, await store.events(task_id)
        finally:
            await store.close()

    task, events = run_async(go())
    if as_json:
        typer.echo(json.dumps({**task.to_json(), "events": events}, default=str))
        return
    from frontdesk.agents.programs.render import task_detail

    task_detail(task, events)


@app.command()
def cancel(task_id: int, db: str | None = DbOption) -> None:
    """Cancel a queued or running background job (critical work cannot be cancelled)."""

    async def go() -> str:
        from frontdesk.core.jobs import cancel_job

        store = await _store(db)
        try:
            return (await cancel_job(store, task_id, by="operator")).status
        finally:
            await store.close()

    typer.echo(f"task {task_id} {run_async(go())}")


@app.command()
def stats(as_json: bool = JsonOption, db: str | None = DbOption) -> None:
    """Per-department task counts and median durations."""

    async def go() -> list[dict[str, Any]]:
        store = await _store(db)
        try:
            return await store.stats()
        finally:
            await store.close()

    rows = run_async(go())
    if as_json:
        typer.echo(json.dumps(rows))
        return
    from frontdesk.agents.programs.render import stats_table

    stats_table(rows)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tasks")
