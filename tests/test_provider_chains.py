"""Chains, OpenAI-compatible servers and the live check, against a fake OpenAI-compatible
server on loopback (tests/fakeoai.py): the real openai plugin and httpx, real HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fakeoai import FakeOpenAI, dead_url

from frontdesk.agents import provider_build, providers
from frontdesk.core.errors import ConfigError
from frontdesk.core.settings import ProviderEnv, Settings

FAST = provider_build.Retries(max_retry=0, retry_interval=0.05, timeout=3.0)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def loopback_only(monkeypatch):
    """Like no_network, but 127.0.0.1 is allowed: the fake server lives there."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo
    attempts: list[object] = []

    def getaddrinfo(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost"):
            attempts.append(host)
            raise OSError(f"network disabled in tests: {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
            attempts.append(address)
            raise OSError(f"network disabled in tests: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    yield attempts
    assert not attempts, f"the test tried to reach the network: {attempts}"


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


async def _tool_turn(value: str, env: dict[str, str]) -> tuple[list[str], list[str]]:
    """One text turn in a real AgentSession whose LLM is built from ``value``; returns the
    tool calls the agent ran and what it said."""
    from livekit.agents import Agent, AgentSession, function_tool

    ran: list[str] = []

    @function_tool
    async def room_status(room: str) -> str:
        """Whether a room is free."""
        ran.append(room)
        return f"room {room} is free"

    chain = providers.select("llm", value, env)
    built = provider_build.Providers(
        providers.Choices(
            chain, providers.select("stt", "none", {}), providers.select("tts", "none", {}), env
        ),
        llm=provider_build.build_llm(chain, env, FAST),
        retries=FAST,
    )
    session = AgentSession(**built.session_kwargs())
    await session.start(Agent(instructions="You are a hotel desk.", tools=[room_status]))
    try:
        result = await session.run(user_input="Is room 12 free?")
    finally:
        await session.aclose()
    said = [ev.item.text_content for ev in result.events if ev.type == "message"]
    return ran, said


@pytest.mark.parametrize("provider", ["openai", "ollama"])
async def test_a_tool_call_through_a_compatible_server_without_a_key(
    loopback_only, server, provider
):
    server.script.extend(
        [{"tool": "room_status", "arguments": {"room": "12"}}, {"text": "Room 12 is free."}]
    )
    ran, said = await _tool_turn(f"{provider}:fake-model@{server.url}", {})
    assert ran == ["12"]
    assert [s.strip() for s in said] == ["Room 12 is free."]
    chats = server.chat_requests()
    assert len(chats) == 2 and chats[0]["model"] == "fake-model" and chats[0]["stream"]
    assert chats[0]["tools"][0]["function"]["name"] == "room_status"
    assert chats[1]["messages"][-1]["role"] == "tool"  # the tool's output went back
    # No key configured: a placeholder, never another provider's key.
    placeholder = "Bearer ollama" if provider == "ollama" else f"Bearer {providers.NO_KEY}"
    assert {r["auth"] for r in server.requests} == {placeholder}


async def test_a_chain_whose_first_entry_is_down_answers_from_the_second(loopback_only, server):
    server.script.extend(
        [{"tool": "room_status", "arguments": {"room": "7"}}, {"text": "Room 7 is free."}]
    )
    ran, said = await _tool_turn(f"openai:m@{dead_url()},ollama:fake-model@{server.url}", {})
    assert ran == ["7"] and [s.strip() for s in said] == ["Room 7 is free."]


def test_a_chain_builds_livekit_fallback_adapters(loopback_only):
    from livekit.agents import llm, stt, tts

    env = {
        "OPENAI_API_KEY": "sk-dummy",
        "GOOGLE_API_KEY": "g-dummy",
        "DEEPGRAM_API_KEY": "d",
        "ELEVEN_API_KEY": "e",
    }
    built = provider_build.build(
        providers.select_all(
            Settings(
                llm="openai:gpt-4.1-mini,google:gemini-2.5-flash",
                stt="deepgram,openai",
                tts="elevenlabs,openai",
            ),
            env,
        ),
        settings=Settings(provider_max_retry=2),
    )
    assert isinstance(built.llm, llm.FallbackAdapter) and len(provider_build.inner(built.llm)) == 2
    assert built.llm._max_retry_per_llm == 2
    assert isinstance(built.stt, stt.FallbackAdapter)  # OpenAI STT is wrapped with the VAD
    assert isinstance(built.tts, tts.FallbackAdapter)
    # The chain retries inside its adapter; the session does not retry the chain on top.
    assert built.session_kwargs()["conn_options"].llm_conn_options.max_retry == 0
    assert built.describe(provider_build.inner(built.llm)[1]) == "google:gemini-2.5-flash"


@pytest.mark.parametrize(
    "name, key_var, factory_url",
    [
        ("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1/"),
        ("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1/"),
        ("together", "TOGETHER_API_KEY", "https://api.together.xyz/v1/"),
        ("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com/v1/"),
        ("fireworks", "FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1/"),
        ("cerebras", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1/"),
        ("perplexity", "PERPLEXITY_API_KEY", "https://api.perplexity.ai/"),
        ("xai", "XAI_API_KEY", "https://api.x.ai/v1/"),
        ("sambanova", "SAMBANOVA_API_KEY", "https://api.sambanova.ai/v1/"),
        ("nebius", "NEBIUS_API_KEY", "https://api.studio.nebius.com/v1/"),
        ("ovhcloud", "OVHCLOUD_API_KEY", "https://oai.endpoints.kepler.ai.cloud.ovh.net/v1/"),
    ],
)
def test_hosted_compatible_providers_need_their_own_key(loopback_only, name, key_var, factory_url):
    with pytest.raises(ConfigError, match=key_var):
        providers.select("llm", f"{name}:some-model", {"OPENAI_API_KEY": "sk-other"})
    env = {key_var: "k-dummy"}
    llm = provider_build.build_llm(providers.select("llm", f"{name}:some-model", env), env)
    assert (
        str(llm._client.base_url).rstrip("/") == factory_url.rstrip("/")
        and llm._client.api_key == "k-dummy"
    )
    assert llm.model == "some-model"
    assert key_var.lower() in ProviderEnv.model_fields  # readable from .env too


def test_every_key_variable_is_a_setting():
    for var in (*providers.KEY_VARS, *providers.URL_VARS, *providers.LIVEKIT_VARS):
        assert var.lower() in ProviderEnv.model_fields, var


def test_ollama_defaults_and_vllm_needs_a_model():
    assert providers.select("llm", "ollama", {}).primary.base_url == "http://localhost:11434/v1"
    assert providers.select("llm", "ollama", {}).model == "llama3.1"
    with pytest.raises(ConfigError, match="vllm needs a model"):
        providers.select("llm", "vllm", {})
    assert providers.select("llm", "vllm:qwen", {}).primary.base_url == "http://localhost:8000/v1"


def test_openai_on_openais_host_still_needs_the_key():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        providers.select("llm", "openai:gpt-4.1-mini", {})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        providers.select("llm", "openai:gpt-4.1-mini@https://api.openai.com/v1", {})
    assert providers.select("llm", "openai:m@http://gpu-box:8000/v1", {}).primary.key_env is None


@pytest.mark.parametrize(
    "env, llm",
    [
        ({"OPENAI_API_KEY": "dummy", "OPENAI_BASE_URL": "http://localhost:8000/v1"}, "auto"),
        ({"OPENAI_API_KEY": "dummy"}, "openai:llama@http://gpu-box:8000/v1"),
    ],
)
def test_auto_never_picks_speech_on_a_chat_only_url(env, llm):
    choices = providers.select_all(Settings(llm=llm), env)
    assert choices.llm.provider == "openai"
    assert choices.stt.provider == "none" and choices.tts.provider == "none"
    assert "chat server" in choices.stt.reason
    with_deepgram = providers.select_all(Settings(llm=llm), {**env, "DEEPGRAM_API_KEY": "d"})
    assert with_deepgram.stt.provider == "deepgram"


@pytest.mark.parametrize(
    "value, message",
    [
        ("openai:m,auto", "cannot be part of a chain"),
        ("deepgram:nova-3@http://x/v1", None),
        ("ollama:m@ftp://x", "not an http"),
        ("google:gemini@http://x/v1", "takes no @base_url"),
    ],
)
def test_bad_chains_are_one_line(value, message):
    kind = "stt" if value.startswith("deepgram") else "llm"
    with pytest.raises(ConfigError) as err:
        providers.select(
            kind, value, {"DEEPGRAM_API_KEY": "d", "GOOGLE_API_KEY": "g", "OPENAI_API_KEY": "o"}
        )
    assert "\n" not in str(err.value)
    if message:
        assert message in str(err.value)


def test_a_url_with_a_password_is_never_shown():
    chain = providers.select(
        "llm", "ollama:m@http://user:pw-SECRET@gpu-box:11434/v1?key=q-SECRET", {}
    )
    text = f"{chain.primary.describe()} {chain.reason}"
    assert "SECRET" not in text and "gpu-box:11434/v1" in text


# -- doctor --check, as a real subprocess ---------------------------------------------------


def _frontdesk(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    clean.update(
        FRONTDESK_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/fd.db",
        FRONTDESK_LOAD_PLUGINS="",
        FRONTDESK_STT="none",
        FRONTDESK_TTS="none",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "frontdesk.agents.programs", *args],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _check_lines(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("check")
    return [line for line in lines[start + 1 :] if line.startswith("  [")]


def test_doctor_check_tells_the_live_server_from_the_dead_one(tmp_path, server):
    dead = dead_url()
    ok = _frontdesk(tmp_path, "doctor", "--check", FRONTDESK_LLM=f"ollama:m@{server.url}")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert _check_lines(ok.stdout) == [
        f"  [ok  ] LLM ollama:m@{server.url}: ok (HTTP 200 from {server.url}/models)"
    ]

    both = _frontdesk(
        tmp_path, "doctor", "--check", FRONTDESK_LLM=f"ollama:m@{server.url},openai:m@{dead}"
    )
    assert both.returncode == 1 and "Traceback" not in both.stderr
    lines = _check_lines(both.stdout)
    assert len(lines) == 2 and lines[0].startswith("  [ok  ] LLM ollama:m@")
    assert lines[1].startswith(f"  [FAIL] LLM openai:m@{dead}: cannot reach {dead}/models")
    assert [r["path"] for r in server.requests] == ["/v1/models", "/v1/models"]


def test_doctor_check_reports_a_refused_key_without_printing_it(tmp_path):
    with FakeOpenAI(key="sk-right-key") as keyed:
        out = _frontdesk(
            tmp_path,
            "doctor",
            "--check",
            FRONTDESK_LLM=f"openai:m@{keyed.url}",
            OPENAI_API_KEY="sk-WRONG-0042",
        )
        assert keyed.requests[0]["auth"] == "Bearer sk-WRONG-0042"  # authenticated, to that host
    assert out.returncode == 1
    (line,) = _check_lines(out.stdout)
    assert "HTTP 401, key refused: Incorrect API key provided" in line
    assert "WRONG" not in out.stdout + out.stderr and "0042" not in out.stdout


# -- the caller hears an apology when every LLM is down ----------------------------------


def test_every_llm_down_the_caller_hears_an_apology_and_no_traceback(tmp_path):
    from frontdesk.agents.provider_failures import APOLOGY, GOODBYE

    dead = dead_url()
    proc = subprocess.run(
        [sys.executable, "-m", "frontdesk.agents.programs", "console", "--text"],
        input="hello\nare you there?\nhello?\nnever read\n",
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))},
            "FRONTDESK_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/fd.db",
            "FRONTDESK_LOAD_PLUGINS": "",
            "FRONTDESK_LLM": f"openai:m@{dead},ollama:m@{dead}",
            "FRONTDESK_PROVIDER_MAX_RETRY": "0",
            "FRONTDESK_PROVIDER_RETRY_INTERVAL_SECONDS": "0",
            "COLUMNS": "400",
        },
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    said = [
        line.split("> ", 1)[1]
        for line in proc.stdout.splitlines()
        if line.startswith(("triage> ", "you> triage> "))
    ]
    said = [s.removeprefix("triage> ") for s in said]
    assert said[-3:] == [APOLOGY, APOLOGY, GOODBYE]  # the third failure in a row ends the call
    assert "Traceback" not in proc.stderr and "APIConnectionError" in proc.stderr
    failures = [line for line in proc.stderr.splitlines() if "LLM failed" in line]
    assert len(failures) == 3 and len(proc.stderr.splitlines()) == 3, proc.stderr
    assert f"openai:m@{dead}" in failures[0] and f"ollama:m@{dead}" in failures[0]


def test_livekit_provider_tracebacks_are_quiet_unless_debugging():
    import logging

    from livekit.agents import APIConnectionError

    from frontdesk.agents.provider_failures import quiet_provider_noise

    quiet_provider_noise()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    lk = logging.getLogger("livekit.agents")
    handler, level = Keep(), lk.level
    lk.addHandler(handler)
    try:
        for debug in (False, True):
            lk.setLevel(logging.DEBUG if debug else logging.INFO)
            try:
                raise APIConnectionError("Connection error.")
            except APIConnectionError:
                lk.exception("Error in _llm_inference_task")
            lk.warning("failed to generate LLM completion, retrying in 2s")
            lk.warning("an unrelated warning")
        assert [r.getMessage() for r in records] == [
            "an unrelated warning",
            "Error in _llm_inference_task",
            "failed to generate LLM completion, retrying in 2s",
            "an unrelated warning",
        ]
    finally:
        lk.removeHandler(handler)
        lk.setLevel(level)
