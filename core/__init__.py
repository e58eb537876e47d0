"""frontdesk's core: the public plugin API, the plugin host, settings and profile, livekit-free
execution and the runner.

Plugin authors need only what this module exports (docs/plugins.md)::

    from frontdesk.core import hookimpl, tool, Department, ToolContext, ToolError
"""

from frontdesk.core.context import CallerTasks, Database, ToolContext
from frontdesk.core.department import Department
from frontdesk.core.errors import NotCancellable, TaskNotFound, ToolError
from frontdesk.core.hookspecs import hookimpl, hookspec
from frontdesk.core.tools import PATTERNS, ToolSpec, mask_cards, tool
from frontdesk.core.wording import task_noun
from frontdesk.db.records import Task

__all__ = [
    "PATTERNS",
    "CallerTasks",
    "Database",
    "Department",
    "NotCancellable",
    "Task",
    "TaskNotFound",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "hookimpl",
    "hookspec",
    "mask_cards",
    "task_noun",
    "tool",
]
