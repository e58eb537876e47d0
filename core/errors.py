"""Exceptions that cross module boundaries.

They carry messages that are safe to show: a caller hears ``ToolError`` text, an operator sees
``FrontdeskError`` text on one line with exit code 2. The store's errors come from
``frontdesk.db.errors`` and are re-exported here for the layers above.
"""

from __future__ import annotations

from frontdesk.db.errors import (
    ConfigError,
    FrontdeskError,
    NotCancellable,
    StoreUnavailable,
    TaskNotFound,
)

__all__ = [
    "ConfigError",
    "FrontdeskError",
    "NotCancellable",
    "StoreUnavailable",
    "TaskNotFound",
    "ToolError",
]


class ToolError(Exception):
    """A tool failed in a way the caller may hear about; the message must be caller-safe."""
