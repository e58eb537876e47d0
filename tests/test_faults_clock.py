"""Wall-clock steps of an hour on one process (issue 23 item 2), with libfaketime: real
``frontdesk simulate`` and ``frontdesk runner`` processes, one of them an hour ahead or behind.

Before, leases compared one process's wall clock with another's: a runner an hour ahead failed
every live call's turns "interrupted by restart" (15 of 15), a call process an hour behind
looked dead the moment it started. Now a lease is stamped by the database and a runner closes
one only when it saw the value unrenewed for a full lease on its own monotonic clock
(core/leasewatch.py). Counted: in-turn rows wrongly failed (0), and a call process an hour ahead
that dies still has its row closed within a few leases, not an hour.

libfaketime fakes the monotonic clock too unless FAKETIME_DONT_FAKE_MONOTONIC=1 (asyncio and
DBOS time their sleeps with it), so only the wall clock is stepped, as an NTP step would.
"""

from __future__ import annotations

import time

import crashkit
import crashtrials
import faultkit
import pytest
from test_crash_durable import q

from frontdesk.core.runner import RESTART

pytestmark = [pytest.mark.faults, pytest.mark.backends("sqlite", "postgres")]

LEASE = 2.0
CALLERS = 3


def skewed(offset: str) -> dict[str, str]:
    return faultkit.faketime(FAKETIME=offset, FAKETIME_DONT_FAKE_MONOTONIC="1")


def start_runner(db_url: str, **env: str):  # noqa: ANN201
    runner = crashkit.start("runner", "--db", db_url, lease=LEASE, **env)
    crashkit.wait_until(lambda: q(db_url, "SELECT 1 FROM runners"), timeout=60, proc=runner)
    return runner


@pytest.mark.parametrize(
    "who,offset", [("runner", "+1h"), ("runner", "-1h"), ("call", "+1h"), ("call", "-1h")]
)
def test_an_hour_off_on_one_process_fails_no_live_turn(db_url, tmp_path, who, offset):
    crashtrials._queue(db_url, [])  # the schema, before either process looks
    runner = start_runner(db_url, **(skewed(offset) if who == "runner" else {}))
    scenario = crashkit.write_scenario(
        tmp_path / "slow.yaml",
        "ann",
        [
            crashtrials.TO_LAB,
            # Three leases long: the runner judges these leases several times meanwhile.
            {"user": "look up argon", "llm": [
                {"tools": [{"lookup": {"query": "argon", "seconds": 3 * LEASE}}]},
                {"say": "Done."}]},
            {"expect": {"task": "lookup", "status": "succeeded"}},
        ],
    )  # fmt: skip
    try:
        call = crashkit.start(
            "simulate", str(scenario), "--json", "--db", db_url, "--no-runner",
            "--callers", str(CALLERS), lease=LEASE,
            **(skewed(offset) if who == "call" else {}),
        )  # fmt: skip
        try:
            call.wait(120)
        finally:
            out, err = crashkit.stop(call)
    finally:
        crashkit.stop(runner)
    rows = q(db_url, "SELECT status, error FROM tasks WHERE tool = 'lookup'")
    wrongly_failed = sum(1 for _, error in rows if error and error.startswith(RESTART))
    print(f"{who} {offset}: {len(rows)} turns, {wrongly_failed} wrongly failed")
    assert wrongly_failed == 0, rows
    assert [s for s, _ in rows] == ["succeeded"] * CALLERS, (rows, err[-2000:])
    assert call.returncode == 0, err[-2000:]


def test_a_call_an_hour_ahead_that_dies_is_closed_within_leases(db_url, tmp_path):
    """Its lease reads an hour in the future by every other clock; it is closed once nobody
    renewed it for a lease, not an hour later."""
    crashtrials._queue(db_url, [])
    runner = start_runner(db_url)
    scenario = crashkit.write_scenario(
        tmp_path / "dies.yaml",
        "cy",
        [
            crashtrials.TO_LAB,
            {"user": "look up argon", "llm": [
                {"tools": [{"lookup": {"query": "argon", "seconds": 600}}]}, {"say": "x"}]},
        ],
    )  # fmt: skip
    try:
        call = crashkit.start(
            "simulate", str(scenario), "--json", "--db", db_url, "--no-runner", lease=LEASE,
            **skewed("+1h"),
        )  # fmt: skip
        try:
            crashkit.wait_until(
                lambda: q(
                    db_url, "SELECT 1 FROM tasks WHERE tool = 'lookup' AND status = 'running'"
                ),
                timeout=60,
                proc=call,
            )
        finally:
            assert crashkit.kill(call)
        killed = time.monotonic()
        crashkit.wait_until(
            lambda: q(db_url, "SELECT 1 FROM tasks WHERE tool = 'lookup' AND status = 'failed'"),
            timeout=60,
            proc=runner,
        )
        closed_after = time.monotonic() - killed
    finally:
        crashkit.stop(runner)
    [(status, error)] = q(db_url, "SELECT status, error FROM tasks WHERE tool = 'lookup'")
    print(f"a dead call an hour ahead closed {closed_after:.2f} s after its kill")
    assert status == "failed" and error == RESTART
    assert closed_after < 20 * LEASE  # leases, not the hour its clock claimed


@pytest.mark.parametrize("offset", ["+1h", "-1h"])
def test_two_live_runners_one_an_hour_off_run_every_job_once(db_url, tmp_path, offset):
    """Background jobs hold no lease: DBOS runs each on one executor, and a runner is judged
    dead only by its beat count on the judge's monotonic clock. Both runners live, one an hour
    off: no job starts twice."""
    import kit
    from test_crash_durable import STEPS, effects_of, wait_status

    log = tmp_path / "effects.jsonl"
    crashtrials._queue(db_url, [])
    env = {kit.EFFECTS: str(log), "FRONTDESK_RUNNER_CONCURRENCY": "3"}
    a = start_runner(db_url, **env, **skewed(offset))
    b = crashkit.start("runner", "--db", db_url, lease=LEASE, **env)
    try:
        crashkit.wait_until(lambda: len(q(db_url, "SELECT 1 FROM runners")) == 2, 60, b)
        ids = crashtrials._queue(
            db_url, [(f"c{n}", {"name": f"j{n}", "seconds": 0.3}) for n in range(12)],
            tool="pipeline",
        )  # fmt: skip
        wait_status(db_url, ids, "succeeded", 120, b)
        # Past a takeover bound of both beating (3 s here): still nobody judged dead.
        time.sleep(4.0)
        states = q(db_url, "SELECT state FROM runners")
    finally:
        crashkit.stop(a)
        crashkit.stop(b)
    doubled = 0
    for task_id in ids:
        ran = [e for e in effects_of(log, task_id) if e in STEPS]
        doubled += len(ran) - len(STEPS)
        assert sorted(ran) == sorted(STEPS), (task_id, ran)
    starts = q(db_url, "SELECT attempts FROM tasks WHERE tool = 'pipeline'")
    print(f"runner {offset} beside a correct one: {len(ids)} jobs, {doubled} steps doubled, "
          f"attempts {sorted({a for (a,) in starts})}")  # fmt: skip
    assert doubled == 0 and {a for (a,) in starts} == {1}
    assert states == [("running",), ("running",)], states
