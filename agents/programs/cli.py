"""The ``frontdesk`` command line.

Commands that do not run a session (tasks, db, plugins, doctor) never import livekit, so they
answer fast; session commands import it inside their bodies. Errors an operator can fix are
printed as one line on stderr with exit code 2: a bad setting is caught here, before any
command runs (``doctor`` runs anyway and reports it).
"""

from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="frontdesk",
    help="A multi-department voice concierge on LiveKit Agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Commands that still run with a bad core setting, to report it.
_RUN_WITH_BAD_SETTINGS = {"doctor"}


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"frontdesk {version('frontdesk')}")
        except PackageNotFoundError:
            typer.echo("frontdesk (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """A multi-department voice concierge on LiveKit Agents."""


def _register_subcommands() -> None:
    from frontdesk.agents.programs import (
        cli_db,
        cli_deploy,
        cli_plugins,
        cli_session,
        cli_tasks,
        cli_voice,
        web,  # imports only typer here; FastAPI loads when `web` runs
    )

    for module in (cli_tasks, cli_db, cli_plugins, cli_session, cli_voice, cli_deploy, web):
        module.register(app)


def _register_plugin_commands() -> None:
    # Only plugins with register_commands are asked; a broken one is reported by `plugins list`.
    from frontdesk.core import host
    from frontdesk.core.errors import FrontdeskError

    try:
        registry = host.load()
    except FrontdeskError as exc:  # a bad profile: one line, and the core commands still work
        typer.echo(f"warning: plugins not loaded: {exc}", err=True)
        return
    except Exception as exc:  # the host itself never raises for a plugin, but be safe
        line = (str(exc).splitlines() or [type(exc).__name__])[0]
        typer.echo(f"warning: plugins not loaded: {line}", err=True)
        return
    registry.add_commands(app)  # problems are logged by the host and shown by `plugins list`


def _bad_setting() -> str | None:
    from frontdesk.core.errors import ConfigError
    from frontdesk.core.settings import load_settings

    try:
        load_settings()
    except ConfigError as exc:
        return str(exc)
    return None


def main() -> None:
    from frontdesk.agents.programs.logs import configure

    configure()
    _register_subcommands()
    args = sys.argv[1:]
    first = args[0] if args else None
    asks_only = not args or any(a in ("--help", "-h", "--version") for a in args)
    if first not in _RUN_WITH_BAD_SETTINGS and not asks_only:
        problem = _bad_setting()
        if problem is not None:
            typer.echo(f"error: {problem}", err=True)
            raise SystemExit(2)
    # Core commands skip plugin loading entirely; plugin commands and --help need it.
    if first is None or first.startswith("-") or first not in _core_names():
        if _bad_setting() is None:
            _register_plugin_commands()
    from frontdesk.core.errors import FrontdeskError

    try:
        app()
    except FrontdeskError as exc:  # found inside a command (a bad profile, say): one line, exit 2
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


def _core_names() -> set[str]:
    names = {
        c.name or c.callback.__name__.replace("_", "-")
        for c in app.registered_commands
        if c.callback
    }
    names |= {g.name for g in app.registered_groups if g.name}
    return names
