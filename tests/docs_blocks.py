"""The code blocks of docs/plugins.md, read from the page (never copied into a test).

``python`` blocks run in order in one namespace, the page's module (``python signature``
blocks are a hook's signature: they run too, their annotations unevaluated); ``toml`` and
``yaml`` blocks are parsed and used; ``console`` blocks run command by command in a throwaway
virtualenv (test_plugins_authoring.py), each output line under a command being text its
output must contain.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "plugins.md"
WEATHER = ROOT / "examples" / "frontdesk-weather"
LANGUAGES = {"python", "toml", "yaml", "console"}
TAGS = {"signature"}

_FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```\s*$", re.M | re.S)


@dataclass
class Block:
    lang: str
    tags: list[str]
    code: str
    section: str  # the nearest heading above it
    line: int

    @property
    def where(self) -> str:
        return f"docs/plugins.md:{self.line} ({self.section})"


def blocks(path: Path = DOCS) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()]
        prose = _FENCE.sub("", before)  # a "# comment" in a block is not a heading
        headings = re.findall(r"^#{1,4} (.+)$", prose, re.M)
        found.append(
            Block(
                lang=m.group(1),
                tags=m.group(2).split(),
                code=m.group(3),
                section=headings[-1] if headings else "",
                line=before.count("\n") + 2,
            )
        )
    return found


def in_section(section: str, lang: str) -> list[Block]:
    return [b for b in blocks() if b.section == section and b.lang == lang]


def packaging_project(dest: Path) -> Path:
    """A project from the Packaging section's pyproject.toml and the example's package."""
    [pyproject] = in_section("Packaging", "toml")
    dest.mkdir(parents=True)
    (dest / "pyproject.toml").write_text(pyproject.code, encoding="utf-8")
    shutil.copytree(
        WEATHER / "frontdesk_weather",
        dest / "frontdesk_weather",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return dest


@dataclass
class Command:
    argv: list[str]
    expect: list[str]  # lines its output must contain
    line: str


def commands(block: Block) -> list[Command]:
    """The ``$ ...`` lines of a console block (comments dropped) and the output shown under
    each."""
    found: list[Command] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            found.append(Command(shlex.split(line[2:], comments=True), [], line[2:]))
        elif line.strip() and found:
            found[-1].expect.append(line.strip())
    return found
