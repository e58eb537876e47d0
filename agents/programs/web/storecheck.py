"""What is wrong with this console's store, from its files alone (db/health.py): the database
or its WAL deleted or replaced under the process, or its disk nearly full. ``/api/health``
answers it to monitors; every page shows it to the operator as a red banner."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from frontdesk.db import health as db_health


def settings_of(request: Request) -> Any:
    """The app's settings, else the environment's (``frontdesk web`` passes none): read once,
    so FRONTDESK_MIN_FREE_MB applies; a bad value there leaves the default threshold."""
    state = request.app.state
    settings = getattr(state, "settings", None) or getattr(state, "health_settings", None)
    if settings is None:
        from frontdesk.core.settings import load_settings_leniently

        settings, _ = load_settings_leniently()
        state.health_settings = settings
    return settings


def min_free(request: Request) -> int:
    return db_health.min_free_bytes(settings_of(request))


def store_problems(request: Request) -> list[str]:
    """One line per problem; empty when there is none (no query: a few ``stat`` calls)."""
    store = getattr(request.app.state, "store", None)
    if store is None:
        return []
    return db_health.problems(store, min_free(request))
