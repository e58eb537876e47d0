"""The store's errors. Their messages are safe to show an operator (one line, exit code 2);
``FrontdeskError`` is the base every layer above raises too, so it is defined at the bottom."""

from __future__ import annotations

from typing import Any


class FrontdeskError(Exception):
    """A problem an operator can fix: bad configuration, an unknown id, an unreadable file."""


class ConfigError(FrontdeskError):
    """Settings that cannot work, such as a malformed database URL."""


class TaskNotFound(FrontdeskError):
    def __init__(self, task_id: object) -> None:
        super().__init__(f"task {task_id} not found")
        self.task_id = task_id


class StoreUnavailable(FrontdeskError):
    """The database cannot be reached or opened."""


class NotCancellable(FrontdeskError):
    """``reason`` is "not background" (only background jobs can be cancelled) or "finished"."""

    def __init__(self, task: Any, reason: str) -> None:
        self.task = task
        self.reason = reason
        if reason == "finished":
            message = f"task {task.id} already {task.status}"
        else:
            message = f"task {task.id} is {task.pattern}; only background jobs can be cancelled"
        super().__init__(message)


class NotRetryable(FrontdeskError):
    """``reason`` is "not background" (only the runner's jobs can run again) or "not failed"."""

    def __init__(self, task: Any, reason: str) -> None:
        self.task = task
        self.reason = reason
        if reason == "not background":
            message = f"task {task.id} is {task.pattern}; only background jobs can be retried"
        else:
            message = f"task {task.id} is {task.status}; only a failed job can be retried"
        super().__init__(message)
