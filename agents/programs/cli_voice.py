"""``frontdesk doctor``, ``start`` and ``dev``.

``doctor`` never imports livekit and never prints a secret: keys are reported as set or not
set, URLs with their password masked. ``start``/``dev`` check what they can before handing the
process to the LiveKit worker, so a missing variable is one line and exit code 2, not a
traceback from inside the worker.
"""

from __future__ import annotations

import asyncio
import ctypes.util
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from frontdesk.agents import providers
from frontdesk.agents.programs.exits import fail, run_async
from frontdesk.core.errors import ConfigError, FrontdeskError
from frontdesk.core.settings import Settings, load_settings, load_settings_leniently
from frontdesk.db.engine import mask_url

DB_TIMEOUT_SECONDS = 5.0
SECRET_VARS = (
    *(v for v in providers.KEY_VARS if v != providers.GOOGLE_CREDS),
    "LIVEKIT_API_KEY",
    "LIVEKIT_API_SECRET",
)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.command()(start)
    app.command()(dev)


# -- doctor ---------------------------------------------------------------------------------


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _providers_section(
    settings: Settings, env: dict[str, str]
) -> tuple[list[dict[str, Any]], bool]:
    rows, ok, chosen = [], True, {}
    for kind in ("llm", "stt", "tts"):
        value = getattr(settings, kind)
        try:
            choice = providers.select(kind, value, env)  # type: ignore[arg-type]
        except ConfigError as exc:
            ok = False
            rows.append({"item": kind.upper(), "status": "error", "detail": str(exc)})
            continue
        chosen[kind] = choice
        rows.append(
            {"item": kind.upper(), "status": "ok", "value": choice.label(), "detail": choice.reason}
        )
    if "stt" in chosen and "tts" in chosen:
        if chosen["stt"].enabled and chosen["tts"].enabled:
            rows.append(
                {"item": "voice", "status": "ok", "detail": "STT and TTS are both available"}
            )
        else:
            missing = " and ".join(k.upper() for k in ("stt", "tts") if not chosen[k].enabled)
            rows.append(
                {
                    "item": "voice",
                    "status": "warn",
                    "detail": f"text only: no {missing} (set a key above to talk by voice)",
                }
            )
    for var in providers.KEY_VARS:
        rows.append(
            {
                "item": var,
                "status": "ok" if env.get(var) else "info",
                "detail": "set" if env.get(var) else "not set",
            }
        )
    return rows, ok


