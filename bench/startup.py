"""§8 Startup: plugin discovery and registry building with 50 installed plugins, against none.

The 50 plugins are real distributions as far as importlib.metadata can tell: each has a
package and a ``*.dist-info`` with METADATA and an ``entry_points.txt`` in the ``frontdesk``
group, in a directory put on PYTHONPATH, so discovery walks the same code as a pip-installed
plugin. Each plugin registers a department with one tool and adds a second tool to every
department. Every measurement is a fresh interpreter (this is paid once per process, in
prewarm); the two variants alternate.

Also here: what ``Registry.observe`` costs the caller's turn with broken observers loaded (one
that raises, one that hangs, one async): five events queued, as tests/test_plugins_observers.py
used to time (< 50 ms); the test now checks only that observe() queues.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import BENCH, ratio, scratch, summary

PLUGIN = '''"""Generated benchmark plugin {k}."""
from frontdesk.core import Department, ToolContext, hookimpl, tool


@tool(pattern="interruptible")
async def bench_lookup_{k}(ctx: ToolContext, query: str) -> str:
    """Look something up for bench desk {k}."""
    return query


@tool(pattern="background", ack="Started.")
async def bench_job_{k}(ctx: ToolContext, name: str) -> str:
    """A long job for bench desk {k}."""
    return name


@hookimpl
def register_departments(register):
    register(Department(name="bench{k}", description="bench desk {k}",
                        instructions="You are bench desk {k}.", tools=[bench_lookup_{k}]))


@hookimpl
def register_tools(register):
    register(bench_job_{k}, departments=["*"])
'''


def make_plugins(root: Path, count: int) -> None:
    for k in range(count):
        pkg = root / f"fdbench_plugin_{k:02d}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(PLUGIN.format(k=f"{k:02d}"))
        info = root / f"fdbench_plugin_{k:02d}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: fdbench-plugin-{k:02d}\nVersion: 0.1\n"
        )
        (info / "entry_points.txt").write_text(
            f"[frontdesk]\nbench{k:02d} = fdbench_plugin_{k:02d}\n"
        )
        (info / "RECORD").write_text("")


def child(argv: list[str]) -> None:
    """``run.py --child startup:child``: time ``host.load`` in this fresh interpreter."""
    import time

    t0 = time.perf_counter()
    from frontdesk.core import host
    from frontdesk.core.settings import Settings

    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    t1 = time.perf_counter()
    registry = host.load(settings)
    t2 = time.perf_counter()
    sys.stdout.write(
        json.dumps(
            {
                "import_s": t1 - t0,
                "load_s": t2 - t1,
                "plugins": len(registry.plugins),
                "departments": len(registry.departments),
                "tools": len(registry.tools),
                "errors": registry.errors[:3],
            }
        )
        + "\n"
    )


def _measure(extra_path: Path | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTDESK_")}
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--child", "startup:child"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _observe_cost(reps: int) -> dict[str, Any]:
    """Five ``observe()`` calls with broken observers loaded, in this interpreter."""
    import asyncio
    import threading
    import time

    from frontdesk.core import hookimpl, host
    from frontdesk.core.settings import Settings

    release = threading.Event()

    class Raises:
        @hookimpl
        def on_task_event(self, event: Any) -> None:
            raise RuntimeError("observer broke")

    class Hangs:
        @hookimpl
        def on_task_event(self, event: Any) -> None:
            release.wait(5)

    class Async:
        @hookimpl
        async def on_task_event(self, event: Any) -> None:
            await asyncio.sleep(0)

    async def measure() -> list[float]:
        settings = Settings(
            _env_file=None, load_plugins="", disable_plugins=",".join(host.builtin_names())
        )
        registry = host.load(
            settings, extra=[("raises", Raises()), ("hangs", Hangs()), ("async", Async())]
        )
        times = []
        for i in range(reps):
            started = time.perf_counter()
            for event in range(5):
                registry.observe(i * 5 + event)
            times.append(time.perf_counter() - started)
        release.set()
        await registry.drain(timeout=5)
        return times

    return summary(asyncio.run(measure()), 1e3)


def run(quick: bool) -> dict[str, Any]:
    reps = 4 if quick else 9
    observe = _observe_cost(50 if quick else 200)
    with scratch("startup-") as dir_:
        make_plugins(dir_, 50)
        none: list[dict[str, Any]] = []
        fifty: list[dict[str, Any]] = []
        _measure(None)  # warm the OS file cache for both variants
        _measure(dir_)
        for i in range(reps):
            for variant in (
                ((None, none), (dir_, fifty)) if i % 2 else ((dir_, fifty), (None, none))
            ):
                variant[1].append(_measure(variant[0]))
    load0 = summary([r["load_s"] for r in none], 1e3)
    load50 = summary([r["load_s"] for r in fifty], 1e3)
    added = load50["median"] - load0["median"]
    return {
        "reps": reps,
        "no_plugins": {
            "load_ms": load0,
            "import_ms": summary([r["import_s"] for r in none], 1e3),
            "plugins": none[-1]["plugins"],
            "tools": none[-1]["tools"],
        },
        "fifty_plugins": {
            "load_ms": load50,
            "import_ms": summary([r["import_s"] for r in fifty], 1e3),
            "plugins": fifty[-1]["plugins"],
            "departments": fifty[-1]["departments"],
            "tools": fifty[-1]["tools"],
            "errors": fifty[-1]["errors"],
        },
        "added_ms": added,
        "ratio": ratio(load50["median"], load0["median"]),
        "observe_five_ms": observe,
        "targets": {
            "added_ms_50_plugins": {"target": "<= 100", "value": added},
            "observe_five_events_p99_ms": {"target": "<= 50", "value": observe["p99"]},
        },
    }
