"""Crash-test support: a payment gateway that survives process death, and helpers to run
frontdesk in subprocesses and SIGKILL them mid-task.

Run as a script it is the frontdesk CLI with the test plugins registered (``kit`` and this
module as ``crashpay``), the way an installed plugin would be::

    python tests/crashkit.py simulate call.yaml --json --db sqlite+aiosqlite:///x.db

Used by tests/test_crash.py and bench/reliability.py.

The gateway keeps its charges in a JSON-lines file (FRONTDESK_TEST_GATEWAY_LOG), so a restarted
process sees the charges a killed one made, as a real gateway would. With
FRONTDESK_TEST_CRASH_AFTER_CHARGE=PATH it writes PATH right after moving money and then hangs,
so a test can SIGKILL the process between the charge and the ledger write.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import kit  # noqa: E402

from frontdesk.core import hookimpl  # noqa: E402

GATEWAY_LOG = "FRONTDESK_TEST_GATEWAY_LOG"
CRASH_AFTER_CHARGE = "FRONTDESK_TEST_CRASH_AFTER_CHARGE"
# Seconds the gateway takes before and after moving money: widens the windows a random-time
# kill can land in (bench/reliability.py).
GATEWAY_DELAY = "FRONTDESK_TEST_GATEWAY_DELAY"


# -- the gateway plugin ---------------------------------------------------------------------


class FileGateway:
    """Stripe-like idempotency over a file: a key seen before returns its first ref and moves
    no money. Every call is logged with its op, so tests can count charges per key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def _append(self, entry: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({**entry, "pid": os.getpid()}) + "\n")
            f.flush()
            os.fsync(f.fileno())  # the charge must outlive the SIGKILL that follows

    def _ref(self, key: str) -> str | None:
        return next(
            (e["ref"] for e in self.entries() if e["key"] == key and e["op"] in MOVES), None
        )

    async def _move(self, op: str, key: str, amount: Decimal) -> str:
        delay = float(os.environ.get(GATEWAY_DELAY) or 0)
        await asyncio.sleep(delay)
        ref = self._ref(key)
        if ref is not None:
            self._append({"op": f"{op}-repeat", "key": key, "ref": ref})
            return ref
        ref = f"fg_{op}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"
        self._append({"op": op, "key": key, "ref": ref, "amount": str(amount)})
        marker = os.environ.get(CRASH_AFTER_CHARGE)
        if marker:
            Path(marker).write_text(ref)
            await asyncio.sleep(3600)  # killed here: money moved, ledger not yet written
        await asyncio.sleep(delay)
        return ref

    async def charge(self, account: Any, amount: Decimal, idempotency_key: str) -> str:
        return await self._move("charge", idempotency_key, amount)

    async def refund(self, payment_ref: str, amount: Decimal, idempotency_key: str) -> str:
        return await self._move("refund", idempotency_key, amount)

    async def find(self, idempotency_key: str) -> str | None:
        ref = self._ref(idempotency_key)
        self._append({"op": "find", "key": idempotency_key, "ref": ref})
        return ref


MOVES = ("charge", "refund")


@hookimpl
def frontdesk_payment_gateway(config: Any) -> FileGateway | None:
    path = os.environ.get(GATEWAY_LOG)
    return FileGateway(Path(path)) if path else None


PLUGINS = [("kit", kit), ("crashpay", sys.modules[__name__])]


def load_registry(settings: Any) -> Any:
    from frontdesk.core import host

    return host.load(settings, extra=PLUGINS)


# -- subprocesses ---------------------------------------------------------------------------

BASE_ENV = {
    **os.environ,
    "FRONTDESK_LOAD_PLUGINS": "",
    "PYTHONPATH": str(HERE),
    # The demo's invoices (billing's seed_invoices): the trials pay INV-1001.
    "FRONTDESK_BILLING_SEED_INVOICES": str(ROOT / "examples" / "demo" / "invoices.toml"),
}
for _name in (CRASH_AFTER_CHARGE, GATEWAY_DELAY):
    BASE_ENV.pop(_name, None)


def start(
    *args: str, lease: float = 1.0, takeover: float = 3.0, **env: str
) -> subprocess.Popen[bytes]:
    """``frontdesk ARGS`` with the test plugins, in its own process group.

    Output goes to temporary files, not pipes: a chatty process (``simulate --json`` with 100
    callers) would otherwise fill a pipe nobody is reading yet and block on a write, stalling
    its event loop mid-call. Read it with ``output(proc)``."""
    full_env = {
        **BASE_ENV,
        "FRONTDESK_JOB_LEASE_SECONDS": str(lease),
        "FRONTDESK_RUNNER_TAKEOVER_SECONDS": str(takeover),
        "FRONTDESK_RUNNER_POLL_SECONDS": "0.05",
        **env,
    }
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *args],
        env=full_env,
        stdout=out,
        stderr=err,
        start_new_session=True,
    )
    proc.output_files = (out, err)  # type: ignore[attr-defined]
    return proc


def output(proc: subprocess.Popen[bytes]) -> tuple[str, str]:
    """What the process wrote so far: (stdout, stderr)."""
    texts = []
    for f in proc.output_files:  # type: ignore[attr-defined]
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
    return texts[0], texts[1]


def finish(proc: subprocess.Popen[bytes], timeout: float) -> tuple[str, str]:
    """Wait for the process to exit on its own; its (stdout, stderr)."""
    proc.wait(timeout)
    return output(proc)


def kill(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL: no shutdown code runs, exactly like a crashed or OOM-killed process. False if
    the process had already exited on its own (nothing was killed)."""
    alive = proc.poll() is None
    if alive:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    return alive


def stop(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return output(proc)


def wait_until(
    predicate: Callable[[], Any], timeout: float, proc: subprocess.Popen[bytes] | None = None
) -> Any:
    """Poll ``predicate`` until truthy; fail early if ``proc`` died on its own."""
    deadline = time.monotonic() + timeout
    import sqlite3

    while True:
        try:
            value = predicate()
        except sqlite3.OperationalError:  # the process has not created the schema yet
            value = None
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            _, err = output(proc)
            raise AssertionError(f"process exited {proc.returncode} early:\n{err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(0.05)


def write_scenario(path: Path, caller: str, steps: list[dict[str, Any]]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"caller": caller, "steps": steps}))
    return path


# -- reading the database file directly (no event loop, no store) ----------------------------


def sqlite_path(url: str) -> str:
    return url.split(":///", 1)[1]


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import sqlite3

    conn = sqlite3.connect(sqlite_path(url), timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def running_with_expired_lease(url: str) -> list[tuple[Any, ...]]:
    """Rows a dead process left behind and nobody closed (the crash tests' invariant: none)."""
    from frontdesk.db.models import utcnow

    rows = query(
        url, "SELECT id, tool, lease_owner, lease_expires_at FROM tasks WHERE status = 'running'"
    )
    now = utcnow().strftime("%Y-%m-%d %H:%M:%S.%f")  # how SQLite rows store datetimes
    return [r for r in rows if r[3] is None or str(r[3]) < now]


if __name__ == "__main__":
    from frontdesk.core import host

    _load = host.load

    def _with_test_plugins(settings: Any = None, *, extra: Any = ()) -> Any:
        return _load(settings, extra=[*extra, *PLUGINS])

    host.load = _with_test_plugins
    from frontdesk.agents.programs.cli import main

    main()
