"""The plugin host: one pluggy manager for built-in and third-party plugins.

Built-ins (``frontdesk.plugins.<name>``) are registered by module first, then the ``frontdesk``
entry-point group sorted by name, then any ``extra`` plugins; that order decides every "first
one wins". Hooks are called one plugin at a time, each under a timeout, so a plugin that fails
to import, raises, hangs, returns garbage or registers something invalid is reported with its
name and reason and that part is left out, while everything else loads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy

from frontdesk.core import hookspecs
from frontdesk.core.department import Department
from frontdesk.core.errors import ConfigError
from frontdesk.core.observers import HookTimeout, Observers, call_kwargs, call_with_timeout
from frontdesk.core.plugin_extras import collect_migrations, collect_settings
from frontdesk.core.profile import Profile, load_profile
from frontdesk.core.settings import Settings
from frontdesk.core.tools import ToolSpec

log = logging.getLogger("frontdesk.plugins")

ALL = "*"
TRIAGE = "triage"
# Triage and the departments generate handoff tools with this prefix; a plugin tool with the
# same name would make LiveKit reject the agent's tool list mid-call.
RESERVED_PREFIX = "transfer_to_"


@dataclass
class PluginInfo:
    name: str
    source: str  # "builtin", "entry point" or "extra"
    version: str | None = None
    hooks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    module: Any = None
    distribution: str | None = None
    commands: list[str] = field(default_factory=list)
    skipped: str | None = None  # why it was not loaded at all (deny/allow list, name taken)

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        return "failed" if self.module is None else "loaded"

    def to_json(self, registry: Registry) -> dict[str, Any]:
        tools: dict[str, list[str]] = {}  # department (or "*") -> this plugin's tools there
        for name, spec in registry.tools.items():
            if spec.plugin == self.name:
                for dept in sorted(registry.tool_departments.get(name, ())):
                    tools.setdefault(dept, []).append(name)
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "distribution": self.distribution,
            "status": self.status,
            "skipped": self.skipped,
            "hooks": self.hooks,
            "departments": sorted(
                d.name for d in registry.departments.values() if d.plugin == self.name
            ),
            "tools": tools,
            "commands": self.commands,
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
    skipped: list[PluginInfo] = field(default_factory=list)
    # {"kind": "tool" | "department" | "plugin", "name", "winner", "loser"}
    conflicts: list[dict[str, str]] = field(default_factory=list)
    profile: Profile = field(default_factory=Profile)
    # plugin name -> its settings instance (register_settings); problems as one-liners
    configs: dict[str, Any] = field(default_factory=dict)
    config_errors: list[str] = field(default_factory=list)
    # plugin name -> its Alembic versions folder (register_migrations)
    migrations: dict[str, Any] = field(default_factory=dict)
    _observers: Observers | None = field(default=None, repr=False)

    def require_valid_config(self) -> None:
        """Raise ``ConfigError`` with the first bad plugin setting; commands that run calls
        call this before they start, so a bad value is one line and exit code 2."""
        if self.config_errors:
            raise ConfigError(self.config_errors[0])

    def instructions_for(self, department: Department) -> str:
        """A desk's own instructions, then the profile's house style and desk additions."""
        parts = [department.instructions.strip()]
        if extra := self.profile.desk(department.name).instructions.strip():
            parts.append(extra)
        if house := self.profile.business.instructions.strip():
            parts.append(house)
        return "\n".join(p for p in parts if p)

    @property
    def errors(self) -> list[str]:
        every = [*self.plugins.values(), *self.skipped]
        return [f"{p.name}: {e}" for p in every for e in p.errors]

    def tools_for(self, department: str) -> list[ToolSpec]:
        """Tools offered in ``department`` in registration order."""
        return [
            spec
            for name, spec in self.tools.items()
            if department in self.tool_departments.get(name, ())
            or ALL in self.tool_departments.get(name, ())
        ]

    def observe(self, event: Any) -> None:
        """Queue a committed task event for every ``on_task_event`` hook; returns at once.

        Safe to call from the store's writer: it never raises and never waits.
        """
        try:
            if self._observers is None:
                impls = _impls(self, "on_task_event")  # plugins are fixed once loaded
                self._observers = Observers(impls, self.hook_timeout, self._report)
            self._observers.put(event)
        except Exception:
            log.exception("on_task_event dispatch failed")

    async def drain(self, timeout: float = 2.0) -> None:
        """Wait up to ``timeout`` seconds for queued events to reach observers (at shutdown)."""
        if self._observers is not None:
            await self._observers.drain(timeout)

    def _report(self, plugin: str, message: str) -> None:
        if plugin in self.plugins:
            self.plugins[plugin].errors.append(message)

    def add_commands(self, cli: Any) -> None:
        """Let every plugin's ``register_commands`` add to ``cli``, each isolated and timed.

        Each hook gets a scratch app of the same kind; its commands join ``cli`` only if the
        hook succeeded, so a hook that raises halfway or hangs adds nothing (an abandoned
        thread can only touch its scratch app), and a command name that is taken (``start``,
        ``tasks``, another plugin's) is reported as a conflict instead of replacing it."""
        taken = {_command_name(c) for c in _commands(cli)}
        for impl in _impls(self, "register_commands"):
            info = self.plugins[impl.plugin_name]
            scratch = type(cli)()
            if not _run_hook(self, info, impl, "register_commands", cli=scratch):
                continue
            for entry, kind in _commands_with_kind(scratch):
                name = _command_name(entry)
                if name in taken:
                    info.errors.append(f"command {name!r} is already taken; left out")
                    self.conflicts.append(
                        {"kind": "command", "name": name, "winner": "earlier", "loser": info.name}
                    )
                    continue
                taken.add(name)
                getattr(cli, kind).append(entry)
                info.commands.append(name)


def _commands_with_kind(cli: Any) -> list[tuple[Any, str]]:
    return [(c, "registered_commands") for c in getattr(cli, "registered_commands", [])] + [
        (g, "registered_groups") for g in getattr(cli, "registered_groups", [])
    ]


def _commands(cli: Any) -> list[Any]:
    return [entry for entry, _ in _commands_with_kind(cli)]


def _command_name(entry: Any) -> str:
    if getattr(entry, "name", None):
        return str(entry.name)
    fallback = getattr(getattr(entry, "callback", None), "__name__", "?")
    return fallback.replace("_", "-")


def load(
    settings: Settings | None = None,
    *,
    extra: Iterable[tuple[str, Any]] = (),
    profile: Profile | None = None,
) -> Registry:
    """Discover plugins and build the registry. Never raises because of a plugin; raises
    ``ConfigError`` for a bad profile (the operator's file, named in one line).

    ``extra`` adds (name, module-or-object) plugins, as tests and embedders do; the deny-list
    applies to them, the allow-list (which is for installed plugins) does not. ``profile``
    defaults to ``frontdesk.toml`` or the file ``FRONTDESK_PROFILE`` names.
    """
    settings = settings or Settings()
    profile = profile if profile is not None else load_profile()
    pm = pluggy.PluginManager("frontdesk")
    pm.add_hookspecs(hookspecs)
    registry = Registry(pm=pm, hook_timeout=settings.hook_timeout_seconds, profile=profile)
    allow = Settings.split(settings.load_plugins)
    deny = set(Settings.split(settings.disable_plugins) or [])

    for info, loader in _candidates(allow, deny, extra):
        if not info.skipped and info.name in registry.plugins:
            winner = registry.plugins[info.name]
            info.skipped = f"name already taken by {winner.source} plugin {winner.name!r}"
            info.errors.append(info.skipped)
            registry.conflicts.append(
                {"kind": "plugin", "name": info.name, "winner": winner.source, "loser": info.source}
            )
        if info.skipped:
            registry.skipped.append(info)
            continue
        registry.plugins[info.name] = info
        try:
            info.module = loader()
        except (Exception, SystemExit) as exc:  # SystemExit at import must not stop us either
            log.debug("plugin %s failed to import", info.name, exc_info=True)
            info.errors.append(f"failed to import: {exc!r}")

    # Every plugin's own hookspecs go in before any plugin is registered, so an impl is checked
    # against its spec at register time and a bad impl is blamed on its plugin, not the spec's.
    loaded = [info for info in registry.plugins.values() if info.module is not None]
    for info in loaded:
        _add_own_hookspecs(registry, info)
    for info in loaded:
        _register(registry, info)
    _report_unknown_hooks(registry)
    _collect(registry)
    collect_settings(registry, _impls(registry, "register_settings"), _run_hook)
    collect_migrations(registry, _impls(registry, "register_migrations"), _run_hook)
    _apply_profile(registry)
    for err in registry.errors:
        log.warning("plugin %s", err)
    return registry


def _apply_profile(registry: Registry) -> None:
    """Switch off the desks the profile disables; a desk it names that no plugin registered is
    the operator's mistake, reported in one line."""
    profile = registry.profile
    for name, desk in profile.departments.items():
        if name != TRIAGE and name not in registry.departments:
            known = ", ".join([TRIAGE, *registry.departments]) or "none"
            raise ConfigError(
                f"{profile.key('departments', name)}: no such department (known: {known})"
            )
        if not desk.enabled:
            if name == TRIAGE:
                raise ConfigError(f"{profile.key('departments', name, 'enabled')}: triage cannot be switched off")
            registry.departments.pop(name)
            for where in registry.tool_departments.values():
                where.discard(name)


def _candidates(
    allow: list[str] | None, deny: set[str], extra: Iterable[tuple[str, Any]]
) -> Iterable[tuple[PluginInfo, Callable[[], Any]]]:
    """Every plugin we know of, in load order, with how to import it (not yet imported).

    The built-ins are entry points of the frontdesk distribution itself, found like any other
    plugin; they load first, and the allow-list (which is for installed plugins) spares them."""

    # Sorting makes "first one wins" independent of sys.path and install order.
    def key(ep: Any) -> tuple[bool, str, str, str]:
        return (_dist_name(ep) != "frontdesk", ep.name, _dist_name(ep) or "", ep.value)

    for ep in sorted(entry_points(group="frontdesk"), key=key):
        dist = _dist_name(ep)
        builtin = dist == "frontdesk"
        info = PluginInfo(
            name=ep.name, source="builtin" if builtin else "entry point", version=_version(dist)
        )
        info.distribution = dist
        if ep.name in deny:
            info.skipped = "disabled by FRONTDESK_DISABLE_PLUGINS"
        elif not builtin and allow is not None and ep.name not in allow:
            info.skipped = "not in FRONTDESK_LOAD_PLUGINS"
        yield info, ep.load

    for name, obj in extra:
        info = PluginInfo(name=name, source="extra")
        if name in deny:
            info.skipped = "disabled by FRONTDESK_DISABLE_PLUGINS"
        yield info, lambda obj=obj: obj


def _add_own_hookspecs(registry: Registry, info: PluginInfo) -> None:
    # A plugin may bring hookspecs of its own (billing's payment gateway does), the way
    # pytest_addhooks works: a module attribute naming a class or module of specs.
    try:
        if (own := getattr(info.module, "frontdesk_hookspecs", None)) is not None:
            registry.pm.add_hookspecs(own)
    except Exception as exc:
        info.errors.append(f"invalid frontdesk_hookspecs: {exc}")
        info.module = None


def _register(registry: Registry, info: PluginInfo) -> None:
    if info.module is None:
        return
    try:
        # pluggy validates every hookimpl before changing state, so a failure here leaves
        # nothing half-registered.
        registry.pm.register(info.module, name=info.name)
    except Exception as exc:
        info.errors.append(f"invalid hooks: {exc}")
        info.module = None
        return
    info.hooks = sorted(h.name for h in registry.pm.get_hookcallers(info.module) or [])


def _report_unknown_hooks(registry: Registry) -> None:
    # A misspelt hook (register_tool) would otherwise do nothing, silently. Checked after every
    # plugin is in, because a later plugin may add the spec.
    for info in registry.plugins.values():
        if info.module is None:
            continue
        for caller in registry.pm.get_hookcallers(info.module) or []:
            if caller.has_spec():
                continue
            mine = [i for i in caller.get_hookimpls() if i.plugin_name == info.name]
            if any(not i.optionalhook for i in mine):
                info.errors.append(f"implements unknown hook {caller.name!r}")


def _impls(registry: Registry, hook: str) -> list[Any]:
    # pluggy calls the last registered first; we want load order for "first one wins".
    order = list(registry.plugins)
    caller = getattr(registry.pm.hook, hook, None)
    impls = caller.get_hookimpls() if caller is not None else []
    return sorted(impls, key=lambda i: order.index(i.plugin_name) if i.plugin_name in order else 0)


def _collect(registry: Registry) -> None:
    for impl in _impls(registry, "register_departments"):
        info = registry.plugins[impl.plugin_name]
        staged: list[Any] = []
        if _run_hook(
            registry,
            info,
            impl,
            "register_departments",
            register=lambda dept, _s=staged: _s.append(dept),
        ):
            for dept in staged:
                _guarded(info, _add_department, registry, info, dept)

    # Tools join departments after every plugin has registered its departments.
    for impl in _impls(registry, "register_tools"):
        info = registry.plugins[impl.plugin_name]
        staged_tools: list[tuple[Any, Any]] = []

        def add_tool(spec: Any, departments: Any = (ALL,), _s: list[Any] = staged_tools) -> None:
            _s.append((spec, departments))

        if _run_hook(registry, info, impl, "register_tools", register=add_tool):
            for spec, departments in staged_tools:
                _guarded(info, _add_joined_tool, registry, info, spec, departments)


def _guarded(info: PluginInfo, fn: Callable[..., None], *args: Any) -> None:
    # Garbage in a registration (a name that is an int, tools=None...) is that plugin's error.
    try:
        fn(*args)
    except Exception as exc:
        info.errors.append(f"registered something invalid: {exc!r}")


def _add_department(registry: Registry, info: PluginInfo, dept: Any) -> None:
    if not isinstance(dept, Department):
        info.errors.append(f"registered {dept!r}, which is not a Department")
        return
    entries = list(dept.tools or [])
    for t in entries:
        if not isinstance(t, ToolSpec):
            info.errors.append(
                f"department {dept.name!r} lists {t!r}, which is not a @tool; left out"
            )
    dept.tools = [t for t in entries if isinstance(t, ToolSpec)]
    if problems := dept.problems():
        info.errors.extend(f"{p}; department left out" for p in problems)
        return
    if dept.name == TRIAGE or dept.name in registry.departments:
        winner = "frontdesk" if dept.name == TRIAGE else registry.departments[dept.name].plugin
        info.errors.append(
            f"department {dept.name!r} is already registered by {winner!r}, which wins"
        )
        registry.conflicts.append(
            {"kind": "department", "name": dept.name, "winner": str(winner), "loser": info.name}
        )
        return
    dept.plugin = info.name
    registry.departments[dept.name] = dept
    # Invalid or conflicting tools are dropped one by one; the desk itself still opens.
    dept.tools = [spec for spec in dept.tools if _add_tool(registry, info, spec, [dept.name])]


def _add_joined_tool(registry: Registry, info: PluginInfo, spec: Any, departments: Any) -> None:
    if not isinstance(spec, ToolSpec):
        info.errors.append(f"registered {spec!r}, which is not a @tool")
        return
    wanted = [departments] if isinstance(departments, str) else list(departments)
    known = {ALL, TRIAGE, *registry.departments}
    found = [d for d in wanted if d in known]
    if unknown := [d for d in wanted if d not in known]:
        where = ", ".join(map(repr, unknown))
        outcome = "not offered there" if found else "tool left out"
        info.errors.append(f"tool {spec.name!r}: department {where} is not registered; {outcome}")
    elif not found:
        info.errors.append(f"tool {spec.name!r} was registered for no department; left out")
    if not found:
        return
    _add_tool(registry, info, spec, found)


def _add_tool(registry: Registry, info: PluginInfo, spec: ToolSpec, departments: list[str]) -> bool:
    """Offer ``spec`` in ``departments``; False (with the reason reported) when it is left out."""
    try:  # a hand-built ToolSpec (name=None, say) must not take its department down with it
        problems = spec.problems()
        if spec.name.startswith(RESERVED_PREFIX):
            problems.append(
                f"tool name {spec.name!r} is reserved for handoffs ({RESERVED_PREFIX}*)"
            )
    except Exception as exc:
        problems = [f"tool {spec!r} cannot be checked: {exc!r}"]
    if problems:
        info.errors.extend(f"{p}; tool left out" for p in problems)
        return False
    existing = registry.tools.get(spec.name)
    if existing is not None and existing is not spec:
        info.errors.append(
            f"tool {spec.name!r} conflicts with the one from plugin {existing.plugin!r}, "
            "which was loaded first and wins"
        )
        registry.conflicts.append(
            {"kind": "tool", "name": spec.name, "winner": str(existing.plugin), "loser": info.name}
        )
        log.warning("tool %r: plugin %s loses to %s", spec.name, info.name, existing.plugin)
        return False
    if existing is None:
        spec.plugin = info.name
        registry.tools[spec.name] = spec
    registry.tool_departments.setdefault(spec.name, set()).update(departments)
    return True


def _run_hook(registry: Registry, info: PluginInfo, impl: Any, hook: str, **kwargs: Any) -> bool:
    """Call one plugin's hook under the timeout; False (reported) if it raised, hung or
    returned something. Hooks only call ``register``, so a return value means a mistake such as
    ``return [Department(...)]`` and we refuse to guess."""
    # Registrations are staged, so a failed hook's are dropped (commands go straight in).
    dropped = "" if hook == "register_commands" else "; what it registered was left out"
    try:
        result = call_with_timeout(
            impl.function, registry.hook_timeout, **call_kwargs(impl, kwargs)
        )
    except HookTimeout as exc:
        info.errors.append(f"{hook} {exc}{dropped}")
        return False
    except Exception as exc:
        info.errors.append(f"{hook} raised {exc!r}{dropped}")
        return False
    if result is not None:
        shown = repr(result) if len(repr(result)) <= 120 else repr(result)[:117] + "..."
        info.errors.append(f"{hook} returned {shown}; hooks return None{dropped}")
        return False
    return True


def _dist_name(ep: Any) -> str | None:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) if dist is not None else None


def _version(dist_name: str | None) -> str | None:
    if not dist_name:
        return None
    try:
        from importlib.metadata import version

        return version(dist_name)
    except Exception:
        return None


def department_names(registry: Registry) -> list[str]:
    return [TRIAGE, *registry.departments]
