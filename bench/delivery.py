"""§4 Delivery: a background job's final commit in a runner PROCESS to the follow-up's
generate_reply in the call, and what the idle watch costs a call process.

The runner is a separate interpreter (as ``frontdesk runner`` is in production); it reports the
CLOCK_MONOTONIC time of each final commit from its store observer, which fires right after the
commit. The call process (this one) runs a real AgentSession under a CallRuntime with the
FollowupWatcher at the production poll interval, and records when ``deliver`` calls
``generate_reply`` (the "followup" event emitted just before it). time.monotonic is one
system-wide clock on Linux, so the two processes' stamps compare directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from common import BENCH, bench_settings, kit_registry, ratio, scratch, sqlite_url, summary

from frontdesk.core.schema import open_store

# -- the runner process ----------------------------------------------------------------------


def runner_child(argv: list[str]) -> None:
    """``run.py --child delivery:runner_child URL``: a Runner that prints each final commit."""
    asyncio.run(_runner_main(argv[0]))


async def _runner_main(url: str) -> None:
    from frontdesk.core.runner import Runner
    from frontdesk.db.models import FINISHED

    settings = bench_settings(url)
    registry = kit_registry(settings)
    store = await open_store(url)

    def observe(event: Any) -> None:
        if event.status in FINISHED:
            line = {"task_id": event.task_id, "status": event.status, "at": time.monotonic()}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    store.observers.append(observe)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    try:
        await Runner(store, registry, settings).run(stop)
    finally:
        await store.close()


async def start_runner(
    url: str,
) -> tuple[asyncio.subprocess.Process, dict[int, float], asyncio.Task[None]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(BENCH / "run.py"),
        "--child",
        "delivery:runner_child",
        url,
        stdout=asyncio.subprocess.PIPE,
    )
    committed: dict[int, float] = {}
    ready = asyncio.get_running_loop().create_future()

    async def read() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = json.loads(raw)
            if line.get("ready"):
                ready.set_result(True)
            elif "task_id" in line:
                committed[line["task_id"]] = line["at"]

    reader = asyncio.create_task(read())
    await asyncio.wait_for(ready, 60)
    return proc, committed, reader


async def stop_runner(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(proc.wait(), 15)
    if proc.returncode is None:
        proc.kill()
    reader.cancel()


# -- the call process ------------------------------------------------------------------------


async def run(quick: bool) -> dict[str, Any]:
    from livekit.agents import AgentSession

    from frontdesk.agents.followups import FollowupWatcher
    from frontdesk.agents.runtime import CallRuntime
    from frontdesk.agents.testing import ScriptedLLM
    from frontdesk.core.jobs import client_for

    jobs = 10 if quick else 40
    idle_calls = 10
    idle_seconds = 2.0 if quick else 8.0
    with scratch("delivery-") as dir_:
        url = sqlite_url(dir_ / "delivery.db")
        settings = bench_settings(url)  # production poll intervals (0.2 s)
        registry = kit_registry(settings)
        store = await open_store(url)
        watcher = FollowupWatcher(store, settings.followup_poll_seconds)
        delivered: dict[int, float] = {}
        spoken: dict[int, float] = {}
        store.observers.append(
            lambda e: (
                delivered.setdefault(e.task_id, time.monotonic())
                if (e.note or "").startswith("delivered")
                else None
            )
        )
        proc, committed, reader = await start_runner(url)
        calls: list[tuple[CallRuntime, AgentSession, ScriptedLLM]] = []
        try:
            for k in range(idle_calls):
                llm = ScriptedLLM()
                session = AgentSession(llm=llm)
                runtime = CallRuntime(
                    session,
                    store=store,
                    registry=registry,
                    settings=settings,
                    caller=f"caller-{k}",
                    watcher=watcher,
                )
                await runtime.start()
                calls.append((runtime, session, llm))
            runtime, _session, llm = calls[0]
            runtime.listeners.append(
                lambda e: (
                    spoken.setdefault(e["task_id"], time.monotonic())
                    if e["type"] == "followup"
                    else None
                )
            )
            await asyncio.sleep(0.5)  # greetings spoken

            latencies: list[float] = []
            misses = 0
            for i in range(jobs):
                llm.push({"say": f"Your experiment d{i} is done."})
                job = await store.create(
                    caller=runtime.caller,
                    tool="experiment",
                    pattern="background",
                    args={"name": f"d{i}", "seconds": 0.02},
                )
                await client_for(settings).enqueue(job.id)  # as a call's background tool does
                deadline = time.monotonic() + 10
                while job.id not in delivered and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                if job.id in spoken and job.id in committed:
                    latencies.append(spoken[job.id] - committed[job.id])
                else:
                    misses += 1
                await asyncio.sleep(0.05)

            # Idle: every call waiting, nothing happening. Process CPU with the watch on, then
            # with every call taken off the watch; the difference is what the watch costs.
            await asyncio.sleep(0.5)
            cpu0, t0 = time.process_time(), time.perf_counter()
            await asyncio.sleep(idle_seconds)
            watching = (time.process_time() - cpu0) / (time.perf_counter() - t0)
            checks_before = watcher.checks
            for runtime_, _, _ in calls:
                watcher.remove(runtime_)
            await asyncio.sleep(0.5)
            cpu0, t0 = time.process_time(), time.perf_counter()
            await asyncio.sleep(idle_seconds)
            unwatched = (time.process_time() - cpu0) / (time.perf_counter() - t0)
        finally:
            for runtime_, session_, llm_ in calls:
                with contextlib.suppress(Exception):
                    await runtime_.shutdown("bench over")
                with contextlib.suppress(Exception):
                    await session_.aclose()
                await llm_.aclose()
            await stop_runner(proc, reader)
            await watcher.aclose()
            await store.close()

    lat = summary(latencies, 1e3)
    per_call_watch = max(0.0, watching - unwatched) / idle_calls * 100
    return {
        "jobs": jobs,
        "missed": misses,
        "latency_ms": lat,
        "poll_seconds": settings.followup_poll_seconds,
        "p95_in_poll_intervals": ratio(lat.get("p95"), settings.followup_poll_seconds * 1e3),
        "idle": {
            "calls": idle_calls,
            "seconds": idle_seconds,
            "process_cpu_percent_watching": watching * 100,
            "process_cpu_percent_unwatched": unwatched * 100,
            "watch_percent_of_core_per_call": per_call_watch,
            "process_percent_of_core_per_call": watching * 100 / idle_calls,
            "ratio_watching_vs_unwatched": ratio(watching, unwatched),
            "watch_checks_before_idle": checks_before,
        },
        "targets": {
            "delivery_p95_ms": {"target": "<= 1000", "value": lat.get("p95")},
            "idle_watch_percent_of_core_per_call": {"target": "<= 1", "value": per_call_watch},
        },
    }


if __name__ == "__main__":  # pragma: no cover - run through run.py
    print(Path(__file__).name, "runs through bench/run.py", file=sys.stderr)
