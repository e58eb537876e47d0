"""§6 Concurrent calls in one process: the largest N with zero errors and event-loop lag p99
<= 25 ms.

Each N runs in a fresh interpreter: ``simulate`` (what ``frontdesk simulate --callers N`` runs)
with N callers, real text-mode AgentSessions, the embedded runner and the follow-up watcher, while
a 5 ms sleeper measures how late the loop wakes it. Every caller plays the same call (a
handoff, one tool per pattern, a background job whose result is spoken as a follow-up) with
~0.8 s of caller speech between turns, and the callers arrive staggered over the first seconds
as real calls do. An error is a failed expectation, a failed turn or a tool error.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from common import BENCH, LoopLag, bench_settings, kit_registry, ratio, scratch, sqlite_url, summary

TARGET_LAG_P99_MS = 25.0
PAUSE = {"wait": {"seconds": 0.8}}  # the caller talking


def call_steps(k: int, stagger: float) -> list[dict[str, Any]]:
    def user(text: str, tool: str, args: dict[str, Any], say: str) -> dict[str, Any]:
        return {"user": text, "llm": [{"tools": [{tool: args}]}, {"say": say}]}

    return [
        {"wait": {"seconds": round(stagger, 3)}},
        user("the lab please", "transfer_to_lab", {}, "Lab here."),
        PAUSE,
        user("look up argon", "lookup", {"query": f"argon {k}"}, "Argon is fine."),
        PAUSE,
        user("charge me five", "charge", {"amount": f"5.{k:02d}"}, "Charged."),
        PAUSE,
        user("note this", "note", {"text": f"note {k}", "seconds": 0.1}, "Noted."),
        PAUSE,
        user("run experiment", "experiment", {"name": f"x{k}", "seconds": 0.5}, "Started."),
        {"wait": {"task": "experiment", "status": "succeeded", "timeout": 20}},
        {"wait": {"seconds": 1.5}},  # the follow-up is spoken
        {"expect": {"task": "experiment", "delivered": True}},
        {"expect": {"task": "charge", "status": "succeeded"}},
    ]


def child(argv: list[str]) -> None:
    """``run.py --child calls:child N``: one simulate run; prints its JSON."""
    sys.stdout.write(json.dumps(asyncio.run(_child(int(argv[0])))) + "\n")


async def _child(n: int) -> dict[str, Any]:
    from frontdesk.agents.programs.scenario import parse_scenario
    from frontdesk.agents.programs.simulate import simulate

    with scratch("calls-") as dir_:
        settings = bench_settings(sqlite_url(dir_ / "calls.db"))
        registry = kit_registry(settings)
        errors: list[str] = []
        turns = 0

        def emit(event: dict[str, Any]) -> None:
            nonlocal turns
            kind = event["type"]
            if kind in ("error", "expect_failed"):
                errors.append(event.get("message", kind))
            elif kind == "tool_output" and event.get("is_error"):
                errors.append(f"tool {event['name']}: {event['output']}")
            elif kind == "tool_call":
                turns += 1

        lag = LoopLag()
        lag.start()
        start = time.perf_counter()
        if n == 0:
            from frontdesk.agents.programs.simulate import Environment

            env = await Environment.open(settings, registry)  # idle: the baseline
            await asyncio.sleep(3.0)
            await env.close()
            failures: list[str] = []
        else:
            stagger = min(3.0, 0.05 * n)
            scenarios = [
                parse_scenario({"caller": f"caller-{k}", "steps": call_steps(k, stagger * k / n)})
                for k in range(n)
            ]
            failures = await simulate(scenarios, settings, registry, emit)
        wall = time.perf_counter() - start
        samples = await lag.stop()
    return {
        "calls": n,
        "wall_seconds": wall,
        "tool_calls": turns,
        "failures": len(failures),
        "errors": len(errors) + len(failures),
        "error_samples": (failures + errors)[:3],
        "lag_ms": summary(samples, 1e3),
    }


def _run_child(n: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--child", "calls:child", str(n)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"calls": n, "errors": 1, "error_samples": [proc.stderr[-1500:]], "lag_ms": {}}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool) -> dict[str, Any]:
    # Stops at the first N that fails; quick mode's answer is a lower bound.
    ladder = [1, 32] if quick else [1, 16, 64, 128, 160, 192, 256]
    baseline = _run_child(0)
    runs = []
    best = 0
    for n in ladder:
        result = _run_child(n)
        p99 = result.get("lag_ms", {}).get("p99")
        result["passes"] = result["errors"] == 0 and p99 is not None and p99 <= TARGET_LAG_P99_MS
        result["lag_p99_ratio_vs_idle"] = ratio(p99, baseline.get("lag_ms", {}).get("p99"))
        runs.append(result)
        print(f"    calls={n} errors={result['errors']} lag p99={p99}", file=sys.stderr)
        if not result["passes"]:
            break
        best = n
    return {
        "idle_baseline": baseline,
        "runs": runs,
        "largest_passing_n": best,
        "ladder_stopped_at": runs[-1]["calls"] if runs and not runs[-1]["passes"] else None,
        "targets": {
            "largest_n_zero_errors_lag_p99_le_25ms": {"target": "report", "value": best},
        },
    }
