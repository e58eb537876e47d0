"""Graceful shutdown of a real ``frontdesk runner`` process: SIGTERM stops taking jobs, leaves
the running job pending in DBOS (not failed, not re-queued from scratch), says so in the
``runners`` table, and exits promptly with status 0; the next runner resumes the job at once
after its last finished step."""

from __future__ import annotations

import signal
import time

import crashkit
import crashtrials
import kit
import pytest

EXIT_BOUND_SECONDS = 10.0  # STOP_GRACE_SECONDS (5) for stubborn jobs, plus closing the store


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_leaves_the_running_job_to_the_next_runner_and_exits_within_a_bound(
    settings, sig, tmp_path
):
    url = settings.database_url
    log = tmp_path / "effects.jsonl"
    [job_id] = crashtrials._queue(url, [("ada", {"name": "long"})], tool="pipeline")
    # A takeover bound of 60 s: were the stop not recorded, nobody would resume it for a minute.
    env = {kit.EFFECTS: str(log), kit.HANG_AFTER: "gather"}
    runner = crashkit.start("runner", "--db", url, takeover=60, **env)
    try:
        crashkit.wait_until(
            lambda: "hung after gather" in [e["effect"] for e in kit.effects(log)],
            timeout=30,
            proc=runner,
        )
        runner.send_signal(sig)
        started = time.monotonic()
        out, err = crashkit.finish(runner, timeout=30)
        took = time.monotonic() - started
    finally:
        if runner.poll() is None:
            crashkit.kill(runner)
    assert runner.returncode == 0, err
    assert took < EXIT_BOUND_SECONDS, f"runner took {took:.1f}s to exit"
    [(status, attempts)] = crashkit.query(
        url, "SELECT status, attempts FROM tasks WHERE id = ?", job_id
    )
    assert (status, attempts) == ("running", 1)
    [(executor, state)] = crashkit.query(
        url, "SELECT executor_id, state FROM runners WHERE pid = ?", runner.pid
    )
    assert state == "stopped"
    # The next runner (here another process on another slot would do as well) resumes it.
    again = crashkit.start("runner", "--db", url, takeover=60, **{kit.EFFECTS: str(log)})
    try:
        crashkit.wait_until(
            lambda: crashkit.query(
                url, "SELECT 1 FROM tasks WHERE id = ? AND status = 'succeeded'", job_id
            ),
            timeout=30,
            proc=again,
        )
    finally:
        crashkit.stop(again)
    assert [e["effect"] for e in kit.effects(log)] == [
        "gather", "hung after gather", "write", "draw",
    ]  # fmt: skip
    notes = [
        n
        for (n,) in crashkit.query(
            url, "SELECT note FROM task_events WHERE task_id = ? ORDER BY id", job_id
        )
    ]
    assert notes.count(f"started by runner {executor}") == 2  # its own slot, taken back
    assert "Traceback" not in err
