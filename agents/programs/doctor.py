"""What ``frontdesk doctor`` looks at, section by section: providers, LiveKit, audio, the
database (read-only: it never creates or migrates one), the profile, the plugins and their own
checks, and with ``--check`` one live request per provider. Never imports livekit and never
returns a secret: keys are set or not set, URLs have their password masked."""

from __future__ import annotations

import asyncio
import ctypes.util
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frontdesk.agents import providers
from frontdesk.core.errors import ConfigError
from frontdesk.core.settings import Settings
from frontdesk.db.engine import mask_url

DB_TIMEOUT_SECONDS = 5.0
SECRET_VARS = (
    *(v for v in providers.KEY_VARS if v != providers.GOOGLE_CREDS),
    "LIVEKIT_API_KEY",
    "LIVEKIT_API_SECRET",
)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


# Always listed (set or not); the other key variables only when set.
_MAIN_KEYS = (
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    providers.GOOGLE_CREDS,
    "DEEPGRAM_API_KEY",
    "ELEVEN_API_KEY",
)


def _providers_section(
    settings: Settings, env: dict[str, str]
) -> tuple[list[dict[str, Any]], bool, providers.Choices | None]:
    rows, ok, chosen = [], True, {}
    llm_chain = None
    for kind in ("llm", "stt", "tts"):
        value = getattr(settings, kind)
        try:
            chain = providers.select(kind, value, env, llm=llm_chain)  # type: ignore[arg-type]
        except ConfigError as exc:
            ok = False
            rows.append({"item": kind.upper(), "status": "error", "detail": str(exc)})
            continue
        if kind == "llm":
            llm_chain = chain
        chosen[kind] = chain
        for i, entry in enumerate(chain):
            item = kind.upper() if i == 0 else f"{kind.upper()} fallback {i}"
            rows.append(
                {"item": item, "status": "ok", "value": entry.describe(), "detail": entry.reason}
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
        if var in _MAIN_KEYS or env.get(var):
            rows.append(
                {
                    "item": var,
                    "status": "ok" if env.get(var) else "info",
                    "detail": "set" if env.get(var) else "not set",
                }
            )
    for var in providers.URL_VARS:
        if env.get(var):
            rows.append(
                {"item": var, "status": "ok", "detail": f"set ({providers.safe_url(env[var])})"}
            )
    choices = None
    if ok:
        choices = providers.Choices(chosen["llm"], chosen["stt"], chosen["tts"], env=env)
    return rows, ok, choices


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


def _headroom_row(settings: Settings) -> dict[str, Any] | None:
    """Free space where an SQLite database lives (or will be created), against
    FRONTDESK_MIN_FREE_MB: SQLite stops writing when the disk is full (db/health.py)."""
    from frontdesk.db import health

    path = health.sqlite_path(settings.database_url)
    if path is None:
        return None
    try:
        room = health.headroom(path, health.min_free_bytes(settings))
    except OSError as exc:
        return {"item": "free space", "status": "warn", "detail": f"not measured: {exc}"}
    return {"item": "free space", "status": "ok" if room.ok else "error", "detail": room.line()}


async def _migration_trial(url: str, registry: Any) -> list[dict[str, Any]]:
    """Pending plugin revisions, tried in a transaction that is rolled back: a plugin whose
    migration would fail is withdrawn here as it would be in a call, and shown as FAIL."""
    from frontdesk.core.plugin_migrations import trial
    from frontdesk.core.schema import withdraw_failed

    try:
        faults = await trial(url, registry, timeout=DB_TIMEOUT_SECONDS * 2)
    except Exception as exc:
        detail = f"pending plugin migrations not tried: {type(exc).__name__}"
        return [{"item": "plugin migrations", "status": "warn", "detail": detail}]
    withdraw_failed(registry, faults)
    return [
        {"item": f"schema {f.branch}", "status": "error", "detail": f"{f}; {f.branch} is off"}
        for f in faults
    ]


def _plugins_section(registry: Any) -> list[dict[str, Any]]:
    from frontdesk.core import host
    from frontdesk.core.plugin_extras import doctor_checks
    from frontdesk.core.plugin_settings import shown

    good = [n for n, p in registry.plugins.items() if not p.errors]
    rows = [{"item": "loaded", "status": "ok", "detail": ", ".join(good) or "none"}]
    # A plugin that failed (to import, to migrate, its migrations missing) is FAIL: its desk
    # and tools are not there. Its first error says why; the others follow as warnings.
    failed = {n: p for n, p in registry.plugins.items() if p.status == "failed"}
    for name, info in failed.items():
        why = info.failure or (info.errors[0] if info.errors else "failed")
        rows.append({"item": name, "status": "error", "detail": f"not loaded: {why}"})
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
    for info in [*registry.plugins.values(), *registry.skipped]:
        shown = info.failure or (info.errors[0] if info.name in failed and info.errors else None)
        for err in info.errors:
            if err != shown and not err.startswith("settings: "):
                rows.append({"item": "error", "status": "warn", "detail": f"{info.name}: {err}"})
    # What each plugin says it needs (its doctor_checks hook): a sandbox in use, a missing URL.
    for check in doctor_checks(registry):
        rows.append({"item": check.plugin, "status": check.status, "detail": check.message})
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
    for line in registry.profile_warnings:
        rows.append({"item": "desk", "status": "warn", "detail": line})
    for line in registry.profile_errors:
        rows.append({"item": "desk", "status": "error", "detail": line})
    return rows


async def _check_section(choices: providers.Choices | None) -> tuple[list[dict[str, Any]], bool]:
    from frontdesk.agents.provider_check import check

    if choices is None:
        return [
            {"item": "check", "status": "error", "detail": "not run: fix the providers above"}
        ], False
    outcomes = await check(choices)
    rows = [
        {"item": f"{o.probe.kind} {o.probe.entry}", "status": o.status, "detail": o.detail}
        for o in outcomes
    ]
    if not rows:
        rows = [
            {
                "item": "check",
                "status": "info",
                "detail": "nothing to check: offline brain, text only",
            }
        ]
    return rows, all(o.status != "error" for o in outcomes)


async def gather(
    settings: Settings,
    env: dict[str, str],
    setting_problems: list[str] | None = None,
    *,
    live: bool = False,
) -> dict[str, Any]:
    from frontdesk.core import host
    from frontdesk.core.schema import branches

    registry = host.load(settings)
    provider_rows, providers_ok, choices = _providers_section(settings, env)
    checks = asyncio.create_task(_check_section(choices)) if live else None  # beside the DB probe
    # A core setting with a bad value is reported; its default is used for the other checks.
    setting_problems = setting_problems or []
    setting_rows = [{"item": "setting", "status": "error", "detail": p} for p in setting_problems]
    db_rows, db_ok = await _database_section(settings.database_url, branches(registry))
    if db_ok:
        db_rows += await _migration_trial(settings.database_url, registry)
    room = _headroom_row(settings)
    if room is not None:
        db_rows.append(room)
    sections = {
        **({"settings": setting_rows} if setting_rows else {}),
        "providers": provider_rows,
        "livekit": _livekit_section(env),
        "audio": _audio_section(),
        "database": db_rows,
        "profile": _profile_section(registry),
        "plugins": _plugins_section(registry),
    }
    checks_ok = True
    if checks is not None:
        sections["check"], checks_ok = await checks
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
    ok = (
        providers_ok and db_ok and checks_ok and not registry.config_errors and not setting_problems
    )
    ok = ok and (room is None or room["status"] != "error")
    ok = ok and not any(
        row["status"] == "error" for name in ("plugins", "profile") for row in sections[name]
    )
    return {"ok": ok, "sections": clean}


MARK = {
    "ok": "ok  ",
    "info": "-   ",
    "warn": "warn",
    "error": "FAIL",
}  # how a row's status is printed
