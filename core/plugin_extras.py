"""Collecting what plugins register besides desks and tools: settings classes and migrations;
and what they tell ``frontdesk doctor`` (``doctor_checks``)."""

from __future__ import annotations

import asyncio
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

from frontdesk.core import plugin_settings
from frontdesk.core.observers import HookTimeout, call_kwargs, call_with_timeout
from frontdesk.core.registry import Registry, _impls, _run_hook

_BRANCH = re.compile(r"^branch_labels\s*=\s*\(?\s*['\"]([\w-]+)['\"]", re.M)
_BASE = re.compile(r"^down_revision\s*=\s*None\b", re.M)


def collect_settings(registry: Registry, impls: list[Any]) -> None:
    for impl in impls:
        info = registry.plugins[impl.plugin_name]
        staged: list[Any] = []
        if not _run_hook(registry, info, impl, "register_settings", register=staged.append):
            continue
        if len(staged) != 1:
            info.errors.append(f"register_settings registered {len(staged)} classes; use one")
            continue
        cls = staged[0]
        if not (isinstance(cls, type) and issubclass(cls, BaseSettings)):
            info.errors.append(f"register_settings got {cls!r}, not a pydantic BaseSettings class")
            continue
        try:
            registry.configs[info.name] = plugin_settings.build(info.name, cls, registry.profile)
        except ValueError as exc:
            registry.config_errors.append(str(exc))
            info.errors.append(f"settings: {exc}")


def collect_migrations(registry: Registry, impls: list[Any]) -> None:
    for impl in impls:
        info = registry.plugins[impl.plugin_name]
        staged: list[Any] = []
        if not _run_hook(registry, info, impl, "register_migrations", register=staged.append):
            continue
        for path in staged:
            if problem := _problem(info.name, path):
                # Its tools need its tables: without a branch to create them every call
                # would fail, so the plugin is withdrawn rather than listed as loaded.
                registry.fail(info.name, f"migrations {path}: {problem}")
            else:
                registry.migrations[info.name] = Path(path)


def _problem(plugin: str, path: Any) -> str | None:
    if not isinstance(path, str | Path):
        return f"not a path ({type(path).__name__})"
    if not Path(path).is_dir():
        return "no such folder (is it in the package data? see docs/plugins.md, Packaging)"
    texts = [p.read_text(encoding="utf-8") for p in Path(path).glob("*.py")]
    bases = [t for t in texts if _BASE.search(t)]
    if len(bases) != 1:
        return f"needs exactly one first revision (down_revision = None), found {len(bases)}"
    label = _BRANCH.search(bases[0])
    if label is None or label.group(1) != plugin:
        return f'its first revision needs branch_labels = ("{plugin}",)'
    return None


# -- doctor_checks --------------------------------------------------------------------------

CHECK_STATUSES = ("ok", "info", "warn", "error")
_MAX_MESSAGE = 300
_MAX_ROWS = 20  # per plugin


@dataclass(frozen=True)
class Check:
    """One row a plugin's ``doctor_checks`` gave (or one saying that it misbehaved)."""

    plugin: str
    status: str  # one of CHECK_STATUSES
    message: str


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _awaited(fn: Any) -> Any:
    """``fn`` made sync: an async impl's coroutine is run to its end in the hook's thread."""

    def call(**kwargs: Any) -> Any:
        result = fn(**kwargs)
        if inspect.isawaitable(result):

            async def wait() -> Any:
                return await result

            return asyncio.run(wait())
        return result

    return call


def _rows(plugin: str, result: Any) -> list[Check]:
    if result is None:
        return []
    if not isinstance(result, list | tuple):
        return [
            Check(
                plugin,
                "error",
                f"doctor_checks returned {_shown(result)}; expected a list of (status, message)",
            )
        ]
    rows = []
    for item in list(result)[:_MAX_ROWS]:
        ok = (
            isinstance(item, list | tuple)
            and len(item) == 2
            and item[0] in CHECK_STATUSES
            and isinstance(item[1], str)
            and item[1].strip()
        )
        if not ok:
            rows.append(
                Check(
                    plugin,
                    "error",
                    f"doctor_checks gave {_shown(item)}; a row is (status, message) with status "
                    + " | ".join(CHECK_STATUSES),
                )
            )
            continue
        message = " ".join(item[1].split())
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 3] + "..."
        rows.append(Check(plugin, item[0], message))
    if len(result) > _MAX_ROWS:
        rows.append(Check(plugin, "warn", f"{len(result) - _MAX_ROWS} more doctor rows left out"))
    return rows


def doctor_checks(registry: Registry) -> list[Check]:
    """Every loaded plugin's ``doctor_checks`` rows, in load order. Each implementation runs on
    its own under the hook timeout; one that raises, hangs or returns garbage becomes an
    ``error`` row for that plugin, never an exception here."""
    found: list[Check] = []
    for impl in _impls(registry, "doctor_checks"):
        plugin = impl.plugin_name
        offered = {"config": registry.configs.get(plugin), "hook": registry.pm.hook}
        try:
            result = call_with_timeout(
                _awaited(impl.function), registry.hook_timeout, **call_kwargs(impl, offered)
            )
        except HookTimeout as exc:
            found.append(Check(plugin, "error", f"doctor_checks {exc}"))
            continue
        except BaseException as exc:  # a plugin's sys.exit() is its error too, not doctor's
            if isinstance(exc, KeyboardInterrupt):
                raise
            found.append(Check(plugin, "error", f"doctor_checks raised {_shown(exc)}"))
            continue
        found.extend(_rows(plugin, result))
    return found
