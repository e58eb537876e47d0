"""Which LLM, STT and TTS a session uses: fallback chains chosen from settings and keys.

``FRONTDESK_LLM``, ``FRONTDESK_STT`` and ``FRONTDESK_TTS`` each take a comma-separated chain
of entries ``provider[:model][@base_url]`` (for TTS the detail is the voice); the first entry
serves and the next take over when it fails (LiveKit's FallbackAdapter, see provider_build).

- LLM: ``openai``, ``google``, the OpenAI-compatible servers in ``COMPATIBLE`` (``ollama``,
  ``groq``, ``openrouter``, ...), or ``offline`` (the deterministic brain);
- STT: ``deepgram``, ``openai``, ``google`` or ``none`` (text only);
- TTS: ``elevenlabs``, ``openai``, ``google`` or ``none``.

``auto`` (the default) takes the first provider whose key is present, else offline/text. It
never picks OpenAI speech when OpenAI's URL is a chat-only server (``OPENAI_BASE_URL`` or the
LLM chain points elsewhere): that key then belongs to the other server.

Selection is livekit-free and reads keys through ``ProviderEnv`` (pydantic-settings: the
environment, then ``.env``), so ``frontdesk doctor`` explains it without importing livekit.
The key names are the ones the livekit plugins document (checked in their 1.8.9 source).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from frontdesk.agents.provider_specs import (
    AUTO_ORDER,
    COMPATIBLE,
    GOOGLE_CREDS,
    OPENAI_URL,
    SPECS,
    Kind,
    _Spec,
)
from frontdesk.core.errors import ConfigError

if TYPE_CHECKING:
    from frontdesk.core.settings import Settings

# What a client sends when a server wants no key (the OpenAI SDK refuses an empty one).
NO_KEY = "no-key"


OFFLINE = {"llm": "offline", "stt": "none", "tts": "none"}
_OFFLINE_ALIASES = {"offline", "none", "off", "text", ""}

# Every variable a provider may need; doctor reports presence, never values.
KEY_VARS = tuple(
    dict.fromkeys(
        s.key_env for kind in SPECS.values() for s in kind.values() if s.key_env is not None
    )
)
URL_VARS = ("OPENAI_BASE_URL",)
LIVEKIT_VARS = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


def host_of(url: str | None) -> str:
    return (urlsplit(url).hostname or "").lower() if url else ""


def safe_url(url: str | None) -> str:
    """Scheme, host, port and path only: never userinfo or a query (a key may hide there)."""
    if not url:
        return ""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or '?'}{port}{parts.path}"


@dataclass(frozen=True)
class Choice:
    """One entry of a chain: which provider, model or voice, where, and why in plain words."""

    kind: Kind
    provider: str  # a SPECS name, offline (LLM) or none (STT/TTS)
    model: str | None = None  # LLM/STT model
    voice: str | None = None  # TTS only
    base_url: str | None = None  # OpenAI-compatible servers only
    reason: str = ""
    key_env: str | None = None  # the variable its key comes from, when it has one

    @property
    def enabled(self) -> bool:
        """False for the offline brain and for text-only STT/TTS."""
        return self.provider not in ("offline", "none")

    @property
    def module(self) -> str | None:
        spec = SPECS[self.kind].get(self.provider)
        return spec.module if spec else None

    @property
    def spec(self) -> _Spec | None:
        return SPECS[self.kind].get(self.provider)

    def label(self) -> str:
        detail = self.voice if self.kind == "tts" else self.model
        return f"{self.provider}:{detail}" if detail else self.provider

    def describe(self) -> str:
        """The label with the base URL, for doctor and logs (never a key)."""
        return f"{self.label()}@{safe_url(self.base_url)}" if self.base_url else self.label()


@dataclass(frozen=True)
class Chain:
    """The entries of one kind in fallback order; the first serves while it works."""

    kind: Kind
    entries: tuple[Choice, ...]

    @property
    def primary(self) -> Choice:
        return self.entries[0]

    # The primary's fields, for callers that only care what answers first.
    @property
    def provider(self) -> str:
        return self.primary.provider

    @property
    def model(self) -> str | None:
        return self.primary.model

    @property
    def voice(self) -> str | None:
        return self.primary.voice

    @property
    def key_env(self) -> str | None:
        return self.primary.key_env

    @property
    def reason(self) -> str:
        return "; ".join(dict.fromkeys(e.reason for e in self.entries))

    @property
    def enabled(self) -> bool:
        return self.primary.enabled

    @property
    def modules(self) -> list[str]:
        return list(dict.fromkeys(e.module for e in self.entries if e.enabled and e.module))

    def label(self) -> str:
        return ",".join(e.label() for e in self.entries)

    def __iter__(self) -> Iterator[Choice]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Choices:
    llm: Chain
    stt: Chain
    tts: Chain
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def voice(self) -> bool:
        """A voice call needs both ears and a mouth; with either missing it runs in text."""
        return self.stt.enabled and self.tts.enabled

    def __iter__(self) -> Iterator[Chain]:
        return iter((self.llm, self.stt, self.tts))


def provider_env(env_file: str | Path | None = ".env") -> dict[str, str]:
    """Provider and LiveKit variables (keys, base URLs) from the environment with ``.env``
    filling gaps, read through pydantic-settings. Values are secrets: never print them."""
    from frontdesk.core.settings import ProviderEnv

    if env_file is None or not Path(env_file).is_file():
        return ProviderEnv(_env_file=None).as_env()
    return ProviderEnv(_env_file=env_file).as_env()


def export_livekit_env(env_file: str | Path | None = ".env") -> list[str]:
    """Copy LiveKit's variables (and Google's ADC ones) found only in ``.env`` into
    ``os.environ``, never overriding: the LiveKit worker reads only the process environment.
    Provider keys are passed to the plugins explicitly and need no copy. Returns the names."""
    copied = []
    wanted = (*LIVEKIT_VARS, GOOGLE_CREDS, "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT")
    for name, value in provider_env(env_file).items():
        if name in wanted and not os.environ.get(name):
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
    return spec.key_env is None or bool(env.get(spec.key_env))


def _base_url(provider: str, spec: _Spec, url: str, env: Mapping[str, str]) -> str | None:
    if spec.base_url is None:
        return None
    if url:
        return url
    if provider == "openai" and env.get("OPENAI_BASE_URL"):
        return env["OPENAI_BASE_URL"]  # the OpenAI SDK's own convention, also from .env
    return spec.base_url


def _needs_key(spec: _Spec, base_url: str | None) -> bool:
    """A hosted provider's own endpoint needs its key; a server elsewhere may take none."""
    if spec.key_env is None:
        return False
    if spec.base_url is None:
        return True
    return spec.key_env != "VLLM_API_KEY" and host_of(base_url) == host_of(spec.base_url)


