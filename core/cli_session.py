"""Commands that run sessions: simulate, demo, console, runner, start, dev, doctor."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
