"""Commands that run sessions or jobs: simulate, demo, console and runner.

livekit is imported inside each command, so the other commands stay fast.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import typer

from frontdesk.core.cli import fail, operator_errors, run_async
from frontdesk.core.settings import Settings

TOUR = Path(__file__).resolve().parent.parent / "examples" / "calls" / "tour.yaml"


def _settings(db: str | None) -> Settings:
    settings = Settings()
    if db:
        settings = settings.model_copy(update={"database_url": db})
    from frontdesk.db.engine import parse_url

    parse_url(settings.database_url)  # a malformed URL is an operator error, before any work
    return settings


def _quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("livekit", "livekit.agents"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


@operator_errors
def simulate(
    scenarios: list[Path] = typer.Argument(..., help="Scenario YAML files, run concurrently."),
    as_json: bool = typer.Option(False, "--json", help="One JSON event per line."),
    db: str | None = typer.Option(
        None, "--db", help="Database URL (default: FRONTDESK_DATABASE_URL)."
    ),
    callers: int = typer.Option(
        1, "--callers", min=1, help="Run N concurrent copies of each scenario."
    ),
    no_runner: bool = typer.Option(
        False, "--no-runner", help="Leave background jobs to a separate `frontdesk runner`."
    ),
    voice: bool = typer.Option(
        False,
        "--voice",
        help="Voice sessions with timed speech (fake VAD/STT/TTS); barge-in is speech.",
    ),
) -> None:
    """Run scripted calls on real sessions (text, or voice with --voice); exit 1 if an
    expect fails."""
    from frontdesk.core.errors import FrontdeskError
    from frontdesk.core.scenario import load_scenario

    try:
        settings = _settings(db)
        loaded = [load_scenario(p) for p in scenarios]
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    failures = _run(loaded, settings, as_json, callers, runner=not no_runner, voice=voice)
    if failures:
        for f in failures:
            typer.echo(f"FAILED {f}", err=True)
        raise typer.Exit(1)


def _run(
    loaded: list[Any],
    settings: Settings,
    as_json: bool,
    callers: int,
    runner: bool = True,
    voice: bool = False,
) -> list[str]:
    _quiet_logs()
    from frontdesk.core import host
    from frontdesk.core.render import transcript_line
    from frontdesk.core.simulate import simulate as run_sim

    registry = host.load(settings)

    def emit(event: dict[str, Any]) -> None:
        if as_json:
            sys.stdout.write(json.dumps(event, default=str) + "\n")
            sys.stdout.flush()
        else:
            transcript_line(event)

    return run_async(
        run_sim(loaded, settings, registry, emit, callers=callers, runner=runner, voice=voice)
    )


@operator_errors
def demo(db: str | None = typer.Option(None, "--db", help="Database URL.")) -> None:
    """Simulate the bundled tour: every department, a hang-up and a follow-up."""
    from frontdesk.core.scenario import load_scenario

    settings = _settings(db)
    path = TOUR if TOUR.exists() else Path("examples/calls/tour.yaml")
    if not path.exists():
        raise fail(
            "the tour scenario examples/calls/tour.yaml is not here; run demo from a checkout"
        )
    scenario = load_scenario(path)
    from frontdesk.core.demo_search import serve

    with serve() as search_url:
        settings = settings.model_copy(update={"search_web_url": search_url})
        failures = _run([scenario], settings, False, 1)

    async def table() -> list[Any]:
        from frontdesk.db.store import TaskStore

        store = await TaskStore.open(settings.database_url)
        try:
            return await store.list(caller=scenario.caller, limit=100)
        finally:
            await store.close()

    from frontdesk.core.render import artifact_paths, console, task_table

    rows = list(reversed(run_async(table())))
    task_table(rows, title=f"tasks for {scenario.caller}")
    for task in rows:
        for path_ in artifact_paths(task.result):
            console.print(f"report file: {path_}")
    console.print(
        f"[dim]history: frontdesk tasks list --caller {scenario.caller} --db {settings.database_url}[/dim]"
    )
    if failures:
        for f in failures:
            typer.echo(f"FAILED {f}", err=True)
        raise typer.Exit(1)


@operator_errors
def runner(db: str | None = typer.Option(None, "--db", help="Database URL.")) -> None:
    """Run the background-job runner on its own (scale out beside the workers)."""
    _quiet_logs()
    logging.getLogger("frontdesk").setLevel(logging.INFO)
    settings = _settings(db)
    run_async(run_runner(settings))


async def run_runner(settings: Settings) -> None:
    import signal

    from frontdesk.core import host
    from frontdesk.core.runner import serve

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(settings, host.load(settings), stop)


@operator_errors
def console(
    caller: str = typer.Option("guest", "--caller", help="Who is calling (history follows them)."),
    db: str | None = typer.Option(None, "--db", help="Database URL."),
    text: bool = typer.Option(False, "--text", help="Text even when voice is possible."),
) -> None:
    """Talk to the concierge in the terminal: voice with PortAudio and keys, text otherwise."""
    _quiet_logs()
    settings = _settings(db)
    from frontdesk.core import host
    from frontdesk.core.console import HELP, console_mode, run_console, run_voice_console
    from frontdesk.core.errors import FrontdeskError
    from frontdesk.core.render import console as out

    try:
        mode, why = console_mode(settings)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    if mode == "voice" and not text:
        out.print(f"[bold]frontdesk console[/bold] — voice: {why}.")
        run_voice_console(settings)
        return
    make_llm = None
    from frontdesk.core import providers

    llm_choice = providers.select_all(settings).llm
    if llm_choice.enabled:

        def make_llm() -> Any:
            return providers.build_llm(llm_choice)

    brain = f"LLM {llm_choice.label()}" if llm_choice.enabled else "offline brain"
    reason = "--text given" if mode == "voice" else why
    out.print(f"[bold]frontdesk console[/bold] — text ({reason}); {brain}. {HELP}")
    registry = host.load(settings)

    def emit(event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "agent":
            out.print(f"[green]{event['agent']}[/green]> {event['text']}")
        elif kind == "handoff":
            out.print(f"[magenta]  (transferred {event['from']} → {event['to']})[/magenta]")
        elif kind == "task" and event["status"] in ("queued", "succeeded", "failed", "cancelled"):
            out.print(f"[dim]  (task {event['task_id']} {event['tool']}: {event['status']})[/dim]")

    run_async(run_console(settings, registry, caller, emit, make_llm))


def register(app: typer.Typer) -> None:
    app.command()(console)
    app.command()(simulate)
    app.command()(demo)
    app.command()(runner)
