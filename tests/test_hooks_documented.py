"""Following datasette: every hook is documented, described and tested, or this fails.

A hook is a function marked with ``@hookspec`` in frontdesk/core/hookspecs.py. Each must have
a docstring (its contract), a heading of its own in docs/plugins.md, and a test that
mentions it somewhere in tests/ other than this file.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from frontdesk.core import hookspecs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "plugins.md"


def hook_names() -> list[str]:
    return sorted(
        name
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "frontdesk_spec")
    )


def test_the_four_hooks_of_the_plugin_api_exist():
    assert hook_names() == [
        "on_task_event",
        "register_commands",
        "register_departments",
        "register_tools",
    ]


@pytest.mark.parametrize("hook", hook_names())
def test_hook_has_a_docstring(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert len(doc.split()) >= 10, f"hook {hook} needs a docstring saying when, with what, returns"


@pytest.mark.parametrize("hook", hook_names())
def test_hook_is_documented(hook):
    headings = re.findall(r"^#{2,4}\s+`?(\w+)`?", DOCS.read_text(encoding="utf-8"), re.M)
    assert hook in headings, f"docs/plugins.md needs a '### {hook}' section"


@pytest.mark.parametrize("hook", hook_names())
def test_hook_has_a_test(hook):
    this = Path(__file__).resolve()
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.resolve() != this]
    assert any(re.search(rf"\b{hook}\b", p.read_text(encoding="utf-8")) for p in tests), (
        f"no test mentions hook {hook}"
    )
