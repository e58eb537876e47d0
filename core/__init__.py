"""frontdesk's core: the public plugin API, the plugin host, settings and profile, livekit-free
execution and the runner.

Plugin authors need only what this module exports (docs/plugins.md), and
``frontdesk.testing`` in their tests::

    from frontdesk.core import hookimpl, tool, Department, ToolContext, ToolError
"""

from frontdesk.core.context import CallerTasks, Database, ToolContext
from frontdesk.core.department import Department
from frontdesk.core.errors import NotCancellable, TaskNotFound, ToolError
from frontdesk.core.hookspecs import hookimpl, hookspec
from frontdesk.core.tools import PATTERNS, ToolSpec, mask_cards, tool
from frontdesk.core.wording import task_noun

__all__ = [
    "PATTERNS",
    "CallerTasks",
    "Database",
    "Department",
    "HousekeepingContext",
    "NotCancellable",
    "Task",
    "TaskNotFound",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "hookimpl",
    "hookspec",
    "mask_cards",
    "plugin_config",
    "task_noun",
    "tool",
]


def __getattr__(name: str) -> object:
    # ``Task`` is the store's record; importing it loads SQLAlchemy, which a plugin's module
    # level and the CLI's fast commands should not pay for until they use it; the same for
    # ``plugin_config``'s pydantic-settings.
    if name == "Task":
        from frontdesk.db.records import Task

        return Task
    if name == "HousekeepingContext":  # the runner's side; a tool module need not load it
        from frontdesk.core.housekeeping import HousekeepingContext

        return HousekeepingContext
    if name == "plugin_config":  # pydantic-settings and the profile reader, only when used
        from frontdesk.core.plugin_settings import plugin_config

        return plugin_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
