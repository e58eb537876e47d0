"""How a command ends: operator errors become one line on stderr and exit code 2."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import wraps
from typing import Any, TypeVar

import typer

from frontdesk.core.errors import FrontdeskError

T = TypeVar("T")


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine, turning operator errors into one line and exit code 2."""
    try:
        return asyncio.run(coro)
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def operator_errors(fn: Callable[..., T]) -> Callable[..., T]:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except FrontdeskError as exc:
            raise fail(str(exc)) from None

    return wrapper