def _livekit_section(env: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for var in providers.LIVEKIT_VARS:
        value = env.get(var)
        detail = "set" if value else "not set"
        if var == "LIVEKIT_URL" and value:
            parts = urlsplit(value)  # scheme and host only: never userinfo or query
            detail = f"set ({parts.scheme}://{parts.hostname or '?'}{f':{parts.port}' if parts.port else ''})"
        rows.append({"item": var, "status": "ok" if value else "warn", "detail": detail})
    missing = [v for v in providers.LIVEKIT_VARS if not env.get(v)]
    rows.append(
        {
            "item": "worker",
            "status": "warn" if missing else "ok",
            "detail": f"`frontdesk start` needs {', '.join(missing)}"
            if missing
            else "`frontdesk start` can register with LiveKit",
        }
    )
    return rows


def _audio_section() -> list[dict[str, Any]]:
    lib = ctypes.util.find_library("portaudio")
    if lib:
        return [
            {"item": "PortAudio", "status": "ok", "detail": f"found ({lib}); console can use audio"}
        ]
    return [
        {
            "item": "PortAudio",
            "status": "warn",
            "detail": "not found; console runs in text (install libportaudio2 for voice)",
        }
    ]


async def _database_section(url: str, wanted: list[Any]) -> tuple[list[dict[str, Any]], bool]:
    from frontdesk.core.schema import current
    from frontdesk.db.engine import create_engine, parse_url

    rows: list[dict[str, Any]] = [{"item": "URL", "status": "ok", "detail": mask_url(url)}]
    try:
        parsed = parse_url(url)
    except ConfigError as exc:
        rows.append({"item": "reachable", "status": "error", "detail": _scrub(str(exc), [url])})
        return rows, False
    secrets = [parsed.password or ""] if parsed.password else []
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database or ""
        if db and db != ":memory:" and not Path(db).exists():
            # Connecting would create the file; doctor only looks.
            parent = Path(db).resolve().parent
            writable = parent.is_dir() and os.access(parent, os.W_OK)
            rows.append(
                {
                    "item": "reachable",
                    "status": "warn" if writable else "error",
                    "detail": f"{db} does not exist yet; `frontdesk db upgrade` (or the first "
                    "console, simulate or start) creates it"
                    if writable
                    else f"{db} cannot be created: {parent} is not a writable directory",
                }
            )
            return rows, writable
        if db and db != ":memory:":
            # Looked at read-only: connecting would switch a foreign file's journal to WAL.
            from frontdesk.db.engine import sqlite_tables

            tables = sqlite_tables(db)
            if tables is None or (tables and "alembic_version" not in tables):
                what = "not an SQLite database" if tables is None else "another application's"
                detail = f"{db} is {what}, not a frontdesk database; point FRONTDESK_DATABASE_URL elsewhere"
                rows.append({"item": "reachable", "status": "error", "detail": detail})
                return rows, False
    engine = create_engine(url)
    try:

        async def probe() -> dict[str, str | None]:
            async with engine.connect() as conn:
                return await current(conn, wanted)

        revisions = await asyncio.wait_for(probe(), DB_TIMEOUT_SECONDS)
    except Exception as exc:
        detail = f"no: {type(exc).__name__}: {_scrub(str(exc), secrets)}".splitlines()[0]
        rows.append({"item": "reachable", "status": "error", "detail": detail})
        return rows, False
    finally:
        await engine.dispose()
    rows.append({"item": "reachable", "status": "ok", "detail": "yes"})
    for branch in wanted:
        revision, head = revisions.get(branch.name), branch.head
        item = f"schema {branch.name}"
        if revision == head:
            rows.append({"item": item, "status": "ok", "detail": f"at the head ({head})"})
        elif revision is None:
            detail = f"empty; migrated to {head} on first use, or run `frontdesk db upgrade`"
            rows.append({"item": item, "status": "warn", "detail": detail})
        else:
            detail = f"at {revision}, head is {head}: run `frontdesk db upgrade`"
            rows.append({"item": item, "status": "warn", "detail": detail})
    return rows, True


def _plugins_section(registry: Any) -> list[dict[str, Any]]:
    from frontdesk.core import host
    from frontdesk.core.plugin_settings import shown

    good = [n for n, p in registry.plugins.items() if not p.errors]
    rows = [{"item": "loaded", "status": "ok", "detail": ", ".join(good) or "none"}]
    rows.append(
        {
            "item": "departments",
            "status": "ok",
            "detail": ", ".join(host.department_names(registry)),
        }
    )
    for name, config in registry.configs.items():
        values = ", ".join(f"{k}={v}" for k, v in shown(config).items()) or "(no fields)"
        rows.append({"item": f"{name} settings", "status": "ok", "detail": values})
    for err in registry.config_errors:
        rows.append({"item": "setting", "status": "error", "detail": err})
    for err in registry.errors:
        if not err.split(": ", 1)[-1].startswith("settings: "):
            rows.append({"item": "error", "status": "warn", "detail": err})
    return rows


def _profile_section(registry: Any) -> list[dict[str, Any]]:
    profile = registry.profile
    off = [name for name, desk in profile.departments.items() if not desk.enabled]
    rows = [
        {
            "item": "business",
            "status": "ok",
            "detail": f"{profile.business.name} (from {profile.source})"
            if profile.source
            else "no profile: the neutral front desk (add frontdesk.toml to name yours)",
        }
    ]
    if off:
        rows.append({"item": "desks off", "status": "info", "detail": ", ".join(off)})
    return rows


async def gather(
    settings: Settings, env: dict[str, str], setting_problems: list[str] | None = None
) -> dict[str, Any]:
    from frontdesk.core import host
    from frontdesk.core.schema import branches

    registry = host.load(settings)
    provider_rows, providers_ok = _providers_section(settings, env)
    # A core setting with a bad value is reported; its default is used for the other checks.
    setting_problems = setting_problems or []
    setting_rows = [{"item": "setting", "status": "error", "detail": p} for p in setting_problems]
    db_rows, db_ok = await _database_section(settings.database_url, branches(registry))
    sections = {
        **({"settings": setting_rows} if setting_rows else {}),
        "providers": provider_rows,
        "livekit": _livekit_section(env),
        "audio": _audio_section(),
        "database": db_rows,
        "profile": _profile_section(registry),
        "plugins": _plugins_section(registry),
    }
    # Scrub every value we know to be secret, whatever path it might have leaked through.
    secrets = [env.get(k, "") for k in SECRET_VARS]
    try:
        from sqlalchemy.engine import make_url

        secrets.append(make_url(settings.database_url).password or "")
    except Exception:
        pass
    secrets = [s for s in secrets if len(s) >= 4]
    clean = {
        name: [
            {k: _scrub(v, secrets) if isinstance(v, str) else v for k, v in row.items()}
            for row in rows
        ]
        for name, rows in sections.items()
    }
    ok = providers_ok and db_ok and not registry.config_errors and not setting_problems
    return {"ok": ok, "sections": clean}


_MARK = {"ok": "ok  ", "info": "-   ", "warn": "warn", "error": "FAIL"}


def doctor(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """What is configured and what is missing, in plain words (exit 1 if something is broken).

    No keys is not broken: frontdesk then runs with the offline brain in text."""
    settings, setting_problems = load_settings_leniently()
    env = providers.provider_env()
    report = run_async(gather(settings, env, setting_problems))
    if as_json:
        typer.echo(json.dumps(report))
    else:
        for name, rows in report["sections"].items():
            typer.echo(name)
            for row in rows:
                line = f"{row['value']} ({row['detail']})" if row.get("value") else row["detail"]
                typer.echo(f"  [{_MARK[row['status']]}] {row['item']}: {line}")
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
    providers.export_dotenv_keys()  # LiveKit and the plugins read os.environ only
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
