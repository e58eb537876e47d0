"""Log levels for every frontdesk process: frontdesk's own loggers at INFO, libraries at WARNING.

LiveKit's worker sets the root logger to its ``--log-level``; a library logger with its own
level keeps it, so ``frontdesk dev`` shows our INFO lines, not every aiosqlite operation.
"""

from __future__ import annotations

import logging

OURS = "frontdesk"
# Libraries that log per operation or per request below WARNING.
LIBRARIES = (
    "aiosqlite",
    "sqlalchemy",
    "asyncpg",
    "alembic",
    "asyncio",
    "httpx",
    "httpcore",
    "hpack",
    "h11",
    "h2",
    "urllib3",
    "websockets",
    "aiohttp",
    "openai",
    "anthropic",
    "google",
    "grpc",
    "deepgram",
    "elevenlabs",
    "PIL",
    "matplotlib",
    "multipart",
    "numba",
    "filelock",
    "stamina",
    "pluggy",
    "watchfiles",
)


def configure(level: int | str = logging.INFO) -> None:
    """frontdesk's loggers at ``level`` (INFO), every library in ``LIBRARIES`` at WARNING."""
    logging.getLogger(OURS).setLevel(level)
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
