"""``Frontdesk``: a temporary frontdesk for a plugin's tests (see ``frontdesk.testing``)."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontdesk.core import Database, ToolContext
from frontdesk.core.execution import execute, failure
from frontdesk.core.host import Registry, load
from frontdesk.core.profile import Profile, load_profile
from frontdesk.core.recording import stored_error, to_jsonable
from frontdesk.core.settings import Settings
from frontdesk.db.store import Task, TaskStore

# Quick enough for tests (a job's follow-up within a second), still the production code paths.
FAST = {
    "job_lease_seconds": 3.0,
    "runner_poll_seconds": 0.05,
    "followup_poll_seconds": 0.05,
    "ack_after_seconds": 0.5,
    "fire_and_forget_grace_seconds": 2.0,
}


@dataclass
class Simulation:
    """What ``Frontdesk.simulate`` saw: the failures (empty when every ``expect`` held) and the
    call's events, as ``frontdesk simulate --json`` prints them."""

    failures: list[str]
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def said(self) -> list[str]:
        """What the agents said, in order."""
        return [e["text"] for e in self.events if e["type"] == "agent"]


class Frontdesk:
    """A temporary frontdesk: a fresh store and the plugins you name, loaded as in production.

    ``plugins`` maps a plugin name to its module (or any object with ``@hookimpl`` functions),
    loaded through the same checks as an installed plugin; ``installed`` names installed
    plugins (entry points) to load. Nothing else installed is loaded, so another package in
    the environment never changes your test. The built-in desks load unless ``builtins`` is
    False. ``profile`` is a ``frontdesk.toml`` path or the same as a dict, e.g.
    ``{"plugins": {"weather": {"units": "imperial"}}}`` for your plugin's settings.
    ``settings`` override frontdesk's own (``Settings`` fields). Use it as
    ``async with Frontdesk(...) as desk:``.
    """

    def __init__(
        self,
        *,
        plugins: Mapping[str, Any] | None = None,
        installed: Iterable[str] = (),
        builtins: bool = True,
        profile: str | Path | Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        self._plugins = dict(plugins or {})
        self._installed = list(installed)
        self._builtins = builtins
        self._profile = profile
        self._overrides = settings
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._store: TaskStore | None = None
        self.settings: Settings | None = None
        self.registry: Registry | None = None

    async def __aenter__(self) -> Frontdesk:
        from frontdesk.core.host import builtin_names
        from frontdesk.core.schema import open_store

        self._tmp = tempfile.TemporaryDirectory(prefix="frontdesk-test-")
        values: dict[str, Any] = {
            **FAST,
            "database_url": f"sqlite+aiosqlite:///{self._tmp.name}/frontdesk.db",
            "load_plugins": ",".join(self._installed),
            "disable_plugins": "" if self._builtins else ",".join(builtin_names()),
            **self._overrides,
        }
        self.settings = Settings(_env_file=None, **values)
        self.registry = load(
            self.settings, extra=self._plugins.items(), profile=_profile(self._profile)
        )
        try:
            self._store = await open_store(self.settings.database_url, self.registry)
        except BaseException:
            self._tmp.cleanup()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.registry is not None:
            await self.registry.drain(2.0)
        if self._store is not None:
            await self._store.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    # -- what loaded ----------------------------------------------------------------------

    @property
    def errors(self) -> list[str]:
        """Every problem with the plugins, the profile or their settings, one line each
        (``plugin: what``); empty when everything loaded cleanly."""
        registry = self._registry()
        return [*registry.profile_errors, *registry.profile_warnings, *registry.errors]

    @property
    def plugins(self) -> dict[str, dict[str, Any]]:
        """Each plugin as ``frontdesk plugins list --json`` shows it (status, tools, errors)."""
        registry = self._registry()
        # A loaded plugin wins over a skipped one of the same name (the installed copy of the
        # module a test loads itself is skipped: it is not one the test named).
        every = [*registry.skipped, *registry.plugins.values()]
        return {p.name: p.to_json(registry) for p in every}

    @property
    def departments(self) -> list[str]:
        from frontdesk.core.host import department_names

        return department_names(self._registry())

    def tools(self, department: str) -> list[str]:
        """The tools offered at ``department``, in order."""
        return [spec.name for spec in self._registry().tools_for(department)]

    def config(self, plugin: str) -> Any:
        """A plugin's settings, as its tools get them in ``ctx.config`` (None if it has none)."""
        return self._registry().configs.get(plugin)

    # -- the store --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The temporary database's URL."""
        assert self.settings is not None, "use it as `async with Frontdesk(...) as desk`"
        return self.settings.database_url

    @property
    def database(self) -> Database:
        """SQL on the temporary database, as tools get it in ``ctx.database``: read your
        plugin's tables with ``async with desk.database.read() as conn``."""
        return Database(self._open_store())

    async def tasks(
        self, *, caller: str | None = None, tool: str | None = None, status: str | None = None
    ) -> list[Task]:
        """Task rows, newest first."""
        return await self._open_store().list(caller=caller, tool=tool, status=status, limit=None)

    # -- running things ----------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        caller: str = "caller",
        department: str | None = None,
        session_id: str | None = None,
    ) -> Any:
        """Run one tool as its pattern's work runs: ``args`` validated (as JSON from an LLM
        would be) and typed, ``precheck`` asked, a real ``ToolContext`` with the plugin's
        settings, and a task row that ends ``succeeded`` or ``failed``. Returns what the tool
        returned; a ``ToolError`` (from validation, precheck or the tool) is raised as is, and
        so is any other exception, after the row records it."""
        registry, store = self._registry(), self._open_store()
        spec = registry.tools.get(tool)
        if spec is None:
            raise LookupError(
                f"no tool named {tool!r} is loaded; loaded: {', '.join(registry.tools)}"
            )
        config = registry.configs.get(spec.plugin or "")
        typed = spec.validate(dict(args or {}), config)
        stored = spec.to_json(typed)
        row = await store.create(
            caller=caller,
            tool=spec.name,
            pattern=spec.pattern,
            session_id=session_id,
            department=department,
            plugin=spec.plugin,
            status="running",
            args=stored if spec.pattern == "background" else spec.redact(stored),
        )
        ctx = ToolContext(
            caller=caller,
            session_id=session_id,
            task_id=row.id,
            department=department,
            idempotency_key=f"test-{row.id}",
            store=store,
            hook=registry.pm.hook,
            config=config,
        )
        try:
            result = await execute(spec, ctx, typed)
        except asyncio.CancelledError:
            await store.transition(row.id, "cancelled", error="cancelled", note="cancelled")
            raise
        except Exception as exc:
            error, _ = failure(exc, spec)
            await store.transition(row.id, "failed", error=stored_error(error), note=error)
            raise
        await store.transition(row.id, "succeeded", result=to_jsonable(result))
        return result

    async def simulate(
        self, scenario: str | Path | Mapping[str, Any], *, strict: bool = False
    ) -> Simulation:
        """Run a scenario (a file, or its YAML as a dict) in-process on real sessions, with the
        background runner, as ``frontdesk simulate`` does (docs/scenarios.md)."""
        from frontdesk.agents.programs.scenario import load_scenario, parse_scenario
        from frontdesk.agents.programs.simulate import simulate

        if isinstance(scenario, Mapping):
            parsed = parse_scenario(dict(scenario))
        else:
            parsed = load_scenario(scenario)
        events: list[dict[str, Any]] = []
        assert self.settings is not None
        failures = await simulate(
            [parsed], self.settings, self._registry(), events.append, strict=strict
        )
        return Simulation(failures=failures, events=events)

    # -- ------------------------------------------------------------------------------------

    def _registry(self) -> Registry:
        assert self.registry is not None, "use it as `async with Frontdesk(...) as desk`"
        return self.registry

    def _open_store(self) -> TaskStore:
        assert self._store is not None, "use it as `async with Frontdesk(...) as desk`"
        return self._store


def _profile(value: str | Path | Mapping[str, Any] | None) -> Profile:
    if value is None:
        return Profile()  # the neutral front desk, whatever frontdesk.toml is lying around
    if isinstance(value, Mapping):
        return Profile.model_validate(dict(value))
    return load_profile(value)
