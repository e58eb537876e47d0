"""Provider objects for a session, built from the chains ``providers.select_all`` chose.

A chain of one entry builds the plain plugin object; longer chains build LiveKit's
``FallbackAdapter`` (llm, stt, tts), which moves to the next entry when one fails and probes
the failed one in the background until it recovers. Keys and base URLs are passed to the
plugins explicitly (from ``ProviderEnv``: environment, then ``.env``); a server that takes no
key gets a placeholder, because the OpenAI client refuses an empty one. Nothing here calls a
provider: construction opens no connection.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frontdesk.agents.providers import GOOGLE_CREDS, NO_KEY, Chain, Choice, Choices, provider_env
from frontdesk.core.errors import ConfigError

if TYPE_CHECKING:
    from frontdesk.core.settings import Settings


@dataclass(frozen=True)
class Retries:
    """How hard LiveKit tries one provider before the next in the chain (or the apology)."""

    max_retry: int = 1
    retry_interval: float = 0.5
    timeout: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings | None) -> Retries:
        if settings is None:
            return cls()
        return cls(
            settings.provider_max_retry,
            settings.provider_retry_interval_seconds,
            settings.provider_timeout_seconds,
        )


def _key(entry: Choice, env: Mapping[str, str]) -> str:
    return (env.get(entry.key_env) if entry.key_env else None) or NO_KEY


def _one_llm(entry: Choice, env: Mapping[str, str], registry: Any = None) -> Any:
    if entry.provider == "offline":
        from frontdesk.agents.brain import OfflineBrain

        # The registry tells the brain which tools are critical (asked for a yes first).
        return OfflineBrain.for_registry(registry) if registry is not None else OfflineBrain()
    if entry.provider == "google":
        from livekit.plugins import google

        if env.get("GOOGLE_API_KEY"):
            return google.LLM(
                model=entry.model or "gemini-2.5-flash", api_key=env["GOOGLE_API_KEY"]
            )
        # Vertex AI: the project comes from the environment, credentials from ADC.
        return google.LLM(
            model=entry.model or "gemini-2.5-flash",
            vertexai=True,
            project=env["GOOGLE_CLOUD_PROJECT"],
        )
    spec = entry.spec
    if spec is None or spec.base_url is None:
        raise ConfigError(f"cannot build LLM provider {entry.provider!r}")
    from livekit.plugins import openai

    kwargs: dict[str, Any] = {"model": entry.model, "base_url": entry.base_url}
    if spec.factory is None:
        return openai.LLM(api_key=_key(entry, env), **kwargs)
    # The helpers carry each server's quirks (strict tool schemas off for Cerebras, OpenRouter's
    # headers); Ollama's sets its own placeholder key.
    if spec.factory != "ollama":
        kwargs["api_key"] = _key(entry, env)
    return getattr(openai.LLM, f"with_{spec.factory}")(**kwargs)


def _one_stt(entry: Choice, env: Mapping[str, str]) -> Any:
    if entry.provider == "deepgram":
        from livekit.plugins import deepgram

        return deepgram.STT(model=entry.model or "nova-3", api_key=env["DEEPGRAM_API_KEY"])
    if entry.provider == "openai":
        from livekit.plugins import openai

        return openai.STT(
            model=entry.model or "gpt-4o-mini-transcribe",
            api_key=_key(entry, env),
            base_url=entry.base_url,
        )
    if entry.provider == "google":
        from livekit.plugins import google

        # An explicit file keeps the plugin from probing for default credentials.
        return google.STT(model=entry.model or "latest_long", credentials_file=env[GOOGLE_CREDS])
    raise ConfigError(f"cannot build STT provider {entry.provider!r}")


def _one_tts(entry: Choice, env: Mapping[str, str]) -> Any:
    voice: dict[str, Any] = {}
    if entry.provider == "elevenlabs":
        from livekit.plugins import elevenlabs

        if entry.voice:
            voice["voice_id"] = entry.voice
        return elevenlabs.TTS(api_key=env["ELEVEN_API_KEY"], **voice)
    if entry.provider == "openai":
        from livekit.plugins import openai

        return openai.TTS(
            voice=entry.voice or "ash", api_key=_key(entry, env), base_url=entry.base_url
        )
    if entry.provider == "google":
        from livekit.plugins import google

        if entry.voice:
            voice["voice_name"] = entry.voice
        return google.TTS(credentials_file=env[GOOGLE_CREDS], **voice)
    raise ConfigError(f"cannot build TTS provider {entry.provider!r}")


def _entries(chain: Chain | Choice) -> tuple[Choice, ...]:
    return (chain,) if isinstance(chain, Choice) else chain.entries


def build_llm(
    chain: Chain | Choice,
    env: Mapping[str, str] | None = None,
    retries: Retries | None = None,
    registry: Any = None,
) -> Any:
    """A ``livekit.agents.llm.LLM`` for the chain (the offline brain for ``offline``)."""
    env = provider_env() if env is None else env
    parts = [_one_llm(e, env, registry) for e in _entries(chain)]
    if len(parts) == 1:
        return parts[0]
    from livekit.agents import llm

    r = retries or Retries()
    return llm.FallbackAdapter(
        parts,
        attempt_timeout=r.timeout,
        max_retry_per_llm=r.max_retry,
        retry_interval=r.retry_interval,
    )


def build_stt(
    chain: Chain | Choice,
    env: Mapping[str, str] | None = None,
    *,
    vad: Any = None,
    retries: Retries | None = None,
) -> Any:
    """A ``livekit.agents.stt.STT``, or None for text only. A chain with a non-streaming STT
    (OpenAI's) needs the VAD: the adapter wraps that entry in a StreamAdapter."""
    env = provider_env() if env is None else env
    entries = [e for e in _entries(chain) if e.enabled]
    if not entries:
        return None
    parts = [_one_stt(e, env) for e in entries]
    if len(parts) == 1:
        return parts[0]
    from livekit.agents import stt

    r = retries or Retries()
    if vad is None and any(not p.capabilities.streaming for p in parts):
        vad = build_vad()
    return stt.FallbackAdapter(
        parts,
        vad=vad,
        attempt_timeout=r.timeout,
        max_retry_per_stt=r.max_retry,
        retry_interval=r.retry_interval,
    )


def build_tts(
    chain: Chain | Choice, env: Mapping[str, str] | None = None, retries: Retries | None = None
) -> Any:
    """A ``livekit.agents.tts.TTS``, or None for text only."""
    env = provider_env() if env is None else env
    entries = [e for e in _entries(chain) if e.enabled]
    if not entries:
        return None
    parts = [_one_tts(e, env) for e in entries]
    if len(parts) == 1:
        return parts[0]
    from livekit.agents import tts

    return tts.FallbackAdapter(parts, max_retry_per_tts=(retries or Retries()).max_retry)


def build_vad() -> Any:
    """Silero VAD; its model ships in the wheel, so loading needs no network."""
    from livekit.plugins import silero

    return silero.VAD.load()


def inner(obj: Any) -> list[Any]:
    """The instances behind a FallbackAdapter, in chain order (the object itself otherwise);
    a ScriptedLLM (the console's) is looked through to the model it falls back to."""
    obj = getattr(obj, "_fallback", None) or obj
    for attr in ("_llm_instances", "_stt_instances", "_tts_instances"):
        found = getattr(obj, attr, None)
        if found:
            return list(found)
    return [obj]


# LiveKit's defaults, but the STT hears the caller while uninterruptible speech plays (a critical
# result, the hold line): what they say then is answered right after it, not thrown away
# (docs/patterns.md, "On voice"). Rooms cancel the agent's echo, so nothing of it is heard back.
VOICE_TURN_HANDLING: dict[str, Any] = {"interruption": {"discard_audio_if_uninterruptible": False}}


@dataclass
class Providers:
    """Built provider objects for one session."""

    choices: Choices
    llm: Any
    stt: Any = None
    tts: Any = None
    vad: Any = None
    retries: Retries = field(default_factory=Retries)

    def describe(self, obj: Any) -> str:
        """The chain entry (or the whole chain, for an adapter) that built ``obj``."""
        for chain, built in (
            (self.choices.llm, self.llm),
            (self.choices.stt, self.stt),
            (self.choices.tts, self.tts),
        ):
            if built is None:
                continue
            if obj is built:
                return ",".join(e.describe() for e in chain if e.enabled)
            enabled = [e for e in chain if e.enabled]
            for entry, part in zip(enabled, inner(built), strict=False):
                if obj is part or obj is getattr(part, "_stt", None):
                    return entry.describe()
        return getattr(obj, "label", None) or type(obj).__name__

    def session_kwargs(self) -> dict[str, Any]:
        """Arguments for ``AgentSession``: STT/TTS only when present, because AgentSession
        reads a string or a missing value as a LiveKit Inference model, and ``None`` is not
        an accepted value for them."""
        from livekit.agents import APIConnectOptions
        from livekit.agents.voice.agent_session import SessionConnectOptions

        def opts(chain: Chain) -> APIConnectOptions:
            # A chain retries inside its adapter (per entry); retrying the whole chain on top
            # would multiply the caller's wait.
            retry = 0 if len(chain) > 1 else self.retries.max_retry
            return APIConnectOptions(
                max_retry=retry,
                retry_interval=self.retries.retry_interval,
                timeout=self.retries.timeout,
            )

        kwargs: dict[str, Any] = {"llm": self.llm}
        if self.stt is not None:
            kwargs["stt"] = self.stt
            kwargs["vad"] = self.vad
            kwargs["turn_handling"] = copy.deepcopy(VOICE_TURN_HANDLING)
        if self.tts is not None:
            kwargs["tts"] = self.tts
        kwargs["conn_options"] = SessionConnectOptions(
            llm_conn_options=opts(self.choices.llm),
            stt_conn_options=opts(self.choices.stt),
            tts_conn_options=opts(self.choices.tts),
        )
        return kwargs


def build(
    choices: Choices, *, vad: Any = None, settings: Settings | None = None, registry: Any = None
) -> Providers:
    """Every provider object for the choices; ``vad`` is the process's prewarmed Silero, and
    ``registry`` (the loaded plugins) tells an offline brain which tools are critical."""
    env = choices.env or provider_env()
    retries = Retries.from_settings(settings)
    if choices.stt.enabled and vad is None:
        vad = build_vad()
    stt = build_stt(choices.stt, env, vad=vad, retries=retries)
    return Providers(
        choices=choices,
        llm=build_llm(choices.llm, env, retries, registry),
        stt=stt,
        tts=build_tts(choices.tts, env, retries),
        vad=vad if stt is not None else None,
        retries=retries,
    )


__all__ = [
    "Providers",
    "Retries",
    "build",
    "build_llm",
    "build_stt",
    "build_tts",
    "build_vad",
    "inner",
]
