"""A private PostgreSQL 15 server for fault tests: started by the test on a free port, its
data directory in a temporary folder, stopped and restarted (or killed) for real.

Needs the Debian server binaries (/usr/lib/postgresql/15/bin) and, when run as root, the
``postgres`` user (initdb refuses root). Without them a test skips with the reason, unless
FRONTDESK_REQUIRE_FAULTS=1 (then it fails).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

BIN = Path("/usr/lib/postgresql/15/bin")
REQUIRE = "FRONTDESK_REQUIRE_FAULTS"


def unavailable() -> str | None:
    """Why a private Postgres cannot run here, or None."""
    if not (BIN / "initdb").exists():
        return f"PostgreSQL 15 server binaries not found in {BIN}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a 'postgres' user for initdb"
    return None


def skip_or_fail(reason: str) -> None:
    if os.environ.get(REQUIRE, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE}=1 but: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fd-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.url = f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        cmd = [str(BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, timeout=60)

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()

    def start(self) -> None:
        opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off -k {self.root}"
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-w", "-l",
                  str(self.root / "log"), "start")  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("private Postgres did not start")

    def stop(self, mode: str = "immediate") -> None:
        """Stop it now: ``immediate`` aborts every backend, as a crash would."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
