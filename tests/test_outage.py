"""The process's outage log (db/outage.py): a line per state change, not per failure."""

from __future__ import annotations

import logging

from sqlalchemy.exc import OperationalError

from frontdesk.db.outage import Outage, quiet, store_down


def down_error() -> OperationalError:
    return OperationalError("SELECT 1", {}, ConnectionRefusedError(111, "refused"))


def test_one_line_down_one_every_interval_one_back(caplog):
    clock = [0.0]
    outage = Outage(still_every=30.0, clock=lambda: clock[0])
    outage.ok()  # it answered once: from here an outage is news
    with caplog.at_level(logging.DEBUG, logger="frontdesk.store"):
        for t in range(0, 95):  # a failure every second for 95 s
            clock[0] = float(t)
            assert outage.failed(down_error())
        clock[0] = 100.0
        outage.ok()
        outage.ok()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5, lines  # down, still at 30, 60, 90, back
    assert "not answering (" in lines[0] and "answering again after 100 s" in lines[-1]
    assert all("still not answering" in line for line in lines[1:4])
    assert not [r for r in caplog.records if r.exc_info]


def test_a_bug_is_not_an_outage_and_a_failure_before_any_answer_is_the_callers():
    outage = Outage()
    assert not outage.failed(ValueError("a bug")) and not outage.is_down
    assert outage.failed(down_error()) and outage.is_down  # counted, logged at debug only
    assert not outage._told
    assert store_down(down_error()) and not store_down(KeyError("x"))


def test_a_librarys_outage_lines_go_to_the_outage_log(caplog):
    outage = Outage()
    outage.ok()
    quiet("test.outage.lib", outage)
    lib = logging.getLogger("test.outage.lib")
    with caplog.at_level(logging.INFO):
        for _ in range(20):
            lib.warning("Exception encountered in queue thread: connection failed: refused")
            lib.warning(
                "stamina.retry_scheduled",
                extra={"stamina.caused_by": "ConnectionRefusedError(111)"},
            )
        lib.warning("an unrelated warning")
    said = [r.getMessage() for r in caplog.records]
    assert said.count("an unrelated warning") == 1
    assert sum("not answering" in s for s in said) == 1 and outage.failures == 40
