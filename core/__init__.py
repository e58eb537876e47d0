"""frontdesk's core: the public plugin API plus settings, the plugin host, patterns and CLI.

Plugin authors need only what this module exports::

    from frontdesk.core import hookimpl, tool, Department, ToolContext, ToolError
"""

from frontdesk.core.department import Department
from frontdesk.core.errors import ToolError
from frontdesk.core.hookspecs import hookimpl, hookspec
from frontdesk.core.tools import PATTERNS, ToolContext, ToolSpec, tool

__all__ = [
    "PATTERNS",
    "Department",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "hookimpl",
    "hookspec",
    "tool",
]
