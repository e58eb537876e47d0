"""The plugin host: discovery, allow/deny lists, first-wins conflicts and isolation.

Fake plugins are small classes with ``@hookimpl`` methods passed as ``extra``; installed
plugins are simulated by patching the host's ``entry_points`` with real ``EntryPoint`` objects
whose modules live in ``sys.modules``. Installing a real package is in test_plugins_external.
"""

from __future__ import annotations

import importlib
import sys
import types
from importlib.metadata import EntryPoint

import pytest
import typer
from typer.testing import CliRunner

from frontdesk.core import Department, ToolContext, hookimpl, hookspec, host, tool
from frontdesk.core.settings import Settings


def settings(**overrides) -> Settings:
    """No built-ins and no installed plugins unless a test asks: only the fakes load."""
    values = {
        "load_plugins": "",
        "disable_plugins": ",".join(host.builtin_names()),
        "hook_timeout_seconds": 0.3,
    }
    return Settings(_env_file=None, **{**values, **overrides})


@tool
async def lookup(ctx: ToolContext, q: str) -> str:
    """Look something up."""
    return q


def make_lookup() -> object:
    """A second, different tool also named ``lookup``."""

    @tool(name="lookup")
    async def other(ctx: ToolContext, q: str) -> str:
        """Look something up, differently."""
        return q.upper()

    return other


class Good:
    """A well-behaved plugin: one department, one tool, one tool joined to every desk."""

    @hookimpl
    def register_departments(self, register):
        register(Department(name="good", description="good things", tools=[lookup]))

    @hookimpl
    def register_tools(self, register):
        register(everywhere, departments="*")


@tool(pattern="critical")
async def everywhere(ctx: ToolContext) -> str:
    """Available at every desk."""
    return "ok"


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, **modules: object) -> None:
    """Pretend these modules are installed as entry points named after the keyword."""
    eps = []
    for name, module in modules.items():
        modname = f"fd_fake_{name}"
        if module is not None:
            monkeypatch.setitem(sys.modules, modname, module)
        eps.append(EntryPoint(name=name, value=modname, group="frontdesk"))
    monkeypatch.setattr(host, "entry_points", lambda group: list(eps))


