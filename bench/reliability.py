"""Crash-and-recover trials, counted: the numbers in docs/reliability.md.

Each trial runs real frontdesk processes on a fresh SQLite file, SIGKILLs one at a kill point
(a random one where the kind allows), restarts, lets the caller call back, and counts from the
store what was lost or doubled (tests/crashtrials.py says exactly how each is counted):

    .venv/bin/python bench/reliability.py              # 10 trials of each kind
    .venv/bin/python bench/reliability.py --trials 3 --seed 7 --json

Exit status 1 if anything was lost or doubled.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("FRONTDESK_LOAD_PLUGINS", "")

import crashtrials  # noqa: E402
from crashtrials import Outcome  # noqa: E402

Trial = Callable[[str, Path, random.Random], Outcome]


def _jobs(url: str, tmp: Path, rng: random.Random) -> Outcome:
    # Three jobs at once; the runner dies after the first reaches 25%, 50%, 75% or 100% of its
    # steps (at 100% it may have finished some: those must not run again).
    return crashtrials.runner_killed_mid_job(
        url, tmp, jobs=3, seconds=1.5, kill_at=rng.choice([0.25, 0.5, 0.75, 1.0])
    )


def _charge(url: str, tmp: Path, rng: random.Random) -> Outcome:
    return crashtrials.payment_killed(url, tmp, after_charge=True)


def _payment_random(url: str, tmp: Path, rng: random.Random) -> Outcome:
    # Anywhere from before the payment row to after the ledger write (the gateway takes
    # 0.1 s before and after moving money, so every step is a target).
    return crashtrials.payment_killed(url, tmp, after_charge=False, delay=rng.uniform(0, 0.4))


def _search(url: str, tmp: Path, rng: random.Random) -> Outcome:
    return crashtrials.search_killed(url, tmp)


def _steps(url: str, tmp: Path, rng: random.Random) -> Outcome:
    return crashtrials.steps_killed(url, tmp, step=rng.choice(crashtrials.STEPS))


KINDS: dict[str, Trial] = {
    "runner killed mid-job (3 jobs)": _jobs,
    "payment killed after gateway charge": _charge,
    "payment killed at a random point": _payment_random,
    "call killed mid-search": _search,
    "3-step job killed after a step (DBOS)": _steps,
}


def run(trials: int, seed: int, calls: int, quiet: bool) -> list[dict]:
    rng = random.Random(seed)
    results = []
    for kind, trial in KINDS.items():
        outcomes = []
        for n in range(trials):
            with tempfile.TemporaryDirectory(prefix="fd-rel-") as tmp:
                url = f"sqlite+aiosqlite:///{tmp}/frontdesk.db"
                out = trial(url, Path(tmp), rng)
            outcomes.append(out)
            if not quiet:
                print(
                    f"  {kind} #{n + 1}: rows {out.rows} lost {out.lost} doubled {out.doubled}"
                    f" ({out.seconds:.1f}s) {_extra(out)}",
                    file=sys.stderr,
                )
        results.append(_sum(kind, outcomes))
    if calls:
        with tempfile.TemporaryDirectory(prefix="fd-rel-") as tmp:
            out = crashtrials.two_processes(
                f"sqlite+aiosqlite:///{tmp}/frontdesk.db", Path(tmp), calls=calls
            )
        if not quiet:
            print(f"  {out.kind}: {_extra(out)}", file=sys.stderr)
        summary = _sum(out.kind, [out])
        summary["lock errors"] = out.details["lock_errors"]
        results.append(summary)
    return results


def _extra(out: Outcome) -> str:
    keep = ("attempts", "payment_at_kill", "charges", "lock_errors", "resumed", "failures")
    return " ".join(
        f"{k}={out.details[k]}"
        for k in keep
        if k in out.details and out.details[k] not in ([], None)
    )


def _landed(out: Outcome) -> str:
    """Where a kill landed, as the store saw it at that moment."""
    if not out.kills:
        return "too late: the call had already ended"
    if "payment_at_kill" in out.details:
        if out.details["task_at_kill"] is None:
            return "before the task row"
        return {
            None: "before the payment row",
            "pending": "between reserving the payment and the ledger write",
            "succeeded": "after the ledger write, before the task row's end",
        }.get(out.details["payment_at_kill"], "?")
    if "step" in out.details:
        return f"after {out.details['step']}"
    if "attempts" in out.details:
        reruns = sum(a > 1 for a in out.details["attempts"])
        return f"{reruns} of {len(out.details['attempts'])} jobs unfinished"
    return "mid-tool" if out.kills else "no kill"


def _sum(kind: str, outs: list[Outcome]) -> dict:
    return {
        "landed": dict(Counter(_landed(o) for o in outs)),
        "kind": kind,
        "trials": len(outs),
        "kills": sum(o.kills for o in outs),
        "rows checked": sum(o.rows for o in outs),
        "lost": sum(o.lost for o in outs),
        "doubled": sum(o.doubled for o in outs),
        "median s": round(statistics.median(o.seconds for o in outs), 1),
        "failed expects": sum(len(o.details.get("failures") or []) for o in outs),
    }


def table(results: list[dict]) -> str:
    cols = ["kind", "trials", "kills", "rows checked", "lost", "doubled", "median s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in results:
        lines.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    total = {c: sum(r[c] for r in results) for c in cols[1:6]}
    lines.append("| **total** | " + " | ".join(str(total[c]) for c in cols[1:6]) + " | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="trials of each crash kind")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="for the kill points")
    parser.add_argument("--calls", type=int, default=100, help="calls per process (0: skip)")
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    parser.add_argument("--kinds", help="only the kinds whose names contain this text")
    parser.add_argument("--quiet", action="store_true", help="no per-trial lines on stderr")
    args = parser.parse_args()
    started = time.monotonic()
    if args.kinds:
        for name in [k for k in KINDS if args.kinds not in k]:
            del KINDS[name]
    results = run(args.trials, args.seed, args.calls, args.quiet)
    if args.json:
        print(json.dumps({"seed": args.seed, "results": results}, indent=2))
    else:
        print(
            f"frontdesk reliability: seed {args.seed}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
            f"{time.monotonic() - started:.0f} s\n"
        )
        print(table(results))
        locks = [r["lock errors"] for r in results if "lock errors" in r]
        if locks:
            print(f'\n"database is locked" errors in the two-process run: {locks[0]}')
        print("\nWhere the kills landed:")
        for r in results:
            if r["kills"]:
                landed = ", ".join(f"{n} x {where}" for where, n in r["landed"].items())
                print(f"- {r['kind']}: {landed}")
    bad = sum(r["lost"] + r["doubled"] + r["failed expects"] for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
