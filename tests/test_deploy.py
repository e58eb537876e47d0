"""The Dockerfile (no Docker engine here: parsed for the steps LiveKit's templates have) and
``frontdesk download-files`` offline."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_has_the_template_steps():
    steps = _instructions()
    words = [w for w, _ in steps]
    base = next(rest for w, rest in steps if w == "FROM")
    assert base.startswith("python:") and base.endswith("-slim")
    runs = [rest for w, rest in steps if w == "RUN"]
    install = next(i for i, r in enumerate(runs) if "pip install ." in r or "uv sync" in r)
    download = next(
        i for i, r in enumerate(runs) if shlex.split(r)[:2] == ["frontdesk", "download-files"]
    )
    assert install < download  # files fetched by the installed command, at build time
    assert words.index("USER") < len(words) - 1 - words[::-1].index(
        "RUN"
    )  # unprivileged from there
    cmd = next(rest for w, rest in steps if w == "CMD")
    assert json.loads(cmd) == ["frontdesk", "start"]
    copied = " ".join(rest for w, rest in steps if w == "COPY")
    for package_dir in ("core", "agents", "db", "migrations", "plugins", "pyproject.toml"):
        assert package_dir in copied
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in ignored and ".venv" in ignored  # no secrets or local venv in the image


@pytest.mark.usefixtures("no_network")
def test_download_files_works_offline_and_says_what_it_did(monkeypatch, tmp_path):
    import typer

    from frontdesk.agents.programs import cli_deploy

    for var in ("OPENAI_API_KEY", "DEEPGRAM_API_KEY", "ELEVEN_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    app = typer.Typer()
    cli_deploy.register(app)
    app.command("noop")(lambda: None)  # typer runs a lone command without its name

    monkeypatch.setenv("FRONTDESK_LLM", "offline")
    result = CliRunner().invoke(app, ["download-files"])
    assert result.exit_code == 0 and "nothing to download" in result.output

    monkeypatch.setenv("FRONTDESK_LLM", "ollama:llama3.1")
    monkeypatch.setenv("FRONTDESK_STT", "deepgram")
    monkeypatch.setenv("FRONTDESK_TTS", "elevenlabs")
    monkeypatch.setenv("DEEPGRAM_API_KEY", "d-dummy")
    monkeypatch.setenv("ELEVEN_API_KEY", "e-dummy")
    result = CliRunner().invoke(app, ["download-files"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "livekit.plugins.openai: nothing to download (a hosted API: no local model)" in lines
    assert any(
        line.startswith(
            "livekit.plugins.silero: nothing to download (the VAD model ships in the wheel"
        )
        for line in lines
    )
    assert any(line.startswith("livekit.plugins.deepgram:") for line in lines)

    monkeypatch.setenv("FRONTDESK_TTS", "nosuch")
    result = CliRunner().invoke(app, ["download-files"])
    assert result.exit_code == 2 and "unknown TTS provider 'nosuch'" in result.output
