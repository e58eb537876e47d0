"""Which LLM, STT and TTS a session uses, chosen from settings and the keys present.

``FRONTDESK_LLM``, ``FRONTDESK_STT`` and ``FRONTDESK_TTS`` take ``provider[:detail]``:

- LLM: ``openai[:model]``, ``google[:model]`` or ``offline`` (the deterministic brain);
- STT: ``deepgram[:model]``, ``openai[:model]``, ``google[:model]`` or ``none`` (text only);
- TTS: ``elevenlabs[:voice_id]``, ``openai[:voice]``, ``google[:voice_name]`` or ``none``.

``auto`` (the default) takes the first provider whose key is present and otherwise falls back to
offline/text. Selection reads only the environment (and ``.env``), so ``frontdesk doctor`` can
explain it without importing livekit; the ``build_*`` functions import each plugin lazily.
The key variable names are the ones the livekit plugins themselves read (checked in their
1.8.9 source), so a key that works for the plugin works here and vice versa.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from frontdesk.core.errors import ConfigError

if TYPE_CHECKING:
    from frontdesk.core.settings import Settings

Kind = Literal["llm", "stt", "tts"]

# Google Cloud Speech / Text-to-Speech authenticate with a service account, not GOOGLE_API_KEY.
GOOGLE_CREDS = "GOOGLE_APPLICATION_CREDENTIALS"


@dataclass(frozen=True)
class _Spec:
    key_env: str  # the variable the plugin reads
    default: str | None  # default model (LLM/STT) or voice (TTS); None = the plugin's own
    module: str  # livekit plugin module, imported only when building


# Order is the auto-selection preference: quality/latency for a phone line first.
SPECS: dict[Kind, dict[str, _Spec]] = {
    "llm": {
        "openai": _Spec("OPENAI_API_KEY", "gpt-4.1-mini", "livekit.plugins.openai"),
        "google": _Spec("GOOGLE_API_KEY", "gemini-2.5-flash", "livekit.plugins.google"),
    },
    "stt": {
        "deepgram": _Spec("DEEPGRAM_API_KEY", "nova-3", "livekit.plugins.deepgram"),
        "openai": _Spec("OPENAI_API_KEY", "gpt-4o-mini-transcribe", "livekit.plugins.openai"),
        "google": _Spec(GOOGLE_CREDS, "latest_long", "livekit.plugins.google"),
    },
    "tts": {
        "elevenlabs": _Spec("ELEVEN_API_KEY", None, "livekit.plugins.elevenlabs"),
        "openai": _Spec("OPENAI_API_KEY", "ash", "livekit.plugins.openai"),
        "google": _Spec(GOOGLE_CREDS, None, "livekit.plugins.google"),
    },
}
OFFLINE = {"llm": "offline", "stt": "none", "tts": "none"}
_OFFLINE_ALIASES = {"offline", "none", "off", "text", ""}

# Every variable a provider may need; doctor reports presence, never values.
KEY_VARS = ("OPENAI_API_KEY", "GOOGLE_API_KEY", GOOGLE_CREDS, "DEEPGRAM_API_KEY", "ELEVEN_API_KEY")
LIVEKIT_VARS = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


@dataclass(frozen=True)
class Choice:
    """One selected provider: what, which model or voice, and why, in plain words."""

    kind: Kind
    provider: str  # openai, google, deepgram, elevenlabs, offline (LLM) or none (STT/TTS)
    model: str | None = None  # LLM/STT model; for TTS the plugin's default model
    voice: str | None = None  # TTS only
    reason: str = ""
    key_env: str | None = None

    @property
    def enabled(self) -> bool:
        """False for the offline brain and for text-only STT/TTS."""
        return self.provider not in ("offline", "none")

    @property
    def module(self) -> str | None:
        spec = SPECS[self.kind].get(self.provider)
        return spec.module if spec else None

    def label(self) -> str:
        detail = self.voice if self.kind == "tts" else self.model
        return f"{self.provider}:{detail}" if detail else self.provider


@dataclass(frozen=True)
class Choices:
    llm: Choice
    stt: Choice
    tts: Choice
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def voice(self) -> bool:
        """A voice call needs both ears and a mouth; with either missing it runs in text."""
        return self.stt.enabled and self.tts.enabled

    def __iter__(self) -> Any:
        return iter((self.llm, self.stt, self.tts))


def provider_env(env_file: str | Path | None = ".env") -> dict[str, str]:
    """Provider and LiveKit keys from the process environment, with ``.env`` filling gaps.

    pydantic-settings reads ``.env`` only for FRONTDESK_ variables, and the plugins read only
    ``os.environ``, so a key in ``.env`` would otherwise be seen by nobody."""
    names = (*KEY_VARS, *LIVEKIT_VARS, "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT")
    found: dict[str, str] = {}
    if env_file is not None and Path(env_file).is_file():
        from dotenv import dotenv_values

        for name, value in dotenv_values(env_file).items():
            if name in names and value:
                found[name] = value
    for name in names:
        if os.environ.get(name):
            found[name] = os.environ[name]
    return found


def export_dotenv_keys(env_file: str | Path | None = ".env") -> list[str]:
    """Copy provider/LiveKit keys found only in ``.env`` into ``os.environ`` (never overriding)
    so the LiveKit worker and its job processes see them. Returns the names copied."""
    copied = []
    for name, value in provider_env(env_file).items():
        if not os.environ.get(name):
            os.environ[name] = value
            copied.append(name)
    return copied


def _has_key(provider: str, spec: _Spec, env: Mapping[str, str]) -> bool:
    if spec.key_env == GOOGLE_CREDS:
        # The plugin would otherwise fall back to Application Default Credentials, whose lookup
        # probes the GCE metadata server over the network; we require an explicit file.
        path = env.get(GOOGLE_CREDS)
        return bool(path) and Path(path).is_file()
    if provider == "google" and spec.key_env == "GOOGLE_API_KEY":
        vertex = env.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true")
        if vertex and env.get("GOOGLE_CLOUD_PROJECT"):
            return True
    return bool(env.get(spec.key_env))


def _missing_message(kind: Kind, provider: str, spec: _Spec, value: str) -> str:
    var = spec.key_env
    others = [p for p in SPECS[kind] if p != provider] + [OFFLINE[kind], "auto"]
    if var == GOOGLE_CREDS:
        need = f"{var} to name an existing service-account JSON file"
    else:
        need = f"{var} to be set"
    return (
        f"FRONTDESK_{kind.upper()}={value} needs {need}; "
        f"set it, or choose another {kind.upper()}: {', '.join(others)}"
    )


def select(kind: Kind, value: str, env: Mapping[str, str] | None = None) -> Choice:
    """The choice for one kind, or ``ConfigError`` naming the missing variable."""
    env = provider_env() if env is None else env
    raw = (value or "auto").strip()
    provider, _, detail = raw.partition(":")
    provider = provider.strip().lower()
    detail = detail.strip()

    if provider in _OFFLINE_ALIASES:
        what = "the offline brain" if kind == "llm" else "text only"
        return Choice(kind, OFFLINE[kind], reason=f"{what}, as FRONTDESK_{kind.upper()}={raw} asks")

    if provider == "auto":
        for name, spec in SPECS[kind].items():
            if _has_key(name, spec, env):
                return _choice(kind, name, spec, "", f"auto: {spec.key_env} is set")
        tried = ", ".join(dict.fromkeys(s.key_env for s in SPECS[kind].values()))
        what = "the offline brain" if kind == "llm" else "text only"
        return Choice(kind, OFFLINE[kind], reason=f"auto: {what}, because none of {tried} is set")

    spec = SPECS[kind].get(provider)
    if spec is None:
        options = [*SPECS[kind], OFFLINE[kind], "auto"]
        raise ConfigError(
            f"unknown {kind.upper()} provider {provider!r} in FRONTDESK_{kind.upper()}={raw}; "
            f"use one of {', '.join(options)}"
        )
    if not _has_key(provider, spec, env):
        raise ConfigError(_missing_message(kind, provider, spec, raw))
    return _choice(
        kind, provider, spec, detail, f"FRONTDESK_{kind.upper()}={raw}; {spec.key_env} is set"
    )


def _choice(kind: Kind, provider: str, spec: _Spec, detail: str, reason: str) -> Choice:
    if kind == "tts":
        return Choice(
            kind, provider, voice=detail or spec.default, reason=reason, key_env=spec.key_env
        )
    return Choice(kind, provider, model=detail or spec.default, reason=reason, key_env=spec.key_env)


def select_all(settings: Settings, env: Mapping[str, str] | None = None) -> Choices:
    env = provider_env() if env is None else env
    return Choices(
        llm=select("llm", settings.llm, env),
        stt=select("stt", settings.stt, env),
        tts=select("tts", settings.tts, env),
        env=dict(env),
    )


def import_plugins(choices: Choices) -> list[str]:
    """Import the livekit plugin modules the choices need.

    livekit registers a plugin on import and refuses to do so off the main thread, so the
    worker imports them up front (main process and prewarm) rather than inside a job."""
    modules = list(dict.fromkeys(c.module for c in choices if c.enabled and c.module))
    for name in modules:
        importlib.import_module(name)
    return modules


# -- builders: these construct real plugin objects but never call them ----------------------


def build_llm(choice: Choice, env: Mapping[str, str] | None = None) -> Any:
    """A ``livekit.agents.llm.LLM`` for the choice (the offline brain for ``offline``)."""
    env = provider_env() if env is None else env
    if choice.provider == "offline":
        from frontdesk.agents.brain import OfflineBrain

        return OfflineBrain()
    if choice.provider == "openai":
        from livekit.plugins import openai

        return openai.LLM(model=choice.model or "gpt-4.1-mini", api_key=env["OPENAI_API_KEY"])
    if choice.provider == "google":
        from livekit.plugins import google

        if env.get("GOOGLE_API_KEY"):
            return google.LLM(
                model=choice.model or "gemini-2.5-flash", api_key=env["GOOGLE_API_KEY"]
            )
        # Vertex AI: the project comes from the environment, credentials from ADC.
        return google.LLM(
            model=choice.model or "gemini-2.5-flash",
            vertexai=True,
            project=env["GOOGLE_CLOUD_PROJECT"],
        )
    raise ConfigError(f"cannot build LLM provider {choice.provider!r}")


def build_stt(choice: Choice, env: Mapping[str, str] | None = None) -> Any:
    """A ``livekit.agents.stt.STT``, or None for text only."""
    env = provider_env() if env is None else env
    if not choice.enabled:
        return None
    if choice.provider == "deepgram":
        from livekit.plugins import deepgram

        return deepgram.STT(model=choice.model or "nova-3", api_key=env["DEEPGRAM_API_KEY"])
    if choice.provider == "openai":
        from livekit.plugins import openai

        return openai.STT(
            model=choice.model or "gpt-4o-mini-transcribe", api_key=env["OPENAI_API_KEY"]
        )
    if choice.provider == "google":
        from livekit.plugins import google

        # An explicit file keeps the plugin from probing for default credentials.
        return google.STT(model=choice.model or "latest_long", credentials_file=env[GOOGLE_CREDS])
    raise ConfigError(f"cannot build STT provider {choice.provider!r}")


def build_tts(choice: Choice, env: Mapping[str, str] | None = None) -> Any:
    """A ``livekit.agents.tts.TTS``, or None for text only."""
    env = provider_env() if env is None else env
    if not choice.enabled:
        return None
    voice: dict[str, Any] = {}
    if choice.provider == "elevenlabs":
        from livekit.plugins import elevenlabs

        if choice.voice:
            voice["voice_id"] = choice.voice
        return elevenlabs.TTS(api_key=env["ELEVEN_API_KEY"], **voice)
    if choice.provider == "openai":
        from livekit.plugins import openai

        return openai.TTS(voice=choice.voice or "ash", api_key=env["OPENAI_API_KEY"])
    if choice.provider == "google":
        from livekit.plugins import google

        if choice.voice:
            voice["voice_name"] = choice.voice
        return google.TTS(credentials_file=env[GOOGLE_CREDS], **voice)
    raise ConfigError(f"cannot build TTS provider {choice.provider!r}")


def build_vad() -> Any:
    """Silero VAD; its model ships in the wheel, so loading needs no network."""
    from livekit.plugins import silero

    return silero.VAD.load()


@dataclass
class Providers:
    """Built provider objects for one session."""

    choices: Choices
    llm: Any
    stt: Any = None
    tts: Any = None
    vad: Any = None

    def session_kwargs(self) -> dict[str, Any]:
        """Arguments for ``AgentSession``: STT/TTS only when present, because AgentSession
        reads a string or a missing value as a LiveKit Inference model, and ``None`` is not
        an accepted value for them."""
        kwargs: dict[str, Any] = {"llm": self.llm}
        if self.stt is not None:
            kwargs["stt"] = self.stt
            kwargs["vad"] = self.vad
        if self.tts is not None:
            kwargs["tts"] = self.tts
        return kwargs


def build(choices: Choices, *, vad: Any = None) -> Providers:
    """Every provider object for the choices; ``vad`` is the process's prewarmed Silero."""
    env = choices.env or provider_env()
    stt = build_stt(choices.stt, env)
    if stt is not None and vad is None:
        vad = build_vad()
    return Providers(
        choices=choices,
        llm=build_llm(choices.llm, env),
        stt=stt,
        tts=build_tts(choices.tts, env),
        vad=vad,
    )


__all__ = [
    "KEY_VARS",
    "LIVEKIT_VARS",
    "SPECS",
    "Choice",
    "Choices",
    "Providers",
    "build",
    "build_llm",
    "build_stt",
    "build_tts",
    "build_vad",
    "export_dotenv_keys",
    "import_plugins",
    "provider_env",
    "select",
    "select_all",
]