def chat_only_openai(env: Mapping[str, str], llm: Chain | None = None) -> str | None:
    """Why OpenAI speech must not be auto-chosen (its URL or key is another server's), or None."""
    configured = env.get("OPENAI_BASE_URL")
    if configured and host_of(configured) != host_of(OPENAI_URL):
        return f"OPENAI_BASE_URL points at {host_of(configured)}, a chat server"
    for entry in llm or ():
        if entry.provider == "openai" and host_of(entry.base_url) != host_of(OPENAI_URL):
            return f"the LLM's OpenAI entry points at {host_of(entry.base_url)}, a chat server"
    return None


def _missing_message(kind: Kind, provider: str, spec: _Spec, value: str) -> str:
    var = spec.key_env
    others = [p for p in AUTO_ORDER[kind] if p != provider] + [OFFLINE[kind], "auto"]
    if var == GOOGLE_CREDS:
        need = f"{var} to name an existing service-account JSON file"
    else:
        need = f"{var} to be set"
    return (
        f"FRONTDESK_{kind.upper()}={value} needs {need}; "
        f"set it, or choose another {kind.upper()}: {', '.join(others)}"
    )


def shown(value: str) -> str:
    """A chain setting as it may be printed: each entry's URL without userinfo or query."""
    out = []
    for part in value.split(","):
        head, at, url = part.partition("@")
        out.append(f"{head.strip()}@{safe_url(url.strip())}" if at else part.strip())
    return ",".join(out)


def _entry(kind: Kind, raw: str, whole: str, env: Mapping[str, str]) -> Choice:
    head, _, url = raw.partition("@")  # a URL may hold '@' (userinfo); a model name does not
    provider, _, detail = head.partition(":")
    provider, detail, url = provider.strip().lower(), detail.strip(), url.strip()
    setting = f"FRONTDESK_{kind.upper()}={shown(whole)}"
    spec = SPECS[kind].get(provider)
    if spec is None:
        options = [*SPECS[kind], OFFLINE[kind], "auto"]
        raise ConfigError(
            f"unknown {kind.upper()} provider {provider!r} in {setting}; use one of {', '.join(options)}"
        )
    if url and spec.base_url is None:
        raise ConfigError(
            f"{setting}: {provider} takes no @base_url (only OpenAI-compatible servers do)"
        )
    if url and urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"{setting}: {safe_url(url) or url!r} is not an http(s) URL")
    base_url = _base_url(provider, spec, url, env)
    if _needs_key(spec, base_url) and not _has_key(provider, spec, env):
        raise ConfigError(_missing_message(kind, provider, spec, shown(whole)))
    if not (detail or spec.default) and kind != "tts":
        raise ConfigError(f"{setting}: {provider} needs a model, as in {provider}:MODEL")
    key_env = spec.key_env if spec.key_env and env.get(spec.key_env) else None
    if spec.key_env == GOOGLE_CREDS or (provider == "google" and not key_env):
        key_env = spec.key_env
    why = f"{spec.key_env} is set" if key_env else "no key needed"
    return _make(kind, provider, spec, detail, base_url, f"{setting}; {why}", key_env)


