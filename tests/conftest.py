from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("FRONTDESK_LOAD_PLUGINS", "")  # tests choose their plugins explicitly

import kit  # noqa: E402

from frontdesk.core import host  # noqa: E402
from frontdesk.core.settings import Settings  # noqa: E402
from frontdesk.db.store import TaskStore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/frontdesk.db"


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=db_url,
        load_plugins="",
        reports_path=tmp_path / "reports",
        job_lease_seconds=3,
        followup_poll_seconds=0.05,
        runner_poll_seconds=0.05,
        ack_after_seconds=0.5,
        fire_and_forget_grace_seconds=2,
    )


@pytest.fixture
def registry(settings: Settings) -> host.Registry:
    kit.calls.clear()
    kit.cleanups.clear()
    return host.load(settings, extra=[("kit", kit)])


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[TaskStore]:
    s = await TaskStore.open(db_url)
    yield s
    await s.close()


class Transcript(list):
    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self if e["type"] == kind]

    def said(self) -> list[tuple[str, str]]:
        return [(e["agent"], e["text"]) for e in self if e["type"] == "agent"]


@pytest.fixture
def transcript() -> Transcript:
    return Transcript()
