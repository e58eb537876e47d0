"""Every hook a frontdesk plugin can implement. Each docstring is the hook's contract.

Plugins implement hooks with ``@frontdesk.core.hookimpl``; built-ins in ``frontdesk.plugins``
use exactly the same hooks. Hooks are called one plugin at a time so that a plugin that raises
or registers something invalid is reported and left out without affecting the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("frontdesk")
hookimpl = pluggy.HookimplMarker("frontdesk")


@hookspec
def register_departments(register: Callable[..., None]) -> None:
    """Add departments the caller can be transferred to.

    Called once per process when the plugin host builds its registry (in prewarm for a worker,
    at start for the CLI). Call ``register(Department(...))`` for each department; the
    department's ``tools`` are registered with it. Triage gets a ``transfer_to_<name>`` tool
    for each, generated from the name and description. Return nothing.
    """


@hookspec
def register_tools(register: Callable[..., None]) -> None:
    """Add tools to departments, including departments other plugins registered.

    Called once per process after every plugin's ``register_departments``. Call
    ``register(tool_spec, departments=["search", ...])``; ``"*"`` means every department,
    triage included. The tool must come from ``@tool``. If two plugins register the same tool
    name the first registration wins and the conflict is reported. Return nothing.
    """


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``frontdesk`` CLI.

    Called when the CLI starts, with the root ``typer.Typer`` app. Add commands with
    ``@cli.command()`` or sub-apps with ``cli.add_typer(...)``. Return nothing.
    """


@hookspec
def register_settings(register: Callable[..., None]) -> None:
    """Declare the plugin's own settings.

    Call ``register(MySettings)`` with a ``pydantic_settings.BaseSettings`` subclass (at most
    one per plugin). frontdesk fills it from ``FRONTDESK_<PLUGIN>_<FIELD>`` variables (the
    plugin's name upper-cased, ``-`` as ``_``), then ``.env``, then the profile's
    ``[plugins.<name>]`` table, validates it when plugins load, and hands the instance to the
    plugin's tools as ``ctx.config`` and to ``frontdesk doctor``. A bad value is one line naming
    the variable (or the profile key); the commands that run calls refuse to start on it.
    Fields whose name contains ``key``, ``secret``, ``token`` or ``password`` are never
    printed. Return nothing.
    """


@hookspec
def register_migrations(register: Callable[..., None]) -> None:
    """Ship the plugin's own tables.

    Call ``register(path)`` with the plugin's Alembic versions folder (a ``Path``, usually
    ``Path(__file__).parent / "migrations"``). Its first revision has ``down_revision = None``
    and ``branch_labels = ("<plugin name>",)``; revision ids must be unique across plugins, so
    prefix them with the plugin's name. The branch keeps its own version table
    (``alembic_version_<plugin>``): ``frontdesk db upgrade`` takes core and every loaded
    plugin's branch to its head, and ``db current`` shows each. Read and write the tables with
    ``ctx.database``. Return nothing.
    """


@hookspec
def on_task_event(event: Any) -> None:
    """Observe every task transition, after it is committed.

    Called with a ``TaskEvent`` (task id, caller, tool, plugin, department,
    status, note, progress, at) for every state change, in every process. It runs in the
    background: it may be sync or async, its return value is ignored, and if it raises or
    hangs past ``FRONTDESK_HOOK_TIMEOUT_SECONDS`` the error is logged and the call goes on.
    """
