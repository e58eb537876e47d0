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
    name, a built-in's wins, otherwise the plugin loaded first; the conflict is reported.
    Return nothing.
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


@hookspec
def doctor_checks(config: Any, hook: Any) -> list[tuple[str, str]]:
    """Say what your plugin needs in order to work, for ``frontdesk doctor``.

    Called by ``frontdesk doctor`` (once, after plugins load) with ``config``, the plugin's own
    settings instance from ``register_settings`` (None if it declares none or its values are
    invalid), and ``hook``, the plugin manager's hook relay (as tools get it in ``ctx.hook``),
    to ask whether another plugin answers a hook of yours. Take only the arguments you need.
    Return a list of ``(status, message)`` pairs, status ``"ok"`` | ``"info"`` | ``"warn"`` |
    ``"error"``, about what the plugin needs (a missing service URL, a sandbox in use, demo
    data configured); an empty list (or None) says nothing. Doctor shows each pair in its
    plugins section as ``[status] <plugin>: message``, and an ``"error"`` makes it exit 1. Keep
    it quick and local: check settings and files, do not call out to services. It may be sync
    or async. Each plugin's implementation runs on its own under
    ``FRONTDESK_HOOK_TIMEOUT_SECONDS``: one that raises, hangs or returns anything but a list
    of such pairs is shown as an ``"error"`` row for that plugin, and doctor goes on. Never put
    a secret in a message.
    """


@hookspec
def register_housekeeping(register: Callable[..., None], config: Any) -> None:
    """Add periodic jobs that the runner runs for your plugin (core/housekeeping.py).

    Called once when a runner starts (``frontdesk runner``, or the one ``start``, ``simulate``
    and ``console`` embed), with ``config``, the plugin's own settings instance (None without
    one; take only the arguments you need), so an interval can be a setting. Call ``register(name, fn, every_seconds)``: ``fn`` is
    ``async fn(ctx)`` and gets a ``HousekeepingContext`` with the plugin's ``config``, a
    ``database`` (the ``Database`` tools get), the ``hook`` relay, and ``find_task(key)`` /
    ``settle_task(key, succeeded=, message=)`` to tell a caller how a tool call of theirs that
    was left in doubt ended (by the ``ctx.idempotency_key`` the tool was given). The runner
    runs each job at its start and then every ``every_seconds`` (at least 0.05). Every runner
    runs it, so a job must be safe to run twice at once (compare-and-set its writes). A job
    that raises or hangs (past four intervals, at least 30 s) is logged once per change of
    state and runs again on its interval; it never stops the runner. Return nothing.
    """
