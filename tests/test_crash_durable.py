"""Durable jobs under SIGKILL: real ``frontdesk runner`` processes (DBOS executors) killed at
chosen points, on SQLite and Postgres. Each test counts effects in a file the job's steps
append to (fsynced, so a kill cannot lose one), and the rows our tables keep.

- a 3-step job killed after each step resumes at the next step; finished steps happen once;
- two runners, one killed mid-job: every job finishes once, the dead runner's jobs taken over
  within the bound (3 s here, FRONTDESK_RUNNER_TAKEOVER_SECONDS);
- a durable sleep survives a runner restart and wakes on time (5 s here; the 60 s trial is
  ``test_a_60s_sleep_...``, run by .ci/run with FRONTDESK_SLOW_TRIALS=1);
- a redeploy (changed job code, same pinned job version) finishes the old work.
"""

from __future__ import annotations

import glob
import time
from collections import Counter
from pathlib import Path
from typing import Any

import crashkit
import crashtrials
import kit
import pytest
import sqlalchemy as sa

pytestmark = pytest.mark.backends("sqlite", "postgres")

STEPS = ("gather", "write", "draw")
TAKEOVER = 3.0


def q(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on either backend, read with a plain synchronous engine."""
    parsed = sa.make_url(url)
    sync = (
        parsed.set(drivername="sqlite")
        if parsed.get_backend_name() == "sqlite"
        else parsed.set(drivername="postgresql+psycopg")
    )
    engine = sa.create_engine(sync, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql), params).all()]
    finally:
        engine.dispose()


def status_of(url: str, task_id: int) -> str | None:
    rows = q(url, "SELECT status FROM tasks WHERE id = :id", id=task_id)
    return rows[0][0] if rows else None


def wait_status(url: str, ids: list[int], status: str, timeout: float, proc=None) -> None:
    crashkit.wait_until(
        lambda: all(status_of(url, i) == status for i in ids), timeout=timeout, proc=proc
    )


def effects_of(log: Path, task_id: int) -> list[str]:
    return [e["effect"] for e in kit.effects(log) if e.get("task") == task_id]


def test_a_three_step_job_killed_after_each_step_resumes_at_the_next(db_url, tmp_path):
    """One job, killed after gather, again after write, again after draw: each restart
    resumes at the next step, and every step's effect happened once."""
    log = tmp_path / "effects.jsonl"
    [job] = crashtrials._queue(db_url, [("ada", {"name": "k"})], tool="pipeline")
    for step in STEPS:
        env = {kit.EFFECTS: str(log), kit.HANG_AFTER: step}
        runner = crashkit.start("runner", "--db", db_url, **env)
        try:
            crashkit.wait_until(
                lambda step=step: f"hung after {step}" in effects_of(log, job), 60, runner
            )
        finally:
            assert crashkit.kill(runner)
        done = effects_of(log, job)
        # The finished steps were not redone; this run did only the next one.
        assert [e for e in done if e in STEPS] == list(STEPS[: STEPS.index(step) + 1]), done
    last = crashkit.start("runner", "--db", db_url, **{kit.EFFECTS: str(log)})
    try:
        wait_status(db_url, [job], "succeeded", 60, last)
    finally:
        crashkit.stop(last)
    assert effects_of(log, job) == [
        "gather", "hung after gather", "write", "hung after write", "draw", "hung after draw",
    ]  # fmt: skip
    [(attempts, result)] = q(db_url, "SELECT attempts, result FROM tasks WHERE id = :id", id=job)
    assert attempts == 4 and "gather, write, draw" in str(result)
    [(finishes,)] = q(
        db_url,
        "SELECT count(*) FROM task_events WHERE task_id = :id AND status = 'succeeded'",
        id=job,
    )
    assert finishes == 1


def test_two_runners_one_killed_mid_job_every_job_finishes_once(db_url, tmp_path):
    two_runners_one_killed(db_url, tmp_path)


FAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))


