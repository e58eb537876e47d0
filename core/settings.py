"""Core settings from the environment and .env, all prefixed FRONTDESK_ (LiveKit's own are not).

A plugin's settings are its own class (``register_settings``), never fields here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from frontdesk.core.errors import ConfigError

PREFIX = "FRONTDESK_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="FRONTDESK_", env_file=".env", extra="ignore", populate_by_name=True
    )

    database_url: str = "sqlite+aiosqlite:///frontdesk.db"
    # Free space under an SQLite database below which doctor fails and the console's
    # /api/health answers 503 (db/health.py); 0 turns the check off.
    min_free_mb: float = Field(64.0, ge=0)

    # Plugin selection: LOAD is an allow-list for external plugins (unset = all, "" = none);
    # DISABLE is a deny-list that also applies to built-ins.
    load_plugins: str | None = None
    disable_plugins: str = ""
    hook_timeout_seconds: float = 5.0

    # Each a comma-separated fallback chain of provider:model[@base_url] (docs/deploy.md).
    llm: str = "auto"
    stt: str = "auto"
    tts: str = "auto"
    # LiveKit retries a failed request this often per provider before the next in the chain
    # takes over; a caller hears silence meanwhile, so fewer than LiveKit's default of 3.
    provider_max_retry: int = Field(1, ge=0)
    provider_retry_interval_seconds: float = Field(0.5, ge=0)
    provider_timeout_seconds: float = Field(10.0, gt=0)
    # Turns in a row that fail (after retries and fallbacks) before the call ends politely.
    max_provider_failures: int = Field(3, ge=1)

    cache_path: Path | None = None  # synthesized ack audio; default ~/.cache/frontdesk

    # In-turn work's lease: a call process renews it; a row whose lease ran out was left by a
    # dead call process and is closed by a runner.
    job_lease_seconds: float = Field(30.0, gt=0)
    # A finished task's end is retried this long through a database outage (a background
    # job's for at least this, or its own timeout if longer; none: until written).
    record_retry_seconds: float = Field(60.0, gt=0)
    # Background jobs run as DBOS workflows (core/runner.py, docs/reliability.md).
    runner_concurrency: int = Field(4, ge=1)  # jobs at once per runner
    runner_poll_seconds: float = Field(0.2, gt=0)  # how often a runner looks at its queue
    # The longest a dead runner's jobs wait before a live runner resumes them.
    runner_takeover_seconds: float = Field(30.0, gt=0, le=3600)
    # The runner's executor id; unset: <hostname>-<n>, the lowest free slot of this host.
    runner_id: str | None = Field(None, min_length=1, max_length=100)
    # Pinned, so a redeployed runner resumes the old one's workflows: change it only when job
    # code changes in a way an unfinished job must not resume under (then drain first).
    job_version: str = Field("1", min_length=1, max_length=100)
    # DBOS's system database; unset: schema dbos on Postgres, <name>.dbos.db beside SQLite.
    jobs_database_url: str | None = None
    followup_poll_seconds: float = Field(0.2, gt=0)
    idempotency_window_seconds: float = Field(600.0, ge=0)
    ack_after_seconds: float = Field(1.0, ge=0)
    thinking_after_seconds: float = Field(1.5, ge=0)
    progress_update_seconds: float = Field(30.0, ge=0)  # 0: only when asked
    fire_and_forget_grace_seconds: float = Field(5.0, ge=0)
    context_turns: int = Field(6, ge=0)

    # Voice: what a caller says to mean "go on", comma-separated; unset: the profile's
    # [voice] backchannels, else frontdesk.agents.backchannels.DEFAULT (docs/deploy.md).
    backchannels: str | None = None
    # The longest a finished tool's result waits for a caller who is making sound without
    # words, or for a caller to stop speaking before a critical result (docs/patterns.md).
    hold_for_caller_seconds: float = Field(4.0, ge=0)

    @staticmethod
    def split(value: str | None) -> list[str] | None:
        if value is None:
            return None
        return [part.strip() for part in value.split(",") if part.strip()]


class ProviderEnv(BaseSettings):
    """Provider keys, base URLs and LiveKit's variables under their usual names (no prefix),
    from the environment with ``.env`` filling gaps. Builders pass these to the plugins
    explicitly, so a key or URL in ``.env`` works although the plugins read only os.environ.
    Every variable a provider spec names has a field here (a test checks)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    livekit_url: str | None = None
    livekit_api_key: SecretStr | None = None
    livekit_api_secret: SecretStr | None = None

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    google_api_key: SecretStr | None = None
    google_application_credentials: str | None = None
    google_genai_use_vertexai: str | None = None
    google_cloud_project: str | None = None
    deepgram_api_key: SecretStr | None = None
    eleven_api_key: SecretStr | None = None
    # OpenAI-compatible servers (livekit-plugins-openai's with_* helpers, plus Groq and vLLM).
    groq_api_key: SecretStr | None = None
    openrouter_api_key: SecretStr | None = None
    together_api_key: SecretStr | None = None
    deepseek_api_key: SecretStr | None = None
    fireworks_api_key: SecretStr | None = None
    cerebras_api_key: SecretStr | None = None
    perplexity_api_key: SecretStr | None = None
    xai_api_key: SecretStr | None = None
    sambanova_api_key: SecretStr | None = None
    nebius_api_key: SecretStr | None = None
    ovhcloud_api_key: SecretStr | None = None
    vllm_api_key: SecretStr | None = None

    def as_env(self) -> dict[str, str]:
        """The variables that are set, by their upper-case names, secrets revealed: for the
        provider builders only, never for printing."""
        found: dict[str, str] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            if value:
                found[name.upper()] = value
        return found


def load_settings(**overrides: Any) -> Settings:
    """The core settings, or ``ConfigError`` with one line that names the variable (and .env
    when the value came from there) and what is wrong with its value. ``overrides`` are
    keyword values (a command's ``--db``), validated like the rest."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc.errors()[0], overrides)) from None


def load_settings_leniently() -> tuple[Settings, list[str]]:
    """For ``doctor``, which must run to report a bad value: the settings with every invalid
    field at its default, and one line per problem."""
    problems: list[str] = []
    bad: dict[str, Any] = {}
    for _ in range(len(Settings.model_fields)):
        try:
            return Settings(**bad), problems
        except ValidationError as exc:
            for error in exc.errors():
                problems.append(_one_line(error, bad))
                field = str(error["loc"][0]) if error.get("loc") else ""
                if field in Settings.model_fields:
                    bad[field] = Settings.model_fields[field].default
    return Settings.model_construct(), problems


def _one_line(first: Any, overrides: dict[str, Any]) -> str:
    loc = first.get("loc", ())
    field = str(loc[0]) if loc else "?"
    variable = f"{PREFIX}{field.upper()}"
    message = first.get("msg", "invalid value")
    given = first.get("input")
    if isinstance(given, str) and field != "database_url" and len(given) <= 40:
        message = f"{message} (got {given!r})"
    if field in overrides:
        where = field.replace("_", "-")
    elif any(name.upper() == variable for name in os.environ):
        where = variable
    elif in_dotenv(variable):
        where = f"{variable} (in .env)"
    else:
        where = variable
    return f"{where}: {message}"


def in_dotenv(variable: str) -> bool:
    """Whether ``.env`` sets ``variable``: an error names where a bad value came from."""
    try:
        from dotenv import dotenv_values

        return any(k.upper() == variable for k in dotenv_values(".env"))
    except Exception:
        return False
