"""Core settings from the environment and .env, all prefixed FRONTDESK_ (LiveKit's own are not).

A plugin's settings are its own class (``register_settings``), never fields here."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="FRONTDESK_", env_file=".env", extra="ignore", populate_by_name=True
    )

    database_url: str = "sqlite+aiosqlite:///frontdesk.db"

    # Plugin selection: LOAD is an allow-list for external plugins (unset = all, "" = none);
    # DISABLE is a deny-list that also applies to built-ins.
    load_plugins: str | None = None
    disable_plugins: str = ""
    hook_timeout_seconds: float = 5.0

    llm: str = "auto"
    stt: str = "auto"
    tts: str = "auto"

    cache_path: Path | None = None  # synthesized ack audio; default ~/.cache/frontdesk

    job_lease_seconds: float = Field(30.0, gt=0)
    job_max_attempts: int = Field(3, ge=1)
    runner_concurrency: int = Field(4, ge=1)
    runner_poll_seconds: float = Field(0.2, gt=0)
    followup_poll_seconds: float = Field(0.2, gt=0)
    idempotency_window_seconds: float = Field(600.0, ge=0)
    ack_after_seconds: float = Field(1.0, ge=0)
    thinking_after_seconds: float = Field(1.5, ge=0)
    progress_update_seconds: float = Field(30.0, ge=0)  # 0: only when asked
    fire_and_forget_grace_seconds: float = Field(5.0, ge=0)
    context_turns: int = Field(6, ge=0)

    @staticmethod
    def split(value: str | None) -> list[str] | None:
        if value is None:
            return None
        return [part.strip() for part in value.split(",") if part.strip()]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