@pytest.mark.backends("sqlite")
@pytest.mark.skipif(not FAKETIME, reason="needs libfaketime (.ci/run installs faketime)")
def test_a_runner_an_hour_ahead_doubles_nothing_and_is_taken_over_on_time(db_url, tmp_path):
    """The killed runner's clock is an hour ahead (libfaketime): liveness is judged by its beat
    count on the other's monotonic clock, so the skew neither doubles a job while both live
    nor delays the takeover."""
    # Wall clock only: libfaketime's faked monotonic clock breaks timed waits (an hour long).
    skew = {"LD_PRELOAD": FAKETIME[0], "FAKETIME": "+1h", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    two_runners_one_killed(db_url, tmp_path, skew)


def two_runners_one_killed(db_url: str, tmp_path: Path, skew: dict[str, str] | None = None):
    log = tmp_path / "effects.jsonl"
    crashtrials._queue(db_url, [])  # the schema, before either runner looks at it
    env = {kit.EFFECTS: str(log), "FRONTDESK_RUNNER_CONCURRENCY": "3"}
    a = crashkit.start("runner", "--db", db_url, takeover=TAKEOVER, **env, **(skew or {}))
    crashkit.wait_until(lambda: q(db_url, "SELECT 1 FROM runners"), timeout=60, proc=a)
    b = crashkit.start("runner", "--db", db_url, takeover=TAKEOVER, **env)
    try:
        crashkit.wait_until(lambda: len(q(db_url, "SELECT 1 FROM runners")) == 2, 60, b)
        [(a_id,)] = q(db_url, "SELECT executor_id FROM runners WHERE pid = :p", p=a.pid)
        # Both runners must have beaten a while, or a sweeper would not judge anyone yet.
        time.sleep(TAKEOVER)
        ids = crashtrials._queue(
            db_url, [(f"c{n}", {"name": f"j{n}", "seconds": 0.4}) for n in range(12)],
            tool="pipeline",
        )  # fmt: skip

        on_a_sql = (
            "SELECT DISTINCT t.id FROM tasks t JOIN task_events e ON e.task_id = t.id "
            "WHERE t.status = 'running' AND e.note = :note"
        )
        note = f"started by runner {a_id}"

        def a_mid_job() -> list[int]:
            rows = q(db_url, on_a_sql, note=note)
            return [r[0] for r in rows if "gather" in effects_of(log, r[0])]

        crashkit.wait_until(a_mid_job, timeout=60, proc=a)
        on_a = q(db_url, on_a_sql, note=note)
        killed_at = time.time()
        assert crashkit.kill(a)
        wait_status(db_url, ids, "succeeded", 90, b)
    finally:
        crashkit.kill(a)
        crashkit.stop(b)
    taken = [i for (i,) in on_a]
    assert taken, "the killed runner was running nothing"
    for task_id in ids:
        counts = Counter(e for e in effects_of(log, task_id) if e in STEPS)
        assert set(counts) == set(STEPS), (task_id, counts)
        # At least once: only the step in flight at the kill may have run twice.
        assert sum(n - 1 for n in counts.values()) <= (1 if task_id in taken else 0), counts
    finishes = Counter(
        i for (i,) in q(db_url, "SELECT task_id FROM task_events WHERE status = 'succeeded'")
    )
    assert all(finishes[i] == 1 for i in ids), finishes
    # Taken over within the bound: the dead runner's jobs started again on the live one.
    resumed = []
    for task_id in taken:
        starts = [e for e in kit.effects(log) if e.get("task") == task_id and e["pid"] == b.pid]
        resumed.append(min(e["at"] for e in starts) - killed_at)
    print(f"taken over after {', '.join(f'{r:.2f}' for r in sorted(resumed))} s")  # -s shows it
    # The bound is judged on the live runner's monotonic clock, which a loaded machine stretches
    # (7.7 s seen for this 3 s bound in a full suite at load 10); the figure itself is measured
    # in bench/reliability.py. Here: taken over, and not by some slow fallback.
    assert max(resumed) <= 4 * TAKEOVER, resumed
    assert q(db_url, "SELECT state FROM runners WHERE executor_id = :a", a=a_id) == [("gone",)]


def test_a_durable_sleep_survives_a_runner_restart_and_wakes_on_time(db_url, tmp_path):
    sleep_through_a_restart(db_url, tmp_path, seconds=5.0)


@pytest.mark.slow_trial
def test_a_60s_sleep_survives_a_runner_restart_and_wakes_on_time(db_url, tmp_path):
    sleep_through_a_restart(db_url, tmp_path, seconds=60.0)


def sleep_through_a_restart(db_url: str, tmp_path: Path, seconds: float) -> None:
    log = tmp_path / "effects.jsonl"
    [job] = crashtrials._queue(db_url, [("ada", {"seconds": seconds})], tool="nap")
    first = crashkit.start("runner", "--db", db_url, **{kit.EFFECTS: str(log)})
    try:
        crashkit.wait_until(lambda: "nap start" in effects_of(log, job), 60, first)
        time.sleep(1.0)  # asleep now
    finally:
        assert crashkit.kill(first)
    again = crashkit.start("runner", "--db", db_url, **{kit.EFFECTS: str(log)})
    try:
        wait_status(db_url, [job], "succeeded", seconds + 60, again)
    finally:
        crashkit.stop(again)
    stamps = [e for e in kit.effects(log) if e.get("task") == job]
    assert [e["effect"] for e in stamps] == ["nap start", "nap woke"]  # not slept again
    assert stamps[1]["pid"] == again.pid != stamps[0]["pid"]
    late = stamps[1]["at"] - stamps[0]["at"] - seconds
    assert -0.5 <= late <= 2.0, f"woke {late:+.2f}s from its time"


def test_a_redeploy_with_changed_job_code_finishes_the_old_work(db_url, tmp_path):
    log = tmp_path / "effects.jsonl"
    [job] = crashtrials._queue(db_url, [("ada", {"name": "old"})], tool="pipeline")
    first = crashkit.start(
        "runner", "--db", db_url, **{kit.EFFECTS: str(log), kit.HANG_AFTER: "write"}
    )
    try:
        crashkit.wait_until(lambda: "hung after write" in effects_of(log, job), 60, first)
    finally:
        assert crashkit.kill(first)
    # The new deployment: the job's last step changed; the pinned job version did not.
    new = crashkit.start("runner", "--db", db_url, **{kit.EFFECTS: str(log), kit.VERSION: "2"})
    try:
        wait_status(db_url, [job], "succeeded", 60, new)
    finally:
        crashkit.stop(new)
    [(result,)] = q(db_url, "SELECT result FROM tasks WHERE id = :id", id=job)
    assert "gather, write, draw v2" in str(result)
    assert Counter(e for e in effects_of(log, job) if e in STEPS) == dict.fromkeys(STEPS, 1)