def module_with(plugin: object, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    for attr in dir(plugin):
        if not attr.startswith("_"):
            setattr(mod, attr, getattr(plugin, attr))
    return mod


def tool_plugin(spec: object, departments: object = "good") -> object:
    class P:
        @hookimpl
        def register_tools(self, register):
            register(spec, departments=departments)

    return P()


# -- built-ins ---------------------------------------------------------------------------


def test_builtins_load_through_the_same_manager():
    registry = host.load(Settings(_env_file=None, load_plugins="", disable_plugins=""))
    for name in host.builtin_names():
        info = registry.plugins[name]
        assert info.source == "builtin"
        assert info.status == "loaded", info.errors
        # Registered in the one plugin manager, by module, under its module name.
        assert registry.pm.get_plugin(name) is importlib.import_module(f"frontdesk.plugins.{name}")
    assert registry.errors == []


def test_builtin_registry_contents():
    registry = host.load(Settings(_env_file=None, load_plugins="", disable_plugins=""))
    assert {"search", "billing", "reports"} <= set(registry.departments)
    for dept in registry.departments.values():
        assert dept.description and dept.plugin in host.builtin_names()
    for name, spec in registry.tools.items():
        assert spec.plugin in host.builtin_names() and registry.tool_departments[name]
    # The task-status tools are offered at every desk, triage included.
    for dept in host.department_names(registry):
        assert "task_status" in [t.name for t in registry.tools_for(dept)]


# -- allow-list and deny-list ------------------------------------------------------------


def test_allow_list_loads_only_named_external_plugins(monkeypatch):
    fake_entry_points(monkeypatch, alpha=module_with(Good(), "alpha"), beta=types.ModuleType("b"))
    monkeypatch.setenv("FRONTDESK_LOAD_PLUGINS", "alpha")
    monkeypatch.delenv("FRONTDESK_DISABLE_PLUGINS", raising=False)
    registry = host.load(Settings(_env_file=None))
    assert registry.plugins["alpha"].source == "entry point"
    assert "good" in registry.departments
    assert "beta" not in registry.plugins
    assert [(s.name, s.skipped) for s in registry.skipped] == [
        ("beta", "not in FRONTDESK_LOAD_PLUGINS")
    ]
    # The allow-list is for installed plugins; built-ins still load.
    assert set(host.builtin_names()) <= set(registry.plugins)


def test_allow_list_set_but_empty_loads_no_external_plugins(monkeypatch):
    fake_entry_points(monkeypatch, alpha=module_with(Good(), "alpha"))
    monkeypatch.setenv("FRONTDESK_LOAD_PLUGINS", "")
    registry = host.load(Settings(_env_file=None))
    assert "alpha" not in registry.plugins and "good" not in registry.departments
    monkeypatch.delenv("FRONTDESK_LOAD_PLUGINS")
    assert "alpha" in host.load(Settings(_env_file=None)).plugins  # unset = all


def test_deny_list_applies_to_builtins_and_external_plugins(monkeypatch):
    fake_entry_points(monkeypatch, alpha=module_with(Good(), "alpha"), beta=types.ModuleType("b"))
    monkeypatch.delenv("FRONTDESK_LOAD_PLUGINS", raising=False)
    monkeypatch.setenv("FRONTDESK_DISABLE_PLUGINS", "billing, beta")
    registry = host.load(Settings(_env_file=None))
    assert "billing" not in registry.plugins and "billing" not in registry.departments
    assert registry.pm.get_plugin("billing") is None
    assert "beta" not in registry.plugins and "alpha" in registry.plugins
    assert {s.name: s.skipped for s in registry.skipped} == {
        "billing": "disabled by FRONTDESK_DISABLE_PLUGINS",
        "beta": "disabled by FRONTDESK_DISABLE_PLUGINS",
    }
    assert "search" in registry.departments


def test_deny_list_applies_to_extra_plugins():
    registry = host.load(settings(disable_plugins="good"), extra=[("good", Good())])
    assert "good" not in registry.plugins and registry.skipped[-1].name == "good"


def test_tool_for_an_unknown_department_is_reported():
    registry = host.load(
        settings(), extra=[("good", Good()), ("p", tool_plugin(make_lookup(), ["nowhere"]))]
    )
    errors = registry.plugins["p"].errors
    assert errors == ["tool 'lookup': department 'nowhere' is not registered; tool left out"]
    assert registry.tools["lookup"].plugin == "good"


def test_tool_joins_several_departments_and_star_means_all():
    @tool
    async def shared(ctx: ToolContext) -> str:
        """Shared."""
        return "x"

    class Other:
        @hookimpl
        def register_departments(self, register):
            register(Department(name="other", description="another desk"))

    registry = host.load(
        settings(),
        extra=[("good", Good()), ("other", Other()), ("p", tool_plugin(shared, ["good", "other"]))],
    )
    assert registry.tool_departments["shared"] == {"good", "other"}
    assert "shared" not in [t.name for t in registry.tools_for("triage")]
    for dept in ("triage", "good", "other"):
        assert "everywhere" in [t.name for t in registry.tools_for(dept)]


# -- conflicts: the first one wins, deterministically ----------------------------------------


def test_same_tool_name_first_plugin_wins_and_conflict_is_reported():
    second = make_lookup()
    registry = host.load(settings(), extra=[("good", Good()), ("late", tool_plugin(second))])
    assert registry.tools["lookup"] is lookup and lookup.plugin == "good"
    assert registry.plugins["late"].errors == [
        "tool 'lookup' conflicts with the one from plugin 'good', which was loaded first and wins"
    ]
    assert registry.conflicts == [
        {"kind": "tool", "name": "lookup", "winner": "good", "loser": "late"}
    ]


def test_entry_points_load_in_name_order_whatever_the_discovery_order(monkeypatch):
    zeta = module_with(tool_plugin(make_lookup()), "zeta")
    alpha = module_with(Good(), "alpha")
    fake_entry_points(monkeypatch, zeta=zeta, alpha=alpha)  # discovered zeta first
    registry = host.load(settings(load_plugins=None))
    assert list(registry.plugins) == ["alpha", "zeta"]
    assert registry.tools["lookup"].plugin == "alpha"
    assert registry.conflicts[0]["winner"] == "alpha"


def test_same_department_name_first_plugin_wins():
    class Again:
        @hookimpl
        def register_departments(self, register):
            register(Department(name="good", description="an impostor"))

    registry = host.load(settings(), extra=[("good", Good()), ("again", Again())])
    assert registry.departments["good"].description == "good things"
    assert "already registered by 'good'" in registry.plugins["again"].errors[0]


def test_entry_point_cannot_take_a_builtin_name(monkeypatch):
    fake_entry_points(monkeypatch, billing=module_with(Good(), "impostor"))
    registry = host.load(Settings(_env_file=None, load_plugins=None, disable_plugins=""))
    assert registry.plugins["billing"].source == "builtin"
    assert "good" not in registry.departments
    skipped = registry.skipped[0]
    assert skipped.source == "entry point" and "name already taken" in skipped.errors[0]


# -- register_commands and plugin-defined hookspecs ---------------------------------------


def test_register_commands_is_isolated_and_commands_are_recorded():
    class Commands:
        @hookimpl
        def register_commands(self, cli):
            @cli.command("hello")
            def hello(name: str) -> None:
                typer.echo(f"hello {name}")

    class BadCommands:
        @hookimpl
        def register_commands(self, cli):
            raise ValueError("no commands today")

    registry = host.load(settings(), extra=[("bad", BadCommands()), ("cmds", Commands())])
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        pass

    registry.add_commands(app)
    assert registry.plugins["cmds"].commands == ["hello"]
    assert "register_commands raised ValueError" in registry.plugins["bad"].errors[0]
    result = CliRunner().invoke(app, ["hello", "wendy"])
    assert result.exit_code == 0 and result.output == "hello wendy\n"


def test_plugin_commands_never_replace_taken_names_and_a_failing_hook_adds_nothing():
    class Squatter:
        @hookimpl
        def register_commands(self, cli):
            @cli.command("tasks")
            def tasks() -> None:
                typer.echo("hijacked")

            @cli.command("fresh")
            def fresh() -> None:
                typer.echo("fresh")

    class HalfDone:
        @hookimpl
        def register_commands(self, cli):
            @cli.command("half")
            def half() -> None:
                typer.echo("half")

            raise RuntimeError("then it broke")

    registry = host.load(settings(), extra=[("squat", Squatter()), ("half", HalfDone())])
    app = typer.Typer()
    tasks_app = typer.Typer()

    @tasks_app.command("list")
    def list_() -> None:
        typer.echo("core tasks")

    app.add_typer(tasks_app, name="tasks")
    registry.add_commands(app)
    assert registry.plugins["squat"].commands == ["fresh"]
    assert "command 'tasks' is already taken" in " ".join(registry.plugins["squat"].errors)
    assert {
        "kind": "command",
        "name": "tasks",
        "winner": "earlier",
        "loser": "squat",
    } in registry.conflicts
    assert registry.plugins["half"].commands == []  # the half-registered command was not kept
    runner = CliRunner()
    assert runner.invoke(app, ["tasks", "list"]).output == "core tasks\n"
    assert runner.invoke(app, ["fresh"]).output == "fresh\n"
    assert runner.invoke(app, ["half"]).exit_code != 0


def test_a_plugin_may_add_hookspecs_for_other_plugins():
    class Specs:
        @hookspec(firstresult=True)
        def payment_gateway(self, settings):
            """Return the payment gateway to use."""

    owner = types.SimpleNamespace(frontdesk_hookspecs=Specs)

    class Gateway:
        @hookimpl
        def payment_gateway(self, settings):
            return f"gateway for {settings}"

    class WrongGateway:
        @hookimpl
        def payment_gateway(self, settings, currency):
            return "never asked"

    class Optional:
        @hookimpl(optionalhook=True)
        def payment_gateway_for_a_plugin_not_installed(self):
            return "fine"

    # The implementers load before the plugin that declares the spec; still checked against it.
    registry = host.load(
        settings(),
        extra=[("gw", Gateway()), ("wrong", WrongGateway()), ("owner", owner), ("opt", Optional())],
    )
    assert registry.pm.hook.payment_gateway(settings="s") == "gateway for s"
    assert registry.plugins["owner"].errors == [] and registry.plugins["opt"].errors == []
    [error] = registry.plugins["wrong"].errors
    assert error.startswith("invalid hooks:") and "currency" in error


def test_plugins_json_lists_tools_per_department():
    registry = host.load(settings(), extra=[("good", Good())])
    data = registry.plugins["good"].to_json(registry)
    assert data["tools"] == {"good": ["lookup"], "*": ["everywhere"]}
    assert data["departments"] == ["good"]
    assert data["hooks"] == ["register_departments", "register_tools"]
    assert data["status"] == "loaded" and data["source"] == "extra"


def test_tool_for_known_and_unknown_departments_joins_the_known_one():
    @tool
    async def extra_tool(ctx: ToolContext) -> str:
        """An extra tool."""
        return "x"

    registry = host.load(
        settings(), extra=[("good", Good()), ("p", tool_plugin(extra_tool, ["good", "gone"]))]
    )
    assert registry.plugins["p"].errors == [
        "tool 'extra_tool': department 'gone' is not registered; not offered there"
    ]
    assert registry.tool_departments["extra_tool"] == {"good"}
