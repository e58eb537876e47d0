"""Shared helpers for the benchmarks: statistics, timing, machine facts, scratch files.

Benchmarks measure and report; nothing here asserts on a number.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/kit.py: a plugin with one tool per pattern


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values: Sequence[float], scale: float = 1.0) -> dict[str, Any]:
    """Median, p95, p99, min, max and count, each multiplied by ``scale`` (1e3 for s -> ms)."""
    if not values:
        return {"n": 0}
    return {
        "median": statistics.median(values) * scale,
        "p95": percentile(values, 95) * scale,
        "p99": percentile(values, 99) * scale,
        "min": min(values) * scale,
        "max": max(values) * scale,
        "n": len(values),
    }


def ratio(value: float | None, baseline: float | None) -> float | None:
    if (
        value is None
        or baseline is None
        or baseline == 0
        or math.isnan(value)
        or math.isnan(baseline)
    ):
        return None
    return value / baseline


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "packages": {
            name: version(name)
            for name in (
                "livekit-agents",
                "SQLAlchemy",
                "aiosqlite",
                "langgraph-checkpoint-sqlite",
                "openai-agents",
            )
        },
    }


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A scratch directory on the real disk (not tmpfs), so fsync costs what it costs."""
    base = Path(os.environ.get("FRONTDESK_BENCH_TMP", ROOT / "bench" / ".scratch"))
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def bench_settings(db_url: str, **overrides: Any) -> Any:
    """Settings for an offline run: no installed plugins, quick polls unless overridden."""
    from frontdesk.core.settings import Settings

    # The reports plugin's own setting (register_settings), not a core one.
    os.environ.setdefault(
        "FRONTDESK_REPORTS_PATH", str(Path(tempfile.gettempdir()) / "frontdesk-bench-reports")
    )
    values: dict[str, Any] = dict(
        database_url=db_url,
        load_plugins="",
        ack_after_seconds=5.0,
    )
    values.update(overrides)
    return Settings(**values)


def kit_registry(settings: Any) -> Any:
    import kit

    from frontdesk.core import host

    return host.load(settings, extra=[("kit", kit)])


@dataclass
class LoopLag:
    """Samples how late the event loop wakes a ``interval``-second sleeper: a direct measure of
    how long our work holds the loop (audio frames would wait just as long)."""

    interval: float = 0.005
    samples: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.interval)
            self.samples.append(max(0.0, loop.time() - start - self.interval))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="bench.looplag")

    async def stop(self) -> list[float]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.samples


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def now() -> float:
    return time.perf_counter()
