"""The plugin host: one pluggy manager for built-in and third-party plugins.

Every plugin is an entry point of the ``frontdesk`` group; the frontdesk distribution's own
(``frontdesk.plugins.<name>``) load first, then the others sorted by name, then any ``extra``
plugins; that order decides every "first one wins". Hooks are called one plugin at a time, each under a timeout, so a plugin that fails
to import, raises, hangs, returns garbage or registers something invalid is reported with its
name and reason and that part is left out, while everything else loads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any

import pluggy

from frontdesk.core import hookspecs
from frontdesk.core.department import Department
from frontdesk.core.errors import ConfigError
from frontdesk.core.plugin_extras import collect_migrations, collect_settings
from frontdesk.core.profile import Profile, load_profile
from frontdesk.core.registry import (
    ALL,
    RESERVED_PREFIX,
    TRIAGE,
    PluginInfo,
    Registry,
    _impls,
    _run_hook,
)
from frontdesk.core.settings import Settings, load_settings
from frontdesk.core.tools import ToolSpec
from frontdesk.core.wording import set_noun

log = logging.getLogger("frontdesk.plugins")

__all__ = [
    "ALL",
    "TRIAGE",
    "PluginInfo",
    "Registry",
    "builtin_names",
    "department_names",
    "load",
]


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
    settings = settings or load_settings()
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
    collect_settings(registry, _impls(registry, "register_settings"))
    collect_migrations(registry, _impls(registry, "register_migrations"))
    _apply_profile(registry)
    for err in registry.errors:
        if ": settings: " not in err:  # a bad setting is the command's one error line
            log.warning("plugin %s", err)
    return registry


def _apply_profile(registry: Registry) -> None:
    """Switch off the desks the profile disables. A desk it names that is not open is either a
    plugin's that failed or is skipped (a warning naming that plugin and why), or one no plugin
    could have registered, a typo (an error the commands that run calls stop on)."""
    profile = registry.profile
    for name, desk in profile.departments.items():
        if name != TRIAGE and name not in registry.departments:
            line, fatal = _missing_desk(registry, name)
            (registry.profile_errors if fatal else registry.profile_warnings).append(line)
            if not fatal:
                log.warning("%s", line)
            continue
        if not desk.enabled:
            if name == TRIAGE:
                raise ConfigError(
                    f"{profile.key('departments', name, 'enabled')}: triage cannot be switched off"
                )
            registry.departments.pop(name)
            for where in registry.tool_departments.values():
                where.discard(name)


def _missing_desk(registry: Registry, name: str) -> tuple[str, bool]:
    """(the line that says why desk ``name`` is not open, whether it is fatal)."""
    where = registry.profile.key("departments", name)
    everyone = [*registry.plugins.values(), *registry.skipped]
    down = [p for p in everyone if p.status != "loaded"]
    own = next((p for p in down if p.name == name), None)
    if own is not None:
        return f"{where}: desk not open: plugin {name!r} {_why_down(own)}", False
    # A plugin that failed may have been this desk's; one the operator chose to skip (the
    # allow- or deny-list) is not a reason to let a misspelt desk pass.
    failed = [p for p in down if p.status == "failed"]
    if failed:
        which = "; ".join(f"{p.name!r} {_why_down(p)}" for p in failed)
        return f"{where}: desk not open; it may be a plugin's that did not load: {which}", False
    known = ", ".join([TRIAGE, *registry.departments]) or "none"
    return f"{where}: no such department (known: {known})", True


def _why_down(info: PluginInfo) -> str:
    if info.skipped:
        return f"is skipped ({info.skipped})"
    reason = info.failure or (info.errors[0] if info.errors else "failed")
    return reason if reason.startswith("failed") else f"failed: {reason}"


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
        holder = registry.plugins.get(existing.plugin or "")
        if holder is None or _rank(registry, holder) <= _rank(registry, info):
            _lose(registry, loser=info, winner=holder, name=spec.name)
            return False
        # Registered earlier only because of hook order (a desk's tools join before any
        # register_tools): the built-in, or the plugin loaded first, still wins.
        _lose(registry, loser=holder, winner=info, name=spec.name)
        _withdraw_tool(registry, existing)
        existing = None
    if existing is None:
        spec.plugin = info.name
        registry.tools[spec.name] = spec
        set_noun(spec.name, spec.noun)
    registry.tool_departments.setdefault(spec.name, set()).update(departments)
    return True


def _rank(registry: Registry, info: PluginInfo) -> tuple[bool, int]:
    """Who wins a tool name: built-ins, then load order."""
    order = list(registry.plugins)
    return (not info.builtin, order.index(info.name) if info.name in order else len(order))


def _lose(registry: Registry, *, loser: PluginInfo, winner: PluginInfo | None, name: str) -> None:
    if winner is not None and winner.builtin:
        why = f"the built-in one from plugin {winner.name!r}; built-ins always win"
    else:
        who = winner.name if winner is not None else "?"
        why = f"the one from plugin {who!r}, which was loaded first and wins"
    loser.errors.append(f"tool {name!r} conflicts with {why}")
    registry.conflicts.append(
        {
            "kind": "tool",
            "name": name,
            "winner": winner.name if winner else "?",
            "loser": loser.name,
        }
    )
    log.warning("tool %r: plugin %s loses to %s", name, loser.name, winner.name if winner else "?")


def _withdraw_tool(registry: Registry, spec: ToolSpec) -> None:
    registry.tools.pop(spec.name, None)
    registry.tool_departments.pop(spec.name, None)
    for dept in registry.departments.values():
        dept.tools = [t for t in dept.tools if t is not spec]


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


def builtin_names() -> list[str]:
    """The frontdesk distribution's own plugins: its entry points in the ``frontdesk`` group."""
    return sorted(
        ep.name for ep in entry_points(group="frontdesk") if _dist_name(ep) == "frontdesk"
    )


def department_names(registry: Registry) -> list[str]:
    return [TRIAGE, *registry.departments]
