"""Plugin settings (``register_settings``): a plugin's pydantic-settings class, filled from
``FRONTDESK_<PLUGIN>_*`` variables, then ``.env``, then the profile's ``[plugins.<name>]``
table, and validated when plugins load. A bad value is one line that names where it came from.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePath
from typing import Any, TypeVar, get_args

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from frontdesk.core.profile import Profile
from frontdesk.core.settings import in_dotenv

SECRET_WORDS = ("key", "secret", "token", "password")
SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def env_prefix(plugin: str) -> str:
    return f"FRONTDESK_{re.sub(r'[^A-Za-z0-9]', '_', plugin).upper()}_"


def is_secret(field: str) -> bool:
    return any(word in field.lower() for word in SECRET_WORDS)


def build(plugin: str, cls: type[BaseSettings], profile: Profile) -> BaseSettings:
    """The plugin's settings, or ``ValueError`` with one line naming the variable or key."""
    prefix = env_prefix(plugin)
    table = dict(profile.plugins.get(plugin, {}))
    for key, value in table.items():
        if key not in cls.model_fields:
            raise ValueError(f"{profile.key('plugins', plugin, key)}: unknown key")
        # A relative path in the profile means relative to the profile, wherever frontdesk runs
        # from; one from the environment stays relative to the working directory.
        if (
            profile.source
            and isinstance(value, str)
            and value
            and _is_path(cls.model_fields[key].annotation)
        ):
            if not Path(value).is_absolute():
                table[key] = str(Path(profile.source).resolve().parent / value)

    class Filled(cls):  # type: ignore[valid-type, misc]
        model_config = SettingsConfigDict(
            **{**cls.model_config, "env_prefix": prefix, "env_file": ".env", "extra": "ignore"}
        )

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            # The environment beats .env, which beats the profile: deployments override files.
            return env_settings, dotenv_settings, init_settings

    Filled.__name__ = cls.__name__
    Filled.__qualname__ = cls.__qualname__
    try:
        return Filled(**table)
    except ValidationError as exc:
        raise ValueError(_one_line(exc, prefix, plugin, table, profile)) from None


def plugin_config(plugin: str, cls: type[SettingsT]) -> SettingsT:
    """A plugin's settings built exactly as frontdesk builds ``ctx.config``: from
    ``FRONTDESK_<PLUGIN>_*``, ``.env`` and the profile's ``[plugins.<plugin>]`` table. For code
    that has no ``ctx`` (a CLI command, a hook another plugin calls); ``ValueError`` with one
    line naming the variable or key when a value is bad."""
    from frontdesk.core.profile import load_profile

    return build(plugin, cls, load_profile())  # type: ignore[return-value]


def _is_path(annotation: Any) -> bool:
    if annotation is Path or (isinstance(annotation, type) and issubclass(annotation, PurePath)):
        return True
    return any(_is_path(arg) for arg in get_args(annotation))


def _one_line(
    exc: ValidationError, prefix: str, plugin: str, table: dict[str, Any], profile: Profile
) -> str:
    first = exc.errors()[0]
    loc = first.get("loc", ())
    field = str(loc[0]) if loc else "?"
    variable = f"{prefix}{field.upper()}"
    message = first.get("msg", "invalid value")
    if any(name.upper() == variable for name in os.environ):
        where = variable
    elif field in table:
        where = profile.key("plugins", plugin, field)
    else:
        where = f"{variable} (in .env)" if in_dotenv(variable) else variable
    return f"{where}: {message}"


def shown(config: BaseSettings) -> dict[str, Any]:
    """The settings as ``doctor`` prints them: secrets as set or not set, never their value."""
    out: dict[str, Any] = {}
    for name in type(config).model_fields:
        value = getattr(config, name)
        if is_secret(name):
            out[name] = "set" if value else "not set"
        else:
            out[name] = str(value) if value is not None else None
    return out
