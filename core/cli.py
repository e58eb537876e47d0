"""The ``frontdesk`` command line.

Commands that do not run a session (tasks, db, plugins, doctor) never import livekit, so they
answer fast; session commands import it inside their bodies. Errors an operator can fix are
printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from functools import wraps
from typing import Any, TypeVar

import typer

from frontdesk.core.errors import FrontdeskError

app = typer.Typer(
    name="frontdesk",
    help="A multi-department voice concierge on LiveKit Agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

T = TypeVar("T")


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine, turning operator errors into one line and exit code 2."""
    try:
        return asyncio.run(coro)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def operator_errors(fn: Callable[..., T]) -> Callable[..., T]:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except FrontdeskError as exc:
            raise fail(str(exc)) from None

    return wrapper


def _register_subcommands() -> None:
    from frontdesk.core import cli_db, cli_plugins, cli_session, cli_tasks, cli_voice

    app.add_typer(cli_tasks.app, name="tasks")
    app.add_typer(cli_db.app, name="db")
    app.add_typer(cli_plugins.app, name="plugins")
    cli_session.register(app)
    cli_voice.register(app)
    # The console's package imports only typer here; FastAPI loads when `web` runs.
    from frontdesk.agents.programs import web

    web.register(app)


def _register_plugin_commands() -> None:
    # Only plugins with register_commands are asked; a broken one is reported by `plugins list`.
    from frontdesk.core import host

    try:
        registry = host.load()
    except Exception as exc:  # the host itself never raises for a plugin, but be safe
        typer.echo(f"warning: plugins not loaded: {exc}", err=True)
        return
    registry.add_commands(app)  # problems are logged by the host and shown by `plugins list`


def main() -> None:
    _register_subcommands()
    first = sys.argv[1] if len(sys.argv) > 1 else None
    # Core commands skip plugin loading entirely; plugin commands and --help need it.
    if first is None or first.startswith("-") or first not in _core_names():
        _register_plugin_commands()
    app()


def _core_names() -> set[str]:
    names = {
        c.name or c.callback.__name__.replace("_", "-")
        for c in app.registered_commands
        if c.callback
    }
    names |= {g.name for g in app.registered_groups if g.name}
    return names
