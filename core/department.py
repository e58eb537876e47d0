"""``Department``: a desk the caller can be transferred to, as a plugin registers it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from frontdesk.core.tools import ToolSpec


@dataclass
class Department:
    name: str
    description: str
    instructions: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    # Words the offline brain uses to route to this desk, besides its name and description.
    keywords: list[str] = field(default_factory=list)
    plugin: str | None = None

    def problems(self) -> list[str]:
        found = []
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", self.name or ""):
            found.append(f"department name {self.name!r} must be lowercase letters, digits or _")
        if not (self.description or "").strip():
            found.append(f"department {self.name!r} has no description (triage routes by it)")
        for t in self.tools:
            if not isinstance(t, ToolSpec):
                found.append(f"department {self.name!r} lists {t!r}, which is not a @tool")
        return found