def _make(
    kind: Kind,
    provider: str,
    spec: _Spec,
    detail: str,
    base_url: str | None,
    reason: str,
    key_env: str | None,
) -> Choice:
    detail_or_default = detail or spec.default
    if kind == "tts":
        return Choice(
            kind,
            provider,
            voice=detail_or_default,
            base_url=base_url,
            reason=reason,
            key_env=key_env,
        )
    return Choice(
        kind, provider, model=detail_or_default, base_url=base_url, reason=reason, key_env=key_env
    )


def _auto(kind: Kind, env: Mapping[str, str], llm: Chain | None) -> Choice:
    skipped = chat_only_openai(env, llm) if kind != "llm" else None
    for name in AUTO_ORDER[kind]:
        spec = SPECS[kind][name]
        if name == "openai" and skipped:
            continue
        if spec.key_env and _has_key(name, spec, env):
            base_url = _base_url(name, spec, "", env)
            return _make(
                kind, name, spec, "", base_url, f"auto: {spec.key_env} is set", spec.key_env
            )
    what = "the offline brain" if kind == "llm" else "text only"
    tried = ", ".join(dict.fromkeys(str(SPECS[kind][n].key_env) for n in AUTO_ORDER[kind]))
    why = f"none of {tried} is set" + (f" (OpenAI skipped: {skipped})" if skipped else "")
    return Choice(kind, OFFLINE[kind], reason=f"auto: {what}, because {why}")


def select(
    kind: Kind, value: str, env: Mapping[str, str] | None = None, *, llm: Chain | None = None
) -> Chain:
    """The chain for one kind, or ``ConfigError`` naming what is wrong in one line. ``llm``
    (the LLM chain) lets auto speech avoid a chat-only OpenAI URL."""
    env = provider_env() if env is None else env
    whole = (value or "auto").strip()
    parts = [p.strip() for p in whole.split(",")] or [""]
    if len(parts) == 1:
        name = parts[0].lower()
        if name in _OFFLINE_ALIASES:
            what = "the offline brain" if kind == "llm" else "text only"
            return Chain(
                kind,
                (
                    Choice(
                        kind,
                        OFFLINE[kind],
                        reason=f"{what}, as FRONTDESK_{kind.upper()}={whole} asks",
                    ),
                ),
            )
        if name == "auto":
            return Chain(kind, (_auto(kind, env, llm),))
    entries = []
    for part in parts:
        if part.lower() in _OFFLINE_ALIASES | {"auto"}:
            raise ConfigError(
                f"FRONTDESK_{kind.upper()}={shown(whole)}: {part or 'an empty entry'!s} cannot be part of a chain; "
                f"list providers, as in openai:gpt-4.1-mini,google:gemini-2.5-flash"
            )
        entries.append(_entry(kind, part, whole, env))
    return Chain(kind, tuple(entries))


def select_all(settings: Settings, env: Mapping[str, str] | None = None) -> Choices:
    env = provider_env() if env is None else env
    llm = select("llm", settings.llm, env)
    return Choices(
        llm=llm,
        stt=select("stt", settings.stt, env, llm=llm),
        tts=select("tts", settings.tts, env, llm=llm),
        env=dict(env),
    )


def import_plugins(choices: Choices) -> list[str]:
    """Import the livekit plugin modules the choices need.

    livekit registers a plugin on import and refuses to do so off the main thread, so the
    worker imports them up front (main process and prewarm) rather than inside a job."""
    import importlib

    modules = list(dict.fromkeys(m for chain in choices for m in chain.modules))
    for name in modules:
        importlib.import_module(name)
    return modules


__all__ = [
    "COMPATIBLE",
    "KEY_VARS",
    "LIVEKIT_VARS",
    "NO_KEY",
    "SPECS",
    "Chain",
    "Choice",
    "Choices",
    "chat_only_openai",
    "export_livekit_env",
    "import_plugins",
    "provider_env",
    "safe_url",
    "select",
    "select_all",
]
