""".ci/run must fail, not skip, when PostgreSQL cannot be reached (issue 16, item 18), and its
plain-install check must see every migration branch at its head."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "run"


def fake(bin_dir: Path, name: str, code: int) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{bin_dir}/calls"\nexit {code}\n')
    path.chmod(0o755)


def test_ci_fails_loudly_when_postgres_is_down(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "pg_isready", 2)  # never ready
    fake(bin_dir, "pg_ctlcluster", 1)  # and the start fails
    fake(bin_dir, "make", 0)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PG_WAIT_SECONDS": "1"}
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    calls = (bin_dir / "calls").read_text().splitlines()
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL: PostgreSQL is not reachable at 127.0.0.1:5432" in out.stderr
    assert not any(c.startswith("make") for c in calls), calls  # no test run that skips
    if Path("/etc/postgresql").is_dir():
        assert any(c.startswith("pg_ctlcluster") and c.endswith("main start") for c in calls)
    assert sum(c.startswith("pg_isready") for c in calls) >= 2  # it waited before giving up


def test_ci_checks_every_migration_branch_is_at_its_head():
    text = SCRIPT.read_text()
    assert "grep -q '^frontdesk: .* (head)$'" in text
    assert "grep -q '^billing: .* (head)$'" in text
    assert "grep -v ' (head)$'" in text  # any branch line that is not at its head fails
    assert "|| true" not in text.split("make lint")[0]  # a failed start is not swallowed
