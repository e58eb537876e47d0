"""Real disk faults for the SQLite tests: a 4 MB tmpfs, filling it, and ``ulimit -f``.

Mounting needs root; without it the test is skipped with the reason, unless
FRONTDESK_REQUIRE_FAULTS=1 (then it fails, so a CI run meant to cover faults cannot pass
without them).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from faultkit import cannot


@contextmanager
def tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        done = None
        problem = str(exc)
    else:
        problem = done.stderr.strip() or f"exit {done.returncode}"
    if done is None or done.returncode != 0:
        cannot(f"cannot mount a {size} tmpfs (needs root): {problem}")
    try:
        yield where
    finally:
        # Lazy: a connection still closing must not leave the mount behind.
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=10)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path) -> int:
    """Write ``path`` until the disk refuses; the bytes written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (1 << 16, 1 << 12, 1 << 9):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return path.stat().st_size


def file_limit(limit: int) -> Callable[[], None]:
    """A ``preexec_fn`` for ``ulimit -f``: no file of the child may grow past ``limit`` bytes,
    and the write that would is refused (EFBIG) instead of killing it (SIGXFSZ ignored)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply
