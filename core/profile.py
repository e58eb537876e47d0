"""The business profile: ``frontdesk.toml`` (or the file ``FRONTDESK_PROFILE`` names), the one
place a business is named. Without one, a neutral front desk.

```toml
[business]
name = "Bayside Dental"
greeting = "Thank you for calling Bayside Dental. How can I help?"
instructions = "House style for every desk."        # optional

[departments.billing]
enabled = false                                      # switch a desk off
instructions = "Extra instructions for this desk."   # optional

[plugins.orders]                                     # a plugin's settings (register_settings)
limit = 3

[voice]
backchannels = ["mm-hm", "uh-huh", "yeah", "okay"]   # "go on" words: never an interruption
```
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from frontdesk.core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_FILE = "frontdesk.toml"
NEUTRAL_NAME = "the front desk"


class Business(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = NEUTRAL_NAME
    greeting: str | None = None
    instructions: str = ""

    def greeting_text(self) -> str:
        if self.greeting:
            return self.greeting
        if self.name == NEUTRAL_NAME:
            return "Hello, you've reached the front desk. How can I help?"
        return f"Hello, you've reached {self.name}. How can I help?"


class Desk(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    instructions: str = ""


class Voice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # None: frontdesk.agents.backchannels.DEFAULT (FRONTDESK_BACKCHANNELS beats both)
    backchannels: list[str] | None = None


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    business: Business = Business()
    departments: dict[str, Desk] = {}
    plugins: dict[str, dict[str, Any]] = {}
    voice: Voice = Voice()

    # The file it was read from, for messages (None: no profile, the neutral front desk).
    source: str | None = None

    def desk(self, name: str) -> Desk:
        return self.departments.get(name) or Desk()

    def enabled(self, name: str) -> bool:
        return self.desk(name).enabled

    def key(self, *parts: str) -> str:
        """``frontdesk.toml: departments.billing.enabled``: how a message names a key."""
        return f"{self.source or DEFAULT_FILE}: {'.'.join(parts)}"


def profile_path(explicit: str | Path | None = None) -> Path | None:
    """The profile to read: ``explicit``, else ``FRONTDESK_PROFILE``, else ``./frontdesk.toml``
    if it exists, else None (the neutral front desk)."""
    named = explicit or os.environ.get("FRONTDESK_PROFILE")
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigError(f"profile {path} not found (FRONTDESK_PROFILE)")
        return path
    default = Path(DEFAULT_FILE)
    return default if default.is_file() else None


def load_profile(explicit: str | Path | None = None) -> Profile:
    path = profile_path(explicit)
    if path is None:
        return Profile()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    data.pop("source", None)
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(path, exc)) from None
    profile.source = str(path)
    return profile


def _one_line(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
    if first.get("type") == "extra_forbidden":
        return f"{path}: {where}: unknown key"
    return f"{path}: {where}: {first.get('msg', 'invalid value')}"
