"""Following datasette: every hook in the plugin manager is documented and tested, or this fails.

"Every hook" is what the plugin manager holds once the built-ins and the example plugin are
loaded: core's hookspecs (frontdesk/core/hookspecs.py) and the ones plugins add (billing's
payment gateway, ...). Each must have a docstring (its contract), a heading in docs/plugins.md
that shows its signature, ``### name(arg, ...)``, and a test named ``test_hook_<name>``.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

from frontdesk.core import host

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "plugins.md"
sys.path.insert(0, str(ROOT / "examples" / "frontdesk-weather"))

CORE_HOOKS = {
    "on_task_event",
    "register_commands",
    "register_departments",
    "register_migrations",
    "register_settings",
    "register_tools",
}


def _specs() -> dict[str, tuple[list[str], str]]:
    import frontdesk_weather

    registry = host.load(extra=[("weather", frontdesk_weather)])
    found = {}
    for name in dir(registry.pm.hook):
        caller = getattr(registry.pm.hook, name)
        spec = getattr(caller, "spec", None)
        if spec is None:
            continue
        params = [p for p in inspect.signature(spec.function).parameters if p != "self"]
        found[name] = (params, inspect.getdoc(spec.function) or "")
    return found


SPECS = _specs()


def test_every_core_hook_and_plugin_added_hooks_are_found():
    assert CORE_HOOKS <= set(SPECS)
    assert set(SPECS) - CORE_HOOKS, "billing adds hooks of its own; none were found"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_hook_has_a_docstring(hook):
    doc = SPECS[hook][1]
    assert len(doc.split()) >= 10, f"hook {hook} needs a docstring: when, with what, returns"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_hook_is_documented_with_its_signature(hook):
    wanted = f"{hook}({', '.join(SPECS[hook][0])})"
    headings = re.findall(r"^#{2,4}\s+`?([\w]+\([^)]*\))`?", DOCS.read_text(encoding="utf-8"), re.M)
    assert wanted in headings, f"docs/plugins.md needs a '### {wanted}' section"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_hook_has_a_test(hook):
    this = Path(__file__).resolve()
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.resolve() != this]
    pattern = re.compile(rf"^(?:async )?def test_hook_{hook}\b", re.M)
    assert any(pattern.search(p.read_text(encoding="utf-8")) for p in tests), (
        f"no test named test_hook_{hook}"
    )
