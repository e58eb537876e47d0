from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# Tests choose their plugins explicitly: whatever is installed in the environment (a plugin
# being developed, a broken one) never loads unless a test asks, even if the shell set this.
os.environ["FRONTDESK_LOAD_PLUGINS"] = ""

import kit  # noqa: E402
import pgtest  # noqa: E402

from frontdesk.core import host  # noqa: E402
from frontdesk.core.schema import open_store  # noqa: E402
from frontdesk.core.settings import Settings  # noqa: E402
from frontdesk.db.store import TaskStore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# -- hypothesis profiles (issue 16, item 21; added by the CLI helper) ---------------------------
# "ci" is derandomized: the same examples on every run, so a CI failure reproduces. .ci/run sets
# HYPOTHESIS_PROFILE=ci; a developer's run keeps hypothesis' random search.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
# -- end of hypothesis profiles ------------------------------------------------------------------
DEMO = ROOT / "examples" / "demo"  # the demo business: profile, knowledge base, invoices


BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names): run on each named database backend (sqlite, postgres); "
        "db_url, settings and store follow the backend",
    )
    config.addinivalue_line(
        "markers",
        "slow_trial: a minute-long trial that .ci/run runs with FRONTDESK_SLOW_TRIALS=1; "
        "otherwise deselected (not skipped, so a required Postgres run does not count it)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("FRONTDESK_SLOW_TRIALS"):
        return
    slow = [item for item in items if item.get_closest_marker("slow_trial")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow_trial")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.backends("sqlite", "postgres")`` (on a test or a module) runs a test once
    per backend; unmarked tests keep the single SQLite ``db_url``."""
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None or "db_url" not in metafunc.fixturenames:
        return
    unknown = set(marker.args) - set(BACKENDS)
    assert not unknown, f"unknown backend(s) {unknown}"
    metafunc.parametrize(
        "db_url",
        [
            pytest.param(name, id=name, marks=[pytest.mark.postgres] if name == "postgres" else [])
            for name in marker.args
        ],
        indirect=True,
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    # .ci/run sets FRONTDESK_REQUIRE_POSTGRES=1: there a skipped Postgres test is a failure,
    # so a broken server setup cannot pass CI silently.
    report = yield
    if report.skipped and pgtest.required() and item.get_closest_marker("postgres"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{pgtest.ENV_REQUIRE}=1 but this Postgres test was skipped: {reason}"
    return report


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if getattr(request, "param", "sqlite") != "postgres":
        yield f"sqlite+aiosqlite:///{tmp_path}/frontdesk.db"
        return
    problem = pgtest.check_server()
    if problem is not None:
        pytest.skip(problem)
    with pgtest.fresh_database(request.node.name.split("[")[0][5:]) as url:
        yield url


@pytest.fixture(autouse=True)
def _plugin_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Plugins' own settings come from FRONTDESK_<PLUGIN>_* (register_settings): keep what a
    # test writes inside its tmp_path, and read no developer's profile.
    monkeypatch.setenv("FRONTDESK_REPORTS_PATH", str(tmp_path / "reports"))
    monkeypatch.delenv("FRONTDESK_PROFILE", raising=False)
    # The calls under test are the demo's: every new caller opens with its three invoices
    # (billing's seed_invoices; a deployment's ledger starts empty), paid to the demo's payee.
    monkeypatch.setenv("FRONTDESK_BILLING_SEED_INVOICES", str(DEMO / "invoices.toml"))
    monkeypatch.setenv("FRONTDESK_BILLING_PAYEE", "Harbor Light Hotel")


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=db_url,
        load_plugins="",
        job_lease_seconds=3,
        followup_poll_seconds=0.05,
        runner_poll_seconds=0.05,
        ack_after_seconds=0.5,
        fire_and_forget_grace_seconds=2,
        runner_takeover_seconds=3,
    )


@pytest.fixture
def registry(settings: Settings) -> host.Registry:
    kit.calls.clear()
    kit.cleanups.clear()
    return host.load(settings, extra=[("kit", kit)])


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[TaskStore]:
    s = await open_store(db_url)
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


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test on any DNS lookup or TCP connect, even one a library would swallow
    (LiveKit prewarms provider connections in the background and ignores errors)."""
    attempts: list[object] = []
    real_connect = socket.socket.connect

    def getaddrinfo(host, *args, **kwargs):
        attempts.append(host)
        raise OSError(f"network disabled in tests: {host}")

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError(f"network disabled in tests: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    yield attempts
    assert not attempts, f"the test tried to reach the network: {attempts}"
