"""Takeover rules (core/takeover.py), on a stand-in registry of runners: who is judged dead,
and when. The real thing (runner processes SIGKILLed) is in test_crash_durable.py."""

from __future__ import annotations

import os
import time

import pytest

from frontdesk.core import takeover
from frontdesk.db.runners import GONE, RUNNING, STOPPED, RunnerInfo


class Registry:
    """The ``runners`` table's part of the store, in memory."""

    def __init__(self) -> None:
        self.rows: dict[str, RunnerInfo] = {}
        self.down = False

    def add(self, executor: str, state: str = RUNNING) -> None:
        self.rows[executor] = RunnerInfo(executor, "h", 1, "1", state, 0)

    def bump(self, executor: str) -> None:
        row = self.rows[executor]
        self.rows[executor] = (
            RunnerInfo(*row[:5], row.beats + 1)
            if False
            else RunnerInfo(
                row.executor_id, row.host, row.pid, row.version, row.state, row.beats + 1
            )
        )

    async def beat(self, executor: str) -> bool:
        if self.down:
            raise OSError("database down")
        held = self.rows[executor].state == RUNNING
        if held:
            self.bump(executor)
        return held

    async def runners(self) -> list[RunnerInfo]:
        if self.down:
            raise OSError("database down")
        return list(self.rows.values())

    async def revive_runner(self, executor: str, pid: int) -> bool:
        row = self.rows[executor]
        if row.pid != pid:
            return False
        self.rows[executor] = RunnerInfo(
            row.executor_id, row.host, row.pid, row.version, RUNNING, row.beats + 1
        )
        return True

    async def mark_runner(self, executor: str, state: str, *, beats: int | None = None) -> bool:
        row = self.rows[executor]
        if beats is not None and row.beats != beats:
            return False
        self.rows[executor] = RunnerInfo(
            row.executor_id, row.host, row.pid, row.version, state, row.beats
        )
        return True


@pytest.fixture
def clock(monkeypatch):
    """The sweeper's monotonic clock, moved by hand (wall clock untouched and unused)."""
    now = [1000.0]
    monkeypatch.setattr(takeover.time, "monotonic", lambda: now[0])
    return now


def sweeper(reg: Registry, resumed: list[str]) -> takeover.Sweeper:
    async def resume(executor: str) -> int:
        resumed.append(executor)
        return 1

    return takeover.Sweeper(reg, "me", 30.0, resume)  # type: ignore[arg-type]


async def test_a_silent_runner_is_taken_over_after_two_thirds_of_the_bound(clock):
    reg, resumed = Registry(), []
    reg.add("me")
    reg.add("other")
    s = sweeper(reg, resumed)
    assert s.interval == 5 and s.dead_after == 20
    await s.beat()
    for _ in range(4):  # the other beats too: never judged, however long it lives
        clock[0] += 5
        reg.bump("other")
        await s.beat()
        assert await s.sweep() == []
    for _ in range(3):  # then it goes silent
        clock[0] += 5
        await s.beat()
        assert await s.sweep() == []
    clock[0] += 5  # 20 s of silence as this sweeper saw it
    await s.beat()
    assert await s.sweep() == ["other"] and resumed == ["other"]
    assert reg.rows["other"].state == GONE
    assert await s.sweep() == []  # once


async def test_a_stopped_runner_is_taken_over_at_once(clock):
    reg, resumed = Registry(), []
    reg.add("me")
    reg.add("other", STOPPED)
    s = sweeper(reg, resumed)
    await s.beat()
    clock[0] += s.dead_after  # this sweeper must itself be healthy that long first
    await s.beat()
    assert await s.sweep() == ["other"]


async def test_after_an_outage_nobody_is_judged_until_the_live_ones_could_beat(clock):
    reg, resumed = Registry(), []
    reg.add("me")
    reg.add("other")
    s = sweeper(reg, resumed)
    await s.beat()
    clock[0] += 25
    await s.sweep()  # sees the other's count
    reg.down = True  # the database goes away for a minute: nobody's count moves
    for _ in range(12):
        clock[0] += 5
        assert await s.beat() is True  # a failed beat is not "taken over"
        assert await s.sweep() == []  # and an unhealthy sweeper judges nobody
    reg.down = False
    clock[0] += 5
    await s.beat()
    assert await s.sweep() == []  # just healthy again: the other gets its chance to beat
    for _ in range(4):
        clock[0] += 5
        reg.bump("other")
        await s.beat()
        assert await s.sweep() == []
    assert resumed == [] and reg.rows["other"].state == RUNNING


async def test_a_runner_that_beat_after_the_scan_keeps_its_id(clock):
    reg, resumed = Registry(), []
    reg.add("me")
    reg.add("other")
    s = sweeper(reg, resumed)
    await s.beat()
    await s.sweep()
    clock[0] += 25
    await s.beat()
    real = reg.runners

    async def scan_then_beat() -> list[RunnerInfo]:
        rows = await real()
        reg.bump("other")  # it beats between the scan and the mark
        return rows

    reg.runners = scan_then_beat  # type: ignore[method-assign]
    assert await s.sweep() == [] and resumed == []
    assert reg.rows["other"].state == RUNNING


async def test_a_runner_judged_dead_while_alive_takes_its_id_back(caplog):
    reg = Registry()
    reg.add("me")
    s = sweeper(reg, [])
    assert await s.beat() is True
    reg.rows["me"] = RunnerInfo("me", "h", os.getpid(), "1", GONE, 5)
    assert await s.beat() is True and reg.rows["me"].state == RUNNING
    assert "judged dead by another runner" in caplog.text
    reg.rows["me"] = RunnerInfo("me", "h", os.getpid() + 1, "1", GONE, 7)  # another process's
    assert await s.beat() is False


def test_wall_clock_is_not_used():
    import inspect

    source = inspect.getsource(takeover)
    assert "time.time(" not in source and "utcnow" not in source and "datetime" not in source
    assert time.monotonic  # the only clock the sweeper reads
