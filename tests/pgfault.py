"""A private PostgreSQL 15 server a fault test starts, kills and restarts for real.

The shared test server (FRONTDESK_TEST_POSTGRES_URL) must never be killed, so each fault test
runs its own postmaster: ``initdb`` into a temporary directory owned by the ``postgres`` user,
``postgres`` started directly (its pid is the postmaster's, so SIGKILL hits exactly it) on a
free loopback port, trust auth. ``kill()`` is a crash (SIGKILL: no checkpoint, backends die
with it, crash recovery at the next start); ``restart_fast()`` is ``pg_ctl restart -m fast``.

Needs the Debian binaries (/usr/lib/postgresql/15/bin), root (to run them as ``postgres``) and
that user. Missing any: the test is skipped, or fails when FRONTDESK_REQUIRE_FAULTS=1.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from faultkit import cannot

PG_BIN = Path(os.environ.get("FRONTDESK_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def missing() -> str | None:
    """Why a private Postgres cannot run here, or None."""
    if not (PG_BIN / "postgres").exists() or not (PG_BIN / "initdb").exists():
        return f"no PostgreSQL binaries in {PG_BIN} (apt-get install postgresql-15)"
    if os.geteuid() != 0:
        return "a private Postgres is run as user postgres, which needs root"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user"
    return None


def need_private_postgres() -> None:
    why = missing()
    if why is not None:
        cannot(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres() -> None:
    user = pwd.getpwnam("postgres")
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


class PrivatePostgres:
    def __init__(self, max_connections: int = 100) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="frontdesk-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.max_connections = max_connections
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.root / "postgres.log"
        user = pwd.getpwnam("postgres")
        os.chmod(self.root, 0o755)
        os.chown(self.root, user.pw_uid, user.pw_gid)
        subprocess.run(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "--no-sync", "-E", "UTF8"],
            preexec_fn=_as_postgres, check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _options(self) -> list[str]:
        return [
            "-c", f"port={self.port}", "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={self.root}", "-c", "fsync=off",
            "-c", f"max_connections={self.max_connections}",
            "-c", "superuser_reserved_connections=0",
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> None:
        """Start the postmaster and wait until it takes connections (after a SIGKILL the old
        backends may still hold shared memory for a moment: the start is retried)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.log.open("ab")
            self.proc = subprocess.Popen(
                [str(PG_BIN / "postgres"), "-D", str(self.data), *self._options()],
                preexec_fn=_as_postgres, stdout=out, stderr=out, start_new_session=True,
            )  # fmt: skip
            out.close()
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self.ready():
                    return
                time.sleep(0.05)
            if time.monotonic() >= deadline:
                raise AssertionError(f"private Postgres did not start: {self.log.read_text()}")
            time.sleep(0.2)  # it exited (shared memory still held): try again

    def ready(self) -> bool:
        done = subprocess.run(
            [str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"],
            capture_output=True,
        )
        return done.returncode == 0

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash or the OOM killer would. Its backends notice and
        exit on their own; ``start`` retries while they still hold shared memory."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def restart_fast(self) -> None:
        """``pg_ctl restart -m fast``: every session is ended, then the server comes back."""
        assert self.proc is not None
        subprocess.run(
            [str(PG_BIN / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w"],
            preexec_fn=_as_postgres, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        self.proc.wait(10)
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def private_postgres(max_connections: int = 100) -> Iterator[PrivatePostgres]:
    need_private_postgres()
    pg = PrivatePostgres(max_connections)
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()
