"""The registry: everything the plugins registered, with what went wrong along the way.

``frontdesk.core.host`` builds it; the call side, the runner and the programs read it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pluggy

from frontdesk.core.department import Department
from frontdesk.core.errors import ConfigError
from frontdesk.core.observers import HookTimeout, Observers, call_kwargs, call_with_timeout
from frontdesk.core.profile import Profile
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
    # Why it was withdrawn after loading: its desk and tools are gone (a migration that fails,
    # a migrations folder that is missing). Also one of ``errors``.
    failure: str | None = None

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        return "failed" if self.module is None or self.failure else "loaded"

    @property
    def builtin(self) -> bool:
        return self.source == "builtin"

    def to_json(self, registry: Registry) -> dict[str, Any]:
        tools: dict[str, list[str]] = {}  # department (or "*") -> this plugin's tools there
        mine = self.status == "loaded"  # a skipped plugin of a taken name owns nothing
        for name, spec in registry.tools.items():
            if mine and spec.plugin == self.name:
                for dept in sorted(registry.tool_departments.get(name, ())):
                    tools.setdefault(dept, []).append(name)
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "distribution": self.distribution,
            "status": self.status,
            "failure": self.failure,
            "skipped": self.skipped,
            "hooks": self.hooks,
            "departments": sorted(
                d.name for d in registry.departments.values() if mine and d.plugin == self.name
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
    # What is wrong with the profile's [departments.*] tables, one line each: a desk whose
    # plugin failed or is skipped is a warning (``profile_warnings``); a desk nobody could
    # have registered (a typo) stops the commands that run calls (``profile_errors``).
    profile_warnings: list[str] = field(default_factory=list)
    profile_errors: list[str] = field(default_factory=list)
    _observers: Observers | None = field(default=None, repr=False)

    def require_valid_config(self) -> None:
        """Raise ``ConfigError`` with the first bad profile desk or plugin setting; commands
        that run calls call this before they start, so it is one line and exit code 2."""
        if self.profile_errors:
            raise ConfigError(self.profile_errors[0])
        if self.config_errors:
            raise ConfigError(self.config_errors[0])

    def fail(self, plugin: str, reason: str) -> None:
        """Withdraw a loaded plugin: its desks, its tools (wherever they were offered) and its
        migrations leave the registry, and ``plugins list`` and doctor show it failed with
        ``reason``. Every other plugin stays."""
        info = self.plugins.get(plugin)
        if info is None or info.failure is not None:
            return
        info.failure = reason
        info.errors.append(reason)
        gone = {name for name, dept in self.departments.items() if dept.plugin == plugin}
        for name in gone:
            self.departments.pop(name)
        for name in [t for t, spec in self.tools.items() if spec.plugin == plugin]:
            self.tools.pop(name)
            self.tool_departments.pop(name, None)
        for where in self.tool_departments.values():
            where.difference_update(gone)
        self.migrations.pop(plugin, None)
        log.warning("plugin %s withdrawn: %s", plugin, reason)

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


def _impls(registry: Registry, hook: str) -> list[Any]:
    # pluggy calls the last registered first; we want load order for "first one wins".
    order = list(registry.plugins)
    caller = getattr(registry.pm.hook, hook, None)
    impls = caller.get_hookimpls() if caller is not None else []
    return sorted(impls, key=lambda i: order.index(i.plugin_name) if i.plugin_name in order else 0)


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
