"""The provider table: every provider frontdesk can build, its key variable, default model or
voice, plugin module and, for OpenAI-compatible servers, its own base URL.

The key names and defaults are the ones livekit-plugins-* 1.8.9 document (their with_*
helpers for the compatible servers), so a key that works for a plugin works here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["llm", "stt", "tts"]

# Google Cloud Speech / Text-to-Speech authenticate with a service account, not GOOGLE_API_KEY.
GOOGLE_CREDS = "GOOGLE_APPLICATION_CREDENTIALS"
OPENAI_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class _Spec:
    key_env: str | None  # the variable holding the key; None: the server takes none
    default: str | None  # default model (LLM/STT) or voice (TTS); None = the plugin's own
    module: str  # livekit plugin module, imported only when building
    base_url: str | None = None  # OpenAI-compatible: the provider's own endpoint
    factory: str | None = None  # livekit.plugins.openai.LLM.with_<factory>, when it has one


def _compat(key: str | None, model: str | None, url: str, factory: str | None = None) -> _Spec:
    return _Spec(key, model, "livekit.plugins.openai", url, factory)


# OpenAI-compatible chat servers: livekit-plugins-openai 1.8.9's with_* helpers, plus Groq and
# vLLM (plain OpenAI clients on their URL). Defaults are the helpers' own.
COMPATIBLE: dict[str, _Spec] = {
    "ollama": _compat(None, "llama3.1", "http://localhost:11434/v1", "ollama"),
    "vllm": _compat("VLLM_API_KEY", None, "http://localhost:8000/v1"),
    "groq": _compat("GROQ_API_KEY", "llama-3.3-70b-versatile", "https://api.groq.com/openai/v1"),
    "openrouter": _compat(
        "OPENROUTER_API_KEY", "auto", "https://openrouter.ai/api/v1", "openrouter"
    ),
    "together": _compat(
        "TOGETHER_API_KEY",
        "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
        "https://api.together.xyz/v1",
        "together",
    ),
    "deepseek": _compat(
        "DEEPSEEK_API_KEY", "deepseek-chat", "https://api.deepseek.com/v1", "deepseek"
    ),
    "fireworks": _compat(
        "FIREWORKS_API_KEY",
        "accounts/fireworks/models/llama-v3p3-70b-instruct",
        "https://api.fireworks.ai/inference/v1",
        "fireworks",
    ),
    "cerebras": _compat(
        "CEREBRAS_API_KEY", "gpt-oss-120b", "https://api.cerebras.ai/v1", "cerebras"
    ),
    "perplexity": _compat(
        "PERPLEXITY_API_KEY",
        "llama-3.1-sonar-small-128k-chat",
        "https://api.perplexity.ai",
        "perplexity",
    ),
    "xai": _compat("XAI_API_KEY", "grok-3-fast", "https://api.x.ai/v1", "x_ai"),
    "sambanova": _compat(
        "SAMBANOVA_API_KEY", "DeepSeek-R1-0528", "https://api.sambanova.ai/v1", "sambanova"
    ),
    "nebius": _compat(
        "NEBIUS_API_KEY",
        "meta-llama/Meta-Llama-3.1-70B-Instruct",
        "https://api.studio.nebius.com/v1/",
        "nebius",
    ),
    "ovhcloud": _compat(
        "OVHCLOUD_API_KEY",
        "gpt-oss-120b",
        "https://oai.endpoints.kepler.ai.cloud.ovh.net/v1",
        "ovhcloud",
    ),
}

# Order is the auto-selection preference: quality/latency for a phone line first. Only the
# first block of each kind takes part in auto; compatible servers are chosen by name.
SPECS: dict[Kind, dict[str, _Spec]] = {
    "llm": {
        "openai": _compat("OPENAI_API_KEY", "gpt-4.1-mini", OPENAI_URL),
        "google": _Spec("GOOGLE_API_KEY", "gemini-2.5-flash", "livekit.plugins.google"),
        **COMPATIBLE,
    },
    "stt": {
        "deepgram": _Spec("DEEPGRAM_API_KEY", "nova-3", "livekit.plugins.deepgram"),
        "openai": _compat("OPENAI_API_KEY", "gpt-4o-mini-transcribe", OPENAI_URL),
        "google": _Spec(GOOGLE_CREDS, "latest_long", "livekit.plugins.google"),
    },
    "tts": {
        "elevenlabs": _Spec("ELEVEN_API_KEY", None, "livekit.plugins.elevenlabs"),
        "openai": _compat("OPENAI_API_KEY", "ash", OPENAI_URL),
        "google": _Spec(GOOGLE_CREDS, None, "livekit.plugins.google"),
    },
}
AUTO_ORDER: dict[Kind, tuple[str, ...]] = {
    "llm": ("openai", "google"),
    "stt": ("deepgram", "openai", "google"),
    "tts": ("elevenlabs", "openai", "google"),
}

__all__ = ["AUTO_ORDER", "COMPATIBLE", "GOOGLE_CREDS", "OPENAI_URL", "SPECS", "Kind"]
