"""``frontdesk web``: the operator console (pages, JSON API, live events) and the caller page.

Importing this package is cheap: FastAPI and uvicorn load only when the app is built or the
command runs, so ``frontdesk tasks list`` pays nothing for the console.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from fastapi import FastAPI


def create_app(store_url: str, **options: Any) -> FastAPI:
    """See ``frontdesk.agents.programs.web.app.create_app``."""
    from frontdesk.agents.programs.web.app import create_app as build

    return build(store_url, **options)


def register(app: typer.Typer) -> None:
    """Add the ``web`` command to the ``frontdesk`` CLI."""
    from frontdesk.agents.programs.web.command import web

    app.command("web")(web)


__all__ = ["create_app", "register"]
