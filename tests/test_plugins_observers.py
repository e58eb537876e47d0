"""``on_task_event`` observers run in the background: one that raises or hangs never delays
or breaks the caller, and the others still see every event, in order."""

from __future__ import annotations

import asyncio
import threading
import time

from frontdesk.core import hookimpl, host, observers
from frontdesk.core.settings import Settings


def settings(timeout: float = 0.2) -> Settings:
    return Settings(
        _env_file=None,
        load_plugins="",
        disable_plugins=",".join(host.BUILTINS),
        hook_timeout_seconds=timeout,
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[int] = []
        self.threads: set[str] = set()

    @hookimpl
    def on_task_event(self, event):
        self.threads.add(threading.current_thread().name)
        self.events.append(event)


class AsyncRecorder:
    def __init__(self) -> None:
        self.events: list[int] = []

    @hookimpl
    async def on_task_event(self, event):
        await asyncio.sleep(0.001 * (5 - event))  # later events finish sooner; order must hold
        self.events.append(event)


class Raises:
    @hookimpl
    def on_task_event(self, event):
        raise RuntimeError("observer broke")


class HangsAsync:
    @hookimpl
    async def on_task_event(self, event):
        await asyncio.sleep(30)


class SwallowsCancel:
    @hookimpl
    async def on_task_event(self, event):
        for _ in range(20):
            try:
                await asyncio.sleep(0.1)
            except asyncio.CancelledError:
                pass


class BlocksThread:
    @hookimpl
    def on_task_event(self, event):
        time.sleep(30)  # a sync observer that never returns


class NoArgs:
    calls = 0

    @hookimpl
    def on_task_event(self):
        NoArgs.calls += 1


async def test_broken_observers_never_delay_the_caller_and_the_others_see_everything():
    recorder, async_recorder = Recorder(), AsyncRecorder()
    registry = host.load(
        settings(),
        extra=[
            ("raises", Raises()),
            ("hangs", HangsAsync()),
            ("swallows", SwallowsCancel()),
            ("blocks", BlocksThread()),
            ("recorder", recorder),
            ("async_recorder", async_recorder),
            ("noargs", NoArgs()),
        ],
    )
    started = time.perf_counter()
    for event in range(5):
        registry.observe(event)
    assert time.perf_counter() - started < 0.05  # observe() only queues

    # The event loop keeps running while the observers hang: a short sleep stays short.
    tick = time.perf_counter()
    await asyncio.sleep(0.05)
    assert time.perf_counter() - tick < 0.5

    await registry.drain(timeout=5)
    assert recorder.events == [0, 1, 2, 3, 4]
    assert async_recorder.events == [0, 1, 2, 3, 4]
    assert NoArgs.calls == 5
    # Sync observers run off the event loop's thread.
    assert recorder.threads == {"frontdesk-hook"}


async def test_observer_that_keeps_hanging_is_switched_off_and_reported():
    registry = host.load(settings(timeout=0.05), extra=[("hangs", HangsAsync())])
    for event in range(observers.MAX_TIMEOUTS + 2):
        registry.observe(event)
    await registry.drain(timeout=5)
    errors = registry.plugins["hangs"].errors
    assert errors == [
        f"on_task_event timed out {observers.MAX_TIMEOUTS} times in a row (>0.05s); switched off"
    ]
    registry.observe(99)  # ignored from now on; still returns at once
    await registry.drain(timeout=1)
