"""Provider selection and the full provider matrix, built with dummy keys and never called."""

from __future__ import annotations

import pytest

from frontdesk.agents import provider_build, providers
from frontdesk.core.errors import ConfigError
from frontdesk.core.settings import Settings

pytestmark = pytest.mark.usefixtures("no_network")

ALL_KEYS = (
    "OPENAI_BASE_URL",
    "LIVEKIT_URL",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DEEPGRAM_API_KEY",
    "ELEVEN_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for key in ALL_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    return monkeypatch


@pytest.fixture
def google_creds(tmp_path):
    # Constructing the Google STT/TTS only records the path; the file is read on first use.
    path = tmp_path / "service-account.json"
    path.write_text('{"type": "service_account"}')
    return str(path)


@pytest.fixture
def all_keys(clean_env, google_creds):
    env = {
        "OPENAI_API_KEY": "sk-dummy",
        "GOOGLE_API_KEY": "g-dummy",
        "GOOGLE_APPLICATION_CREDENTIALS": google_creds,
        "DEEPGRAM_API_KEY": "dg-dummy",
        "ELEVEN_API_KEY": "el-dummy",
    }
    for k, v in env.items():
        clean_env.setenv(k, v)
    return env


# -- selection ------------------------------------------------------------------------------


def test_auto_with_no_keys_is_offline_text(clean_env):
    choices = providers.select_all(Settings(), {})
    assert choices.llm.provider == "offline"
    assert choices.stt.provider == "none" and choices.tts.provider == "none"
    assert not choices.voice
    assert "OPENAI_API_KEY" in choices.llm.reason and "GOOGLE_API_KEY" in choices.llm.reason


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {"OPENAI_API_KEY": "x"},
            ("openai:gpt-4.1-mini", "openai:gpt-4o-mini-transcribe", "openai:ash"),
        ),
        ({"GOOGLE_API_KEY": "x"}, ("google:gemini-2.5-flash", "none", "none")),
        (
            {"DEEPGRAM_API_KEY": "x", "ELEVEN_API_KEY": "y"},
            ("offline", "deepgram:nova-3", "elevenlabs"),
        ),
        (
            {"OPENAI_API_KEY": "x", "DEEPGRAM_API_KEY": "y", "ELEVEN_API_KEY": "z"},
            ("openai:gpt-4.1-mini", "deepgram:nova-3", "elevenlabs"),
        ),
    ],
)
def test_auto_prefers_what_keys_allow(clean_env, env, expected):
    choices = providers.select_all(Settings(), env)
    assert tuple(c.label() for c in choices) == expected
    for c in choices:
        if c.enabled:
            assert c.reason.startswith("auto:") and c.key_env in c.reason


def test_auto_google_speech_needs_an_existing_credentials_file(clean_env, google_creds):
    assert (
        providers.select("stt", "auto", {"GOOGLE_APPLICATION_CREDENTIALS": "/nope.json"}).provider
        == "none"
    )
    assert (
        providers.select("stt", "auto", {"GOOGLE_APPLICATION_CREDENTIALS": google_creds}).provider
        == "google"
    )


def test_explicit_forms():
    env = {
        "OPENAI_API_KEY": "k",
        "GOOGLE_API_KEY": "k",
        "DEEPGRAM_API_KEY": "k",
        "ELEVEN_API_KEY": "k",
    }
    assert providers.select("llm", "openai:gpt-4.1-mini", env).model == "gpt-4.1-mini"
    assert providers.select("llm", "google:gemini-2.5-flash", env).model == "gemini-2.5-flash"
    assert providers.select("llm", "openai", env).model == "gpt-4.1-mini"
    assert providers.select("stt", "deepgram:nova-3", env).model == "nova-3"
    assert providers.select("tts", "elevenlabs:VOICE42", env).voice == "VOICE42"
    assert providers.select("tts", "openai:coral", env).voice == "coral"
    assert providers.select("llm", "offline", env).provider == "offline"
    assert providers.select("stt", "none", env).provider == "none"
    assert providers.select("tts", "offline", env).provider == "none"  # offline = text for TTS


