"""Every CLI command against what a new user gets wrong: a malformed database URL, an in-memory
URL, a missing or foreign database, a bad setting and an oversized id. Each answer is exit 2 with
one line on stderr, no traceback, and no file left behind (``doctor`` reports instead: exit 1).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from clirun import FRONTDESK

SCENARIO = "caller: sweep\nsteps:\n  - user: hi\n"
HUGE = "99999999999999999999999"

# (name, argv before --db, takes --db). Writers create what they need, so they are swept with
# broken URLs and bad settings, not with a missing database.
READERS = [
    ("tasks list", ["tasks", "list"]),
    ("tasks show", ["tasks", "show", "1"]),
    ("tasks cancel", ["tasks", "cancel", "1"]),
    ("tasks stats", ["tasks", "stats"]),
    ("db current", ["db", "current"]),
    ("db downgrade", ["db", "downgrade", "base", "--branch", "frontdesk"]),
]
WRITERS = [
    ("db upgrade", ["db", "upgrade"]),
    ("simulate", ["simulate", "s.yaml"]),
    ("demo", ["demo"]),
    ("console", ["console", "--text"]),
    ("runner", ["runner"]),
]
# No --db option: the URL comes from FRONTDESK_DATABASE_URL.
ENV_URL = [("start", ["start"]), ("dev", ["dev"])]
NO_DB = [
    ("plugins list", ["plugins", "list"]),
    ("plugins install", ["plugins", "install", "nothing-here"]),
    ("plugins uninstall", ["plugins", "uninstall", "nothing-here"]),
]
ALL = READERS + WRITERS + ENV_URL + NO_DB + [("doctor", ["doctor"])]

BAD_URLS = {
    "malformed": "not a url",
    "unsupported": "mysql://bob:hunter22@db/y",
    "in-memory": "sqlite://",
    "no-directory": "sqlite+aiosqlite:////nonexistent-dir/x/y.db",
}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    return tmp_path


def run(workdir: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess:
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FRONTDESK_")},
        "FRONTDESK_LOAD_PLUGINS": "",
        # start/dev check these before anything else; present, the database is what fails.
        "LIVEKIT_URL": "ws://127.0.0.1:1",
        "LIVEKIT_API_KEY": "key",
        "LIVEKIT_API_SECRET": "secret",
        **env,
    }
    return subprocess.run(
        [*FRONTDESK, *argv],
        capture_output=True,
        text=True,
        env=full,
        cwd=workdir,
        input="/quit\n",
        timeout=120,
    )


def files(workdir: Path) -> set[str]:
    return {str(p.relative_to(workdir)) for p in workdir.rglob("*")}


def assert_one_line(out: subprocess.CompletedProcess, code: int = 2) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("url", BAD_URLS.values(), ids=BAD_URLS.keys())
@pytest.mark.parametrize(
    "argv", [a for _, a in READERS + WRITERS], ids=[n for n, _ in READERS + WRITERS]
)
def test_a_bad_database_url(workdir, argv, url):
    before = files(workdir)
    line = assert_one_line(run(workdir, [*argv, "--db", url]))
    assert "hunter22" not in line
    assert files(workdir) == before


@pytest.mark.parametrize("argv", [a for _, a in ENV_URL], ids=[n for n, _ in ENV_URL])
@pytest.mark.parametrize("url", ["not a url", "sqlite://"], ids=["malformed", "in-memory"])
def test_a_bad_database_url_from_the_environment(workdir, argv, url):
    before = files(workdir)
    assert_one_line(run(workdir, argv, FRONTDESK_DATABASE_URL=url))
    assert files(workdir) == before


@pytest.mark.parametrize("url", ["not a url", "sqlite://", "sqlite:///:memory:"])
def test_doctor_reports_a_bad_database_url_and_runs_on(workdir, url):
    before = files(workdir)
    out = run(workdir, ["doctor"], FRONTDESK_DATABASE_URL=url)
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    assert "[FAIL] reachable:" in out.stdout and "providers" in out.stdout
    assert files(workdir) == before


@pytest.mark.parametrize("argv", [a for _, a in READERS], ids=[n for n, _ in READERS])
def test_reading_a_missing_database_creates_nothing(workdir, argv):
    before = files(workdir)
    line = assert_one_line(run(workdir, [*argv, "--db", "sqlite+aiosqlite:///typo.db"]))
    assert "no frontdesk database at typo.db" in line and "db upgrade" in line
    assert files(workdir) == before


@pytest.mark.parametrize("argv", [a for _, a in READERS], ids=[n for n, _ in READERS])
def test_reading_a_foreign_database_leaves_it_untouched(workdir, argv):
    other = workdir / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    data, before = other.read_bytes(), files(workdir)
    line = assert_one_line(run(workdir, [*argv, "--db", f"sqlite+aiosqlite:///{other}"]))
    assert "not a frontdesk database" in line
    assert files(workdir) == before  # no -wal, no -shm
    assert other.read_bytes() == data


def test_plugins_list_opens_no_database(workdir):
    out = run(workdir, ["plugins", "list", "--json"], FRONTDESK_DATABASE_URL="not a url")
    assert out.returncode == 0, out.stderr
    assert files(workdir) == {"s.yaml"}


SWEPT = [(n, a) for n, a in ALL if n != "doctor"]


@pytest.mark.parametrize(
    "argv, where",
    [(a, "env") for _, a in SWEPT]
    + [(a, "dotenv") for n, a in SWEPT if n in ("tasks list", "simulate", "start")],
    ids=[f"{n}-env" for n, _ in SWEPT] + ["tasks list-dotenv", "simulate-dotenv", "start-dotenv"],
)
def test_a_bad_setting_names_its_variable(workdir, argv, where):
    if where == "dotenv":
        (workdir / ".env").write_text("FRONTDESK_JOB_LEASE_SECONDS=abc\n")
        env = {}
    else:
        env = {"FRONTDESK_JOB_LEASE_SECONDS": "abc"}
    before = files(workdir)
    line = assert_one_line(run(workdir, argv, **env))
    variable = "FRONTDESK_JOB_LEASE_SECONDS" + (" (in .env)" if where == "dotenv" else "")
    assert line.startswith(f"error: {variable}: Input should be a valid number")
    assert "job_lease_seconds" not in line
    assert files(workdir) == before


def test_doctor_still_runs_with_a_bad_setting_and_reports_it(workdir):
    out = run(workdir, ["doctor"], FRONTDESK_JOB_LEASE_SECONDS="abc")
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    assert (
        "[FAIL] setting: FRONTDESK_JOB_LEASE_SECONDS: Input should be a valid number" in out.stdout
    )
    assert "providers" in out.stdout and "database" in out.stdout


@pytest.mark.parametrize("command", ["show", "cancel"])
def test_an_oversized_id_is_not_found(workdir, command):
    db = workdir / "fd.db"
    assert run(workdir, ["db", "upgrade", "--db", f"sqlite+aiosqlite:///{db}"]).returncode == 0
    before = files(workdir)
    line = assert_one_line(
        run(workdir, ["tasks", command, HUGE, "--db", f"sqlite+aiosqlite:///{db}"])
    )
    assert line == f"error: task {HUGE} not found"
    assert files(workdir) == before
