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
        disable_plugins=",".join(host.builtin_names()),
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
    for event in range(5):
        registry.observe(event)
    # observe() only queues: no await has happened yet, so no async observer has run, and the
    # sync ones run on the hook thread (asserted below), never inline.
    assert async_recorder.events == []

    # The event loop keeps running while the observers hang: other coroutines still get turns.
    other_ran = asyncio.Event()
    asyncio.get_running_loop().call_soon(other_ran.set)
    await asyncio.wait_for(other_ran.wait(), timeout=5)

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


def test_hook_calls_share_a_thread_until_one_hangs():
    idents: list[int] = []
    release = threading.Event()

    def record() -> str:
        idents.append(threading.get_ident())
        return "ok"

    def hang() -> None:
        idents.append(threading.get_ident())
        release.wait(10)

    assert [observers.call_with_timeout(record, 1.0) for _ in range(3)] == ["ok"] * 3
    assert len(set(idents)) == 1 and idents[0] != threading.get_ident()

    try:
        observers.call_with_timeout(hang, 0.1)
    except observers.HookTimeout:
        pass
    else:
        raise AssertionError("a hung hook must time out")
    assert not release.is_set()  # it timed out while the hook still hung
    hung = idents[-1]
    assert hung == idents[0]

    # The next call does not queue behind the hung one: it gets a fresh thread.
    assert observers.call_with_timeout(record, 1.0) == "ok"
    assert idents[-1] != hung
    release.set()
    deadline = time.monotonic() + 5
    while any(t.ident == hung for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.ident == hung for t in threading.enumerate())  # it left once released


async def test_sync_observer_events_share_one_thread():
    class Idents:
        def __init__(self) -> None:
            self.events: list[int] = []
            self.idents: set[int] = set()

        @hookimpl
        def on_task_event(self, event):
            self.events.append(event)
            self.idents.add(threading.get_ident())

    observer = Idents()
    registry = host.load(settings(), extra=[("idents", observer)])
    for event in range(20):
        registry.observe(event)
    await registry.drain(timeout=5)
    assert observer.events == list(range(20))
    assert len(observer.idents) == 1 and threading.get_ident() not in observer.idents


def test_events_outside_an_event_loop_still_reach_sync_observers():
    class Seen:
        def __init__(self) -> None:
            self.events: list[int] = []
            self.done = threading.Event()

        @hookimpl
        def on_task_event(self, event):
            self.events.append(event)
            self.done.set()

    observer = Seen()
    registry = host.load(settings(), extra=[("seen", observer)])
    before = {t.ident for t in threading.enumerate()}
    registry.observe(7)  # no running loop here
    assert observer.done.wait(5) and observer.events == [7]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        extra = [
            t for t in threading.enumerate() if t.ident not in before and t.name == "frontdesk-hook"
        ]
        if not extra:
            break
        time.sleep(0.01)
    assert extra == []  # its thread left after the one call instead of idling
