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

from frontdesk.agents.programs.exits import fail, operator_errors, run_async
from frontdesk.core.settings import Settings, load_settings

TOUR = Path(__file__).resolve().parents[2] / "examples" / "calls" / "tour.yaml"
# The demo business (profile, knowledge base, slow web-search stand-in): examples/demo/.
DEMO = TOUR.parent.parent / "demo"


def _settings(db: str | None) -> Settings:
    settings = load_settings()
    if db:
        settings = settings.model_copy(update={"database_url": db})
    from frontdesk.db.engine import parse_url

    parse_url(settings.database_url)  # a malformed URL is an operator error, before any work
    return settings


def _quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("livekit", "livekit.agents"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    logging.getLogger("frontdesk").setLevel(logging.WARNING)  # the transcript is the output


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
    strict: bool = typer.Option(
        False, "--strict", help="Fail a turn the offline brain answers (its script ran out)."
    ),
) -> None:
    """Run scripted calls on real text-mode sessions (docs/scenarios.md); exit 1 if an expect
    fails, the LLM calls an unknown tool, or (--strict) the offline brain answers a turn."""
    from frontdesk.agents.programs.scenario import load_scenario
    from frontdesk.core.errors import FrontdeskError

    try:
        settings = _settings(db)
        loaded = [load_scenario(p) for p in scenarios]
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    failures = _run(loaded, settings, as_json, callers, runner=not no_runner, strict=strict)
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
    strict: bool = False,
) -> list[str]:
    _quiet_logs()
    from frontdesk.agents.programs.render import transcript_line
    from frontdesk.agents.programs.simulate import simulate as run_sim
    from frontdesk.core import host

    registry = host.load(settings)
    registry.require_valid_config()

    def emit(event: dict[str, Any]) -> None:
        if as_json:
            sys.stdout.write(json.dumps(event, default=str) + "\n")
            sys.stdout.flush()
        else:
            transcript_line(event)

    return run_async(
        run_sim(loaded, settings, registry, emit, callers=callers, runner=runner, strict=strict)
    )


def _demo_search(demo_dir: Path) -> Any:
    """The demo's slow loopback web search (examples/demo/search_server.py, not part of the
    package): ``serve()`` as a context manager yielding its URL."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "frontdesk_demo_search", demo_dir / "search_server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.serve()


@operator_errors
def demo(db: str | None = typer.Option(None, "--db", help="Database URL.")) -> None:
    """Simulate the bundled tour: every department, a hang-up and a follow-up.

    The tour is the demo business's: its profile is FRONTDESK_PROFILE, else
    examples/demo/frontdesk.toml."""
    import os

    from frontdesk.agents.programs.scenario import load_scenario

    settings = _settings(db)
    path = TOUR if TOUR.exists() else Path("examples/calls/tour.yaml")
    demo_dir = DEMO if DEMO.is_dir() else Path("examples/demo")
    if not path.exists() or not demo_dir.is_dir():
        raise fail(
            "the tour (examples/calls/tour.yaml, examples/demo/) is not here; run demo from a checkout"
        )
    scenario = load_scenario(path)
    saved = {k: os.environ.get(k) for k in ("FRONTDESK_PROFILE", "FRONTDESK_SEARCH_WEB_URL")}
    os.environ.setdefault("FRONTDESK_PROFILE", str(demo_dir / "frontdesk.toml"))
    try:
        with _demo_search(demo_dir) as search_url:
            os.environ["FRONTDESK_SEARCH_WEB_URL"] = search_url  # the search plugin's web_url
            failures = _run([scenario], settings, False, 1)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    async def table() -> list[Any]:
        from frontdesk.core.schema import open_store

        store = await open_store(settings.database_url)
        try:
            return await store.list(caller=scenario.caller, limit=100)
        finally:
            await store.close()

    from frontdesk.agents.programs.render import artifact_paths, console, task_table

    rows = list(reversed(run_async(table())))
    task_table(rows, title=f"tasks for {scenario.caller}")
    for task in rows:
        for path_ in artifact_paths(task.result):
            console.print(f"report file: {path_}")
    console.print(
        f"[dim]history: {_me()} tasks list --caller {scenario.caller} --db {settings.database_url}[/dim]",
        soft_wrap=True,
    )
    if failures:
        for f in failures:
            typer.echo(f"FAILED {f}", err=True)
        raise typer.Exit(1)


def _me() -> str:
    """This command as it was started (``.venv/bin/frontdesk`` from ``make demo``), so a
    hint can be pasted as it is: ``frontdesk`` itself is often not on PATH."""
    import os
    import shlex

    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "frontdesk":
        if os.sep in argv0:
            path = Path(argv0)
            try:
                argv0 = str(path.resolve().relative_to(Path.cwd().resolve()))
                argv0 = argv0 if os.sep in argv0 else f".{os.sep}{argv0}"
            except ValueError:
                argv0 = str(path)
        return shlex.quote(argv0)
    return f"{shlex.quote(sys.executable)} -m frontdesk.agents.programs"


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
    registry = host.load(settings)
    registry.require_valid_config()
    await serve(settings, registry, stop)


@operator_errors
def console(
    caller: str = typer.Option("guest", "--caller", help="Who is calling (history follows them)."),
    db: str | None = typer.Option(None, "--db", help="Database URL."),
    text: bool = typer.Option(False, "--text", help="Text even when voice is possible."),
) -> None:
    """Talk to the concierge in the terminal: voice with PortAudio and keys, text otherwise."""
    _quiet_logs()
    settings = _settings(db)
    from frontdesk.agents.programs.console import HELP, console_mode, run_console, run_voice_console
    from frontdesk.agents.programs.render import console as out
    from frontdesk.core import host
    from frontdesk.core.errors import FrontdeskError

    try:
        mode, why = console_mode(settings)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    if mode == "voice" and not text:
        out.print(f"[bold]frontdesk console[/bold] — voice: {why}.")
        run_voice_console(settings)
        return
    make_llm = None
    from frontdesk.agents import providers

    llm_choice = providers.select_all(settings).llm
    if llm_choice.enabled:

        def make_llm() -> Any:
            return providers.build_llm(llm_choice)

    brain = f"LLM {llm_choice.label()}" if llm_choice.enabled else "offline brain"
    reason = "--text given" if mode == "voice" else why
    out.print(f"[bold]frontdesk console[/bold] — text ({reason}); {brain}. {HELP}")
    registry = host.load(settings)
    registry.require_valid_config()

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
