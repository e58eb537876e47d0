"""``frontdesk download-files``: fetch what the configured plugins need before the first call.

LiveKit's agent templates run this in the image build, so a container starts without
downloads. The Silero VAD model ships in its wheel (nothing to fetch); each configured livekit
plugin that overrides ``Plugin.download_files`` is asked to fetch its files. With nothing to
fetch it makes no network request, so it works offline, and it says what it did.
"""

from __future__ import annotations

import typer

from frontdesk.agents.programs.exits import fail
from frontdesk.core.errors import FrontdeskError
from frontdesk.core.settings import Settings


def download_files() -> None:
    """Fetch the model files the configured providers need (run it in an image build)."""
    from frontdesk.agents import providers

    try:
        choices = providers.select_all(Settings())
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    modules = providers.import_plugins(choices)
    if choices.stt.enabled and "livekit.plugins.silero" not in modules:
        import livekit.plugins.silero  # noqa: F401  (the VAD every voice call loads)

        modules.append("livekit.plugins.silero")
    from livekit.agents import Plugin

    if not modules:
        typer.echo("nothing to download: the offline brain in text needs no provider files")

    for plugin in Plugin.registered_plugins:
        if plugin.package not in modules:
            continue
        if type(plugin).download_files is Plugin.download_files:
            typer.echo(f"{plugin.package}: nothing to download{_why(plugin.package)}")
            continue
        try:
            plugin.download_files()
        except Exception as exc:
            raise fail(f"{plugin.package}: download failed: {type(exc).__name__}: {exc}") from None
        typer.echo(f"{plugin.package}: files downloaded")


def _why(package: str) -> str:
    if package == "livekit.plugins.silero":
        from importlib import resources

        model = resources.files("livekit.plugins.silero.resources") / "silero_vad.onnx"
        return f" (the VAD model ships in the wheel: {model})" if model.is_file() else ""
    return " (a hosted API: no local model)"


def register(app: typer.Typer) -> None:
    app.command("download-files")(download_files)
