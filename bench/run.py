"""``make bench`` / ``make bench-quick``: every benchmark of issue 8, one section at a time.

Each section runs in a fresh interpreter (so one section's imports, threads and garbage do not
bill the next), writes its JSON, and this script merges them into bench/results.json,
bench/results.md and bench/concurrency.png. Benchmarks report; they never fail on a number.

    .venv/bin/python bench/run.py [--quick] [--only write,turn,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH, machine, write_json  # noqa: E402

# name -> (module, title); run in this order.
SECTIONS: dict[str, tuple[str, str]] = {
    "write": ("write_path", "§1 Persist one state change"),
    "turn": ("tool_turn", "§2 Tool-turn overhead and §3 interrupt to settled"),
    "delivery": ("delivery", "§4 Delivery from another process"),
    "contention": ("contention", "§5 16 call processes + 1 runner on one SQLite file"),
    "calls": ("calls", "§6 Concurrent calls in one process"),
    "history": ("history", "§7 History with 1,000,000 tasks"),
    "startup": ("startup", "§8 Plugin discovery with 50 plugins"),
    "search": ("search_queries", "§9 Knowledge-base search with hostile queries"),
    "voice": ("voice", "§10 Voice pipeline: barge-in, acks, follow-ups"),
    "speech": ("voice_audio", "§10 Voice on real audio: barge-in from onset, false cancels"),
    "web": ("web", "§11 Web console: GET /api/tasks at 1M rows, 50 SSE clients"),
}
SECTION_TIMEOUT = 300  # seconds; a hung section is reported, and the rest still run
# Real-time audio trials last as long as their audio; §11 builds 1M rows on SQLite and on
# Postgres, then runs the stats storm at 100k.
SECTION_TIMEOUTS = {"speech": 600, "web": 900}


def run_section(name: str, quick: bool) -> dict[str, Any]:
    module, _ = SECTIONS[name]
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    cmd = [sys.executable, str(Path(__file__)), "--section", name, "--out", str(out)]
    if quick:
        cmd.append("--quick")
    start = time.perf_counter()
    try:
        timeout = SECTION_TIMEOUTS.get(name, SECTION_TIMEOUT)
        proc = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": f"exit {proc.returncode}", "stderr": proc.stderr[-4000:]}
        return json.loads(out.read_text())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {SECTION_TIMEOUTS.get(name, SECTION_TIMEOUT)}s"}
    finally:
        out.unlink(missing_ok=True)
        print(f"  {name}: {time.perf_counter() - start:.1f}s", file=sys.stderr)


def section_main(name: str, quick: bool, out: Path) -> None:
    import importlib

    module = importlib.import_module(SECTIONS[name][0])
    result = module.run(quick)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    write_json(out, result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (< 2 minutes)")
    parser.add_argument("--only", help="comma list of sections: " + ", ".join(SECTIONS))
    parser.add_argument("--section", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a section's helper process
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=BENCH / "results.json")
    args, rest = parser.parse_known_args()

    if args.child:
        import importlib

        module_name, _, func = args.child.partition(":")
        getattr(importlib.import_module(module_name), func)(rest)
        return
    if args.section:
        section_main(args.section, args.quick, args.out)
        return

    names = args.only.split(",") if args.only else list(SECTIONS)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": machine(),
        "sections": {},
    }
    if args.only and args.results.exists():
        # A partial run refreshes its sections in the last full results.
        previous = json.loads(args.results.read_text())
        results["sections"] = previous.get("sections", {})
    for name in names:
        print(f"{SECTIONS[name][1]} ...", file=sys.stderr)
        results["sections"][name] = run_section(name, args.quick)
    results["seconds"] = time.perf_counter() - started
    results["machine"]["load_average_end"] = list(os.getloadavg())
    write_json(args.results, results)

    from report import chart, markdown

    md_path = args.results.with_suffix(".md")
    md_path.write_text(markdown(results))
    png = chart(results, args.results.parent / "concurrency.png")
    print(md_path.read_text())
    print(f"wrote {args.results}, {md_path}" + (f", {png}" if png else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
