"""The plugin host: one pluggy manager for built-in and third-party plugins.

Built-ins (``frontdesk.plugins.<name>``) are registered by module first, then the ``frontdesk``
entry-point group, the way pytest and datasette do it. Hooks are called one plugin at a time so
that a plugin that fails to import, raises, hangs or registers something invalid is reported
with its name and reason and left out, while everything else loads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy

from frontdesk.core import hookspecs
from frontdesk.core.department import Department
from frontdesk.core.settings import Settings
from frontdesk.core.tools import ToolSpec

log = logging.getLogger("frontdesk.plugins")

BUILTINS = ("tasks", "search", "billing", "reports", "analytics")
ALL = "*"
TRIAGE = "triage"


@dataclass
class PluginInfo:
    name: str
    source: str  # "builtin" or "entry point"
    version: str | None = None
    hooks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    module: Any = None

    def to_json(self, registry: Registry) -> dict[str, Any]:
        tools: dict[str, list[str]] = {}
        for name, spec in registry.tools.items():
            if spec.plugin == self.name:
                tools[name] = sorted(registry.tool_departments.get(name, []))
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "hooks": self.hooks,
            "departments": sorted(
                d.name for d in registry.departments.values() if d.plugin == self.name
            ),
            "tools": tools,
            "errors": self.errors,
        }


@dataclass
class Registry:
    """Everything the plugins registered, with what went wrong along the way."""

    pm: pluggy.PluginManager
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    departments: dict[str, Department] = field(default_factory=dict)
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    # tool name -> department names it is offered in ("*" = every department, triage too)
    tool_departments: dict[str, set[str]] = field(default_factory=dict)
    hook_timeout: float = 5.0

    @property
    def errors(self) -> list[str]:
        return [f"{p.name}: {e}" for p in self.plugins.values() for e in p.errors]

    def tools_for(self, department: str) -> list[ToolSpec]:
        """Tools offered in ``department`` in registration order."""
        return [
            spec
            for name, spec in self.tools.items()
            if department in self.tool_departments.get(name, ())
            or ALL in self.tool_departments.get(name, ())
        ]

    def observe(self, event: Any) -> None:
        """Pass a committed task event to every ``on_task_event`` hook, in the background."""
        impls = self.pm.hook.on_task_event.get_hookimpls()
        if not impls:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for impl in impls:
            task = loop.create_task(self._run_observer(impl, event))
            _background.add(task)
            task.add_done_callback(_background.discard)

    async def _run_observer(self, impl: Any, event: Any) -> None:
        try:
            if inspect.iscoroutinefunction(impl.function):
                await asyncio.wait_for(impl.function(event=event), self.hook_timeout)
            else:
                # A sync observer must never block the call's event loop.
                await asyncio.wait_for(
                    asyncio.get_running_loop().run_in_executor(
                        _observer_pool, lambda: impl.function(event=event)
                    ),
                    self.hook_timeout,
                )
        except Exception as exc:
            log.warning("plugin %s: on_task_event failed: %r", impl.plugin_name, exc)


_background: set[asyncio.Task[None]] = set()
_observer_pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="frontdesk-observer")
_hook_pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="frontdesk-hook")


def _call_with_timeout(fn: Callable[..., Any], timeout: float, **kwargs: Any) -> Any:
    """Run a plugin hook, giving up after ``timeout`` seconds (the thread is abandoned)."""
    future = _hook_pool.submit(fn, **kwargs)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"hook did not return within {timeout:g}s") from None


def _version(dist_name: str | None) -> str | None:
    if not dist_name:
        return None
    try:
        from importlib.metadata import version

        return version(dist_name)
    except Exception:
        return None


def load(settings: Settings | None = None, *, extra: Iterable[tuple[str, Any]] = ()) -> Registry:
    """Discover plugins and build the registry. Never raises because of a plugin.

    ``extra`` adds (name, module-or-object) plugins, as tests and embedders do.
    """
    settings = settings or Settings()
    pm = pluggy.PluginManager("frontdesk")
    pm.add_hookspecs(hookspecs)
    registry = Registry(pm=pm, hook_timeout=settings.hook_timeout_seconds)
    allow = Settings.split(settings.load_plugins)
    deny = set(Settings.split(settings.disable_plugins) or [])

    for name in BUILTINS:
        if name in deny:
            continue
        info = PluginInfo(name=name, source="builtin", version=_version("frontdesk"))
        try:
            info.module = importlib.import_module(f"frontdesk.plugins.{name}")
        except Exception as exc:
            info.errors.append(f"failed to import: {exc!r}")
        registry.plugins[name] = info

    for ep in sorted(entry_points(group="frontdesk"), key=lambda e: e.name):
        if ep.name in deny or (allow is not None and ep.name not in allow):
            continue
        if ep.name in registry.plugins:
            log.warning("plugin %s: name already taken by a built-in; skipped", ep.name)
            continue
        dist = getattr(ep, "dist", None)
        info = PluginInfo(
            name=ep.name, source="entry point", version=_version(dist.name if dist else None)
        )
        try:
            info.module = ep.load()
        except BaseException as exc:  # SystemExit in a plugin must not stop us either
            info.errors.append(f"failed to import: {exc!r}")
        registry.plugins[ep.name] = info

    for name, obj in extra:
        if name not in deny:
            registry.plugins[name] = PluginInfo(name=name, source="extra", module=obj)

    for info in registry.plugins.values():
        if info.module is None:
            continue
        try:
            # A plugin may bring hookspecs of its own (billing's payment gateway does), the
            # way pytest_addhooks works: a module attribute naming a class or module of specs.
            if (own := getattr(info.module, "frontdesk_hookspecs", None)) is not None:
                pm.add_hookspecs(own)
            pm.register(info.module, name=info.name)
        except Exception as exc:
            info.errors.append(f"invalid hooks: {exc}")
            info.module = None
            continue
        info.hooks = sorted(h.name for h in pm.get_hookcallers(info.module) or [])

    _collect(registry)
    for err in registry.errors:
        log.warning("plugin %s", err)
    return registry


def _impls(registry: Registry, hook: str) -> list[Any]:
    # pluggy calls the last registered first; we want registration order for "first one wins".
    order = list(registry.plugins)
    impls = getattr(registry.pm.hook, hook).get_hookimpls()
    return sorted(impls, key=lambda i: order.index(i.plugin_name) if i.plugin_name in order else 0)


def _collect(registry: Registry) -> None:
    for impl in _impls(registry, "register_departments"):
        info = registry.plugins[impl.plugin_name]
        staged: list[Department] = []

        def add_department(dept: Any, _staged: list[Department] = staged) -> None:
            _staged.append(dept)

        if not _run_hook(registry, info, impl, add_department):
            continue
        for dept in staged:
            problems = (
                dept.problems()
                if isinstance(dept, Department)
                else [f"registered {dept!r}, which is not a Department"]
            )
            if dept_name := getattr(dept, "name", None):
                if dept_name == TRIAGE or dept_name in registry.departments:
                    problems.append(f"department {dept_name!r} is already registered")
            problems += [p for t in getattr(dept, "tools", []) if isinstance(t, ToolSpec) for p in t.problems()]
            if problems:
                info.errors.extend(problems)
                continue
            dept.plugin = info.name
            registry.departments[dept.name] = dept
            for spec in dept.tools:
                _add_tool(registry, info, spec, [dept.name])

    for impl in _impls(registry, "register_tools"):
        info = registry.plugins[impl.plugin_name]
        staged_tools: list[tuple[Any, list[str]]] = []

        def add_tool(
            spec: Any, departments: Iterable[str] = (ALL,), _staged: list[Any] = staged_tools
        ) -> None:
            _staged.append((spec, [departments] if isinstance(departments, str) else list(departments)))

        if not _run_hook(registry, info, impl, add_tool):
            continue
        for spec, depts in staged_tools:
            if not isinstance(spec, ToolSpec):
                info.errors.append(f"registered {spec!r}, which is not a @tool")
                continue
            if problems := spec.problems():
                info.errors.extend(problems)
                continue
            _add_tool(registry, info, spec, depts)


def _run_hook(registry: Registry, info: PluginInfo, impl: Any, register: Callable[..., None]) -> bool:
    try:
        result = _call_with_timeout(impl.function, registry.hook_timeout, register=register)
    except Exception as exc:
        info.errors.append(f"{impl.function.__name__} raised {exc!r}")
        return False
    if result is not None:
        info.errors.append(f"{impl.function.__name__} returned {result!r}; hooks call register()")
        return False
    return True


def _add_tool(registry: Registry, info: PluginInfo, spec: ToolSpec, departments: list[str]) -> None:
    existing = registry.tools.get(spec.name)
    if existing is not None and existing is not spec:
        info.errors.append(
            f"tool {spec.name!r} conflicts with the one from plugin {existing.plugin!r}, which wins"
        )
        return
    if existing is None:
        spec.plugin = info.name
        registry.tools[spec.name] = spec
    registry.tool_departments.setdefault(spec.name, set()).update(departments)


def department_names(registry: Registry) -> list[str]:
    return [TRIAGE, *registry.departments]
