"""``frontdesk doctor``, ``start`` and ``dev``.

``doctor`` (its sections are in ``doctor.py``) never imports livekit and never prints a
secret: keys are reported as set or not set, URLs with their password masked. ``start``/``dev`` check what they can before handing the
process to the LiveKit worker, so a missing variable is one line and exit code 2, not a
traceback from inside the worker.
"""

from __future__ import annotations

import json

import typer

from frontdesk.agents import providers
from frontdesk.agents.programs.doctor import MARK, gather
from frontdesk.agents.programs.exits import fail, run_async
from frontdesk.core.errors import FrontdeskError
from frontdesk.core.settings import load_settings, load_settings_leniently


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.command()(start)
    app.command()(dev)


# -- doctor ---------------------------------------------------------------------------------


def doctor(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    live: bool = typer.Option(
        False, "--check", help="Also make one cheap authenticated request per provider."
    ),
    db: str | None = typer.Option(
        None, "--db", help="Database URL to look at (default: FRONTDESK_DATABASE_URL)."
    ),
) -> None:
    """What is configured and what is missing, in plain words (exit 1 if something is broken).

    No keys is not broken: frontdesk then runs with the offline brain in text. With --check,
    a provider that refuses its key or does not answer is broken."""
    settings, setting_problems = load_settings_leniently()
    if db:
        settings = settings.model_copy(update={"database_url": db})
    env = providers.provider_env()
    report = run_async(gather(settings, env, setting_problems, live=live))
    if as_json:
        typer.echo(json.dumps(report))
    else:
        for name, rows in report["sections"].items():
            typer.echo(name)
            for row in rows:
                line = f"{row['value']} ({row['detail']})" if row.get("value") else row["detail"]
                typer.echo(f"  [{MARK[row['status']]}] {row['item']}: {line}")
        typer.echo("all good" if report["ok"] else "problems found (FAIL above)")
    if not report["ok"]:
        raise typer.Exit(1)


# -- start / dev ----------------------------------------------------------------------------

AgentNameOption = typer.Option(
    "",
    "--agent-name",
    envvar="LIVEKIT_AGENT_NAME",
    help="Enable explicit dispatch under this name (rooms get the agent only when asked).",
)
NoRunnerOption = typer.Option(
    False, "--no-runner", help="Do not run the background runner here (use `frontdesk runner`)."
)


def _serve(*, dev: bool, agent_name: str, no_runner: bool, log_level: str, log_format: str) -> None:
    providers.export_livekit_env()  # the LiveKit worker reads os.environ only
    env = providers.provider_env()
    missing = [v for v in providers.LIVEKIT_VARS if not env.get(v)]
    if missing:
        raise fail(
            f"{', '.join(missing)} not set; a worker needs LIVEKIT_URL, LIVEKIT_API_KEY and "
            "LIVEKIT_API_SECRET (LiveKit Cloud project settings, or your server's keys). "
            "For a local try without LiveKit use `frontdesk console`."
        )
    try:
        settings = load_settings()
        from frontdesk.db.engine import parse_url

        parse_url(settings.database_url)
        from frontdesk.core import host

        host.load(settings).require_valid_config()
        choices = providers.select_all(settings, env)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    if not choices.voice:
        typer.echo(
            "warning: no STT and TTS pair configured; calls will be text only "
            "(see `frontdesk doctor`)",
            err=True,
        )

    from frontdesk.agents.programs import worker

    server = worker.build_server(settings, agent_name=agent_name, choices=choices)
    runner = None
    if not no_runner:
        runner = worker.RunnerThread(settings)
        try:
            runner.start()
        except FrontdeskError as exc:
            raise fail(str(exc)) from None
    try:
        worker.run_server(server, dev=dev, log_level=log_level.upper(), log_format=log_format)
    finally:
        if runner is not None and not runner.stop(timeout=settings.job_lease_seconds):
            typer.echo(
                "warning: the background runner did not stop in time; its leases will "
                "expire and another runner will take the jobs",
                err=True,
            )


def start(
    agent_name: str = AgentNameOption,
    no_runner: bool = NoRunnerOption,
    log_level: str = typer.Option("INFO", envvar="LIVEKIT_LOG_LEVEL", help="Log level."),
    log_format: str = typer.Option("json", help="json or colored."),
) -> None:
    """Run the concierge as a LiveKit worker (production mode), with a background runner."""
    _serve(
        dev=False,
        agent_name=agent_name,
        no_runner=no_runner,
        log_level=log_level,
        log_format=log_format,
    )


def dev(
    agent_name: str = AgentNameOption,
    no_runner: bool = NoRunnerOption,
    log_level: str = typer.Option("INFO", envvar="LIVEKIT_LOG_LEVEL", help="Log level."),
) -> None:
    """Run the worker in development mode: no load limit, no warm pool, verbose colored logs."""
    _serve(
        dev=True,
        agent_name=agent_name,
        no_runner=no_runner,
        log_level=log_level,
        log_format="colored",
    )
