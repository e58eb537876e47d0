"""Collecting what plugins register besides desks and tools: settings classes and migrations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

from frontdesk.core import plugin_settings
from frontdesk.core.registry import Registry, _run_hook

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
                info.errors.append(f"migrations {path}: {problem}; left out")
            else:
                registry.migrations[info.name] = Path(path)


def _problem(plugin: str, path: Any) -> str | None:
    if not isinstance(path, str | Path) or not Path(path).is_dir():
        return "not a folder"
    texts = [p.read_text(encoding="utf-8") for p in Path(path).glob("*.py")]
    bases = [t for t in texts if _BASE.search(t)]
    if len(bases) != 1:
        return f"needs exactly one first revision (down_revision = None), found {len(bases)}"
    label = _BRANCH.search(bases[0])
    if label is None or label.group(1) != plugin:
        return f'its first revision needs branch_labels = ("{plugin}",)'
    return None
