"""Concurrency: two processes on one SQLite file with 100 calls each (each with its own runner,
a DBOS executor): no lock errors, no lost or doubled work, every row accounted for. Two runner
processes sharing a queue, one of them killed, are in test_crash_durable.py."""

from __future__ import annotations

import crashkit
import crashtrials


def test_two_processes_100_calls_each_on_one_sqlite_file(tmp_path, db_url):
    """Two `frontdesk simulate --callers 100` processes (each with its own embedded runner)
    share one SQLite file: no "database is locked", and every row of every call is there."""
    out = crashtrials.two_processes(db_url, tmp_path, calls=100)
    assert out.details["returncodes"] == [0, 0], out.details["stderr"]
    assert out.details["lock_errors"] == 0
    assert not any("Traceback" in e or "locked" in e.lower() for e in out.details["stderr"])
    events = out.details["events"]
    assert events["session_start"] == events["session_end"] == 200
    assert events.get("error", 0) == 0 and events.get("expect_failed", 0) == 0
    assert (out.rows, out.lost, out.doubled) == (600, 0, 0)
    # Every transition is in the audit trail.
    [(missing,)] = crashkit.query(
        db_url,
        "SELECT count(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM task_events e "
        "WHERE e.task_id = t.id AND e.status = 'succeeded')",
    )
    assert missing == 0
    assert out.details["runners"] == 2  # both processes' runners took jobs