@pytest.mark.parametrize(
    "kind, value, var",
    [
        ("llm", "openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("llm", "google:gemini-2.5-flash", "GOOGLE_API_KEY"),
        ("stt", "deepgram:nova-3", "DEEPGRAM_API_KEY"),
        ("stt", "google", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("tts", "elevenlabs:abc", "ELEVEN_API_KEY"),
        ("tts", "openai", "OPENAI_API_KEY"),
    ],
)
def test_missing_key_is_one_clear_message(kind, value, var):
    with pytest.raises(ConfigError) as err:
        providers.select(kind, value, {})
    message = str(err.value)
    assert "\n" not in message
    assert var in message and f"FRONTDESK_{kind.upper()}={value}" in message
    assert "auto" in message and providers.OFFLINE[kind] in message  # the alternatives


def test_unknown_provider_lists_options():
    with pytest.raises(
        ConfigError,
        match="unknown LLM provider 'anthropic'.*openai, google, ollama, .*offline, auto",
    ):
        providers.select("llm", "anthropic:claude", {})


def test_settings_values_flow_through(clean_env):
    clean_env.setenv("FRONTDESK_LLM", "offline")
    clean_env.setenv("FRONTDESK_TTS", "elevenlabs:V1")
    with pytest.raises(ConfigError, match="ELEVEN_API_KEY"):
        providers.select_all(Settings(), {"OPENAI_API_KEY": "x"})
    choices = providers.select_all(Settings(), {"OPENAI_API_KEY": "x", "ELEVEN_API_KEY": "y"})
    assert choices.llm.provider == "offline" and choices.tts.label() == "elevenlabs:V1"


def test_dotenv_keys_and_urls_are_seen(clean_env, tmp_path):
    (tmp_path / ".env").write_text(
        "OPENAI_API_KEY=sk-from-dotenv\nOPENAI_BASE_URL=http://gpu-box:8000/v1\n"
        "GROQ_API_KEY=gsk-dotenv\nLIVEKIT_URL=wss://x.livekit.cloud\nUNRELATED=1\n"
    )
    env = providers.provider_env()
    assert env == {
        "OPENAI_API_KEY": "sk-from-dotenv",
        "OPENAI_BASE_URL": "http://gpu-box:8000/v1",
        "GROQ_API_KEY": "gsk-dotenv",
        "LIVEKIT_URL": "wss://x.livekit.cloud",
    }
    # The URL from .env reaches the client, not only the process environment.
    llm = provider_build.build_llm(providers.select("llm", "openai:m", env), env)
    assert str(llm._client.base_url) == "http://gpu-box:8000/v1/"
    assert llm._client.api_key == "sk-from-dotenv"
    assert providers.export_livekit_env() == ["LIVEKIT_URL"]  # keys go to plugins explicitly
    import os

    assert os.environ["LIVEKIT_URL"] == "wss://x.livekit.cloud" and "GROQ_API_KEY" not in os.environ
    clean_env.setenv("OPENAI_API_KEY", "sk-real")  # the environment wins over .env
    assert providers.provider_env()["OPENAI_API_KEY"] == "sk-real"


def test_choices_repr_hides_keys():
    choices = providers.select_all(Settings(llm="openai"), {"OPENAI_API_KEY": "sk-SECRET123"})
    assert "sk-SECRET123" not in repr(choices)


# -- the matrix: real plugin objects, dummy keys, no calls -------------------------------------


def test_llm_matrix(all_keys):
    from livekit.plugins import google, openai

    env = providers.provider_env()
    o = provider_build.build_llm(providers.select("llm", "openai:gpt-4.1-mini", env), env)
    assert isinstance(o, openai.LLM) and o.model == "gpt-4.1-mini"
    o2 = provider_build.build_llm(providers.select("llm", "openai:gpt-4o", env), env)
    assert o2.model == "gpt-4o"
    g = provider_build.build_llm(providers.select("llm", "google:gemini-2.5-flash", env), env)
    assert isinstance(g, google.LLM) and g.model == "gemini-2.5-flash"


def test_stt_matrix(all_keys, google_creds):
    from livekit.plugins import deepgram, google, openai

    env = providers.provider_env()
    d = provider_build.build_stt(providers.select("stt", "deepgram:nova-3", env), env)
    assert isinstance(d, deepgram.STT) and d.model == "nova-3"
    o = provider_build.build_stt(providers.select("stt", "openai", env), env)
    assert isinstance(o, openai.STT) and o.model == "gpt-4o-mini-transcribe"
    g = provider_build.build_stt(providers.select("stt", "google", env), env)
    assert isinstance(g, google.STT) and g.model == "latest_long"
    assert g._credentials_file == google_creds  # explicit file: no default-credentials probe
    assert provider_build.build_stt(providers.select("stt", "none", env), env) is None


def test_tts_matrix(all_keys):
    from livekit.plugins import elevenlabs, google, openai

    env = providers.provider_env()
    e = provider_build.build_tts(providers.select("tts", "elevenlabs:VOICE42", env), env)
    assert isinstance(e, elevenlabs.TTS) and e._opts.voice_id == "VOICE42"
    assert e.model == "eleven_turbo_v2_5"
    e_default = provider_build.build_tts(providers.select("tts", "elevenlabs", env), env)
    assert e_default._opts.voice_id == elevenlabs.tts.DEFAULT_VOICE_ID
    o = provider_build.build_tts(providers.select("tts", "openai:coral", env), env)
    assert isinstance(o, openai.TTS) and o._opts.voice == "coral" and o.model == "gpt-4o-mini-tts"
    g = provider_build.build_tts(providers.select("tts", "google:en-US-Chirp3-HD-Puck", env), env)
    assert isinstance(g, google.TTS) and g._opts.voice.name == "en-US-Chirp3-HD-Puck"
    assert g.model == "chirp_3"  # the plugin picks chirp_3 for a Chirp 3 voice
    assert provider_build.build_tts(providers.select("tts", "none", env), env) is None


def test_vad_loads_from_the_wheel():
    from livekit.plugins import silero

    assert isinstance(provider_build.build_vad(), silero.VAD)


async def test_build_all_gives_agent_session_kwargs(all_keys, monkeypatch):
    from livekit.agents import AgentSession, llm
    from livekit.plugins import openai

    # AgentSession opens the LLM's connection early (openai: GET /models); not in tests.
    monkeypatch.setattr(openai.LLM, "_prewarm_impl", llm.LLM._prewarm_impl)

    settings = Settings(llm="openai", stt="deepgram", tts="elevenlabs")
    built = provider_build.build(providers.select_all(settings), vad=None)
    kwargs = built.session_kwargs()
    assert set(kwargs) == {"llm", "stt", "tts", "vad", "conn_options", "turn_handling"}
    assert kwargs["vad"] is not None
    assert kwargs["conn_options"].llm_conn_options.max_retry == 1  # fewer than LiveKit's 3
    session = AgentSession(**kwargs)  # accepted as is
    # the STT hears the caller over a critical result (their words are answered after it)
    assert session.options.interruption["discard_audio_if_uninterruptible"] is False
    assert session.options.interruption["min_duration"] == 0.5  # LiveKit's defaults otherwise

    text_only = provider_build.build(
        providers.select_all(Settings(llm="openai", stt="none", tts="none"))
    )
    assert set(text_only.session_kwargs()) == {"llm", "conn_options"}
    AgentSession(**text_only.session_kwargs())


def test_offline_llm_is_the_brain(clean_env):
    brain = pytest.importorskip("frontdesk.agents.brain")  # the lead's module
    llm = provider_build.build_llm(providers.select("llm", "offline", {}), {})
    assert isinstance(llm, brain.OfflineBrain)


def test_import_plugins_lists_the_needed_modules(all_keys):
    choices = providers.select_all(Settings(llm="openai", stt="deepgram", tts="openai"))
    assert providers.import_plugins(choices) == [
        "livekit.plugins.openai",
        "livekit.plugins.deepgram",
    ]
