"""Isolation: a plugin that fails to import, whose hook raises, returns garbage or hangs, or
that registers something invalid is reported with its name and reason and only that part is
left out; everything else loads. Helpers and fakes are shared with test_plugins.py."""

from __future__ import annotations

import time

import pytest
from test_plugins import (
    Good,
    everywhere,
    fake_entry_points,
    lookup,
    module_with,
    settings,
    tool_plugin,
)

from frontdesk.core import Department, ToolContext, ToolSpec, hookimpl, host, tool

# -- import failures ---------------------------------------------------------------------


def test_plugin_that_fails_to_import_is_reported_and_others_load(monkeypatch, tmp_path):
    (tmp_path / "fd_fake_exits.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # fd_fake_missing is not importable at all; fd_fake_exits calls sys.exit at import.
    fake_entry_points(monkeypatch, alpha=module_with(Good(), "alpha"), missing=None, exits=None)
    registry = host.load(settings(load_plugins=None))
    assert registry.plugins["missing"].status == "failed"
    assert "failed to import" in registry.plugins["missing"].errors[0]
    assert "SystemExit(3)" in registry.plugins["exits"].errors[0]
    assert "good" in registry.departments and registry.plugins["alpha"].errors == []


def test_invalid_hook_signature_leaves_the_whole_plugin_out():
    class Wrong:
        @hookimpl
        def register_departments(self, register):
            register(Department(name="wrong", description="never registered"))

        @hookimpl
        def register_tools(self, register, surprise):
            """``surprise`` is not in the spec, so pluggy refuses the plugin."""

    registry = host.load(settings(), extra=[("wrong", Wrong()), ("good", Good())])
    assert "invalid hooks" in registry.plugins["wrong"].errors[0]
    assert registry.pm.get_plugin("wrong") is None and "wrong" not in registry.departments
    assert "good" in registry.departments


def test_misspelt_hook_is_reported():
    class Typo:
        @hookimpl
        def register_tool(self, register):
            pass

    registry = host.load(settings(), extra=[("typo", Typo())])
    assert registry.plugins["typo"].errors == ["implements unknown hook 'register_tool'"]


# -- hooks that raise, return garbage or hang -----------------------------------------------


class Raises:
    @hookimpl
    def register_departments(self, register):
        register(Department(name="half", description="registered before the error"))
        raise RuntimeError("boom")


class ReturnsGarbage:
    @hookimpl
    def register_tools(self, register):
        return [lookup]


class Hangs:
    @hookimpl
    def register_departments(self, register):
        register(Department(name="late", description="registered before hanging"))
        time.sleep(5)


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        (Raises(), "register_departments raised RuntimeError('boom')"),
        (ReturnsGarbage(), "register_tools returned [ToolSpec("),
        (Hangs(), "register_departments did not return within 0.3s"),
    ],
)
def test_broken_hook_is_reported_and_everything_else_loads(plugin, expected):
    started = time.monotonic()
    registry = host.load(settings(), extra=[("bad", plugin), ("good", Good())])
    assert time.monotonic() - started < 2.5  # a hang costs the timeout, not the hang
    assert registry.plugins["bad"].errors[0].startswith(expected)
    # What the broken hook registered before failing is dropped with it.
    assert set(registry.departments) == {"good"}
    assert list(registry.tools) == ["lookup", "everywhere"]
    assert all(t.plugin == "good" for t in registry.tools.values())


# -- invalid registrations ----------------------------------------------------------------


@tool
async def no_doc(ctx: ToolContext) -> str:
    return "?"


@tool(pattern="eventually")
async def bad_pattern(ctx: ToolContext) -> str:
    """Has a pattern that does not exist."""
    return "?"


@tool
def not_async(ctx: ToolContext) -> str:
    """A sync function."""
    return "?"


@tool
async def transfer_to_good(ctx: ToolContext) -> str:
    """Steals a handoff name."""
    return "?"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (no_doc, "tool 'no_doc' has no docstring"),
        (bad_pattern, "tool 'bad_pattern' has unknown pattern 'eventually'"),
        (not_async, "tool 'not_async' must be an async function"),
        (transfer_to_good, "tool name 'transfer_to_good' is reserved"),
        (lambda: None, "registered <function"),
    ],
)
def test_invalid_tool_is_left_out_with_the_reason(spec, expected):
    registry = host.load(settings(), extra=[("good", Good()), ("bad", tool_plugin(spec))])
    assert registry.plugins["bad"].errors[0].startswith(expected)
    assert list(registry.tools) == ["lookup", "everywhere"]


def test_invalid_tool_in_a_department_is_left_out_but_the_desk_opens():
    class Desk:
        @hookimpl
        def register_departments(self, register):
            register(Department(name="desk", description="a desk", tools=[no_doc, print, lookup]))

    registry = host.load(settings(), extra=[("desk", Desk())])
    errors = registry.plugins["desk"].errors
    assert any("lists <built-in function print>, which is not a @tool" in e for e in errors)
    assert any("tool 'no_doc' has no docstring" in e for e in errors)
    assert [t.name for t in registry.departments["desk"].tools] == ["lookup"]
    assert [t.name for t in registry.tools_for("desk")] == ["lookup"]


@pytest.mark.parametrize(
    ("dept", "expected"),
    [
        (Department(name="quiet", description=""), "department 'quiet' has no description"),
        (Department(name="Bad Name", description="x"), "department name 'Bad Name' must be"),
        (Department(name="triage", description="x"), "department 'triage' is already registered"),
        ("weather", "registered 'weather', which is not a Department"),
        (Department(name=7, description="x"), "registered something invalid"),  # type: ignore[arg-type]
    ],
)
def test_invalid_department_is_left_out_with_the_reason(dept, expected):
    class P:
        @hookimpl
        def register_departments(self, register):
            register(dept)

    registry = host.load(settings(), extra=[("bad", P()), ("good", Good())])
    assert registry.plugins["bad"].errors[0].startswith(expected)
    assert set(registry.departments) == {"good"}


def test_a_malformed_tool_spec_does_not_take_its_department_down():
    broken = ToolSpec(fn=lookup.fn, name=None, pattern="interruptible")  # type: ignore[arg-type]

    class Desk:
        @hookimpl
        def register_departments(self, register):
            register(Department(name="desk", description="a desk", tools=[broken, everywhere]))

    registry = host.load(settings(), extra=[("desk", Desk())])
    assert "cannot be checked" in registry.plugins["desk"].errors[0]
    assert [t.name for t in registry.departments["desk"].tools] == ["everywhere"]
