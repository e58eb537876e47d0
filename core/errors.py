"""Exceptions that cross module boundaries.

They carry messages that are safe to show: a caller hears ``ToolError`` text, an operator sees
``FrontdeskError`` text on one line with exit code 2.
"""

from __future__ import annotations


class FrontdeskError(Exception):
    """A problem an operator can fix: bad configuration, an unknown id, an unreadable file."""


class ConfigError(FrontdeskError):
    """Settings that cannot work, such as a malformed database URL."""


class ToolError(Exception):
    """A tool failed in a way the caller may hear about; the message must be caller-safe."""


class TaskNotFound(FrontdeskError):
    def __init__(self, task_id: object) -> None:
        super().__init__(f"task {task_id} not found")
        self.task_id = task_id
