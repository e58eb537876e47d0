"""``frontdesk plugins new NAME``: write an installable plugin package from the template in
``plugin_template/`` (as datasette's and llm's cookiecutter templates do, without the tool).

Template files end in ``.tmpl``; ``{{name}}`` (the plugin's name), ``{{module}}`` (its import
name), ``{{dist}}`` (its distribution), ``{{klass}}`` (a class-name prefix) and ``{{env}}``
(its settings' variable prefix, upper-case) are replaced in paths and text.
"""

from __future__ import annotations

import re
from pathlib import Path

from frontdesk.core.errors import FrontdeskError

TEMPLATE = Path(__file__).parent / "plugin_template"
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
TAKEN = {"triage", "frontdesk", "core", "testing"}


def words(name: str) -> dict[str, str]:
    return {
        "name": name,
        "module": f"frontdesk_{name}",
        "dist": f"frontdesk-{name.replace('_', '-')}",
        "klass": "".join(part.capitalize() for part in name.split("_")),
        "env": name.upper(),
    }


def check_name(name: str, builtins: list[str]) -> None:
    """A plugin name is its desk's name too, so the same rule: lowercase letters, digits, _."""
    if not NAME.fullmatch(name):
        raise FrontdeskError(
            f"{name!r} is not a plugin name: start with a lowercase letter, then lowercase "
            "letters, digits or _ (it is also the desk's name and the tools' prefix)"
        )
    if name in TAKEN or name in builtins:
        raise FrontdeskError(f"{name!r} is taken by frontdesk itself; choose another name")


def render(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def scaffold(name: str, into: Path, builtins: list[str]) -> Path:
    """Write the package for plugin ``name`` into ``into/frontdesk-<name>``; its path."""
    check_name(name, builtins)
    values = words(name)
    root = into / values["dist"]
    if root.exists() and any(root.iterdir()):
        raise FrontdeskError(f"{root} already exists and is not empty; choose another --dir")
    files = sorted(p for p in TEMPLATE.rglob("*.tmpl") if p.is_file())
    if not files:
        raise FrontdeskError(f"the plugin template is missing from {TEMPLATE}")
    written = []
    try:
        for source in files:
            relative = render(str(source.relative_to(TEMPLATE)), values).removesuffix(".tmpl")
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render(source.read_text(encoding="utf-8"), values), encoding="utf-8")
            written.append(target)
    except OSError as exc:
        for path in written:  # nothing half-written stays
            path.unlink(missing_ok=True)
        raise FrontdeskError(f"cannot write {root}: {exc.strerror or exc}") from None
    return root
