"""Calling plugin hooks under a time limit, and delivering task events to ``on_task_event``
hooks without ever holding up a call.

Kept apart from the plugin host because these rules are about time, not registration: a hook
runs in a daemon thread it may be abandoned in, and each observer plugin gets its own FIFO,
worker and hook thread per event loop, so events arrive in order and a slow, failing or hung
observer only ever delays itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger("frontdesk.plugins")

# A sync observer that hangs leaves a thread behind each time; after this many timeouts in a
# row the observer is switched off for the rest of the process.
MAX_TIMEOUTS = 3
QUEUE_SIZE = 1000
# A hook thread with nothing to do for this long exits; the next call starts another.
IDLE_SECONDS = 10.0


class HookThread:
    """A daemon thread that runs hook calls one after another, so a process does not start a
    thread per call (with 50 plugins that was most of what loading them cost).

    Calls that time out are why it is a thread at all: such a call may never return, so the
    thread is abandoned (it exits if the call ever does) and the next call gets a fresh one.
    Daemon, so a hung hook never keeps the process from exiting; one per caller rather than a
    shared pool, so a hung hook holds up nobody else.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] | None = None
        self._lock = threading.Lock()

    def submit(
        self, fn: Callable[..., Any], kwargs: dict[str, Any]
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                threading.Thread(
                    target=self._serve, args=(self._queue,), daemon=True, name="frontdesk-hook"
                ).start()
            self._queue.put((fn, kwargs, future))
        return future

    def abandon(self) -> None:
        """Leave the current thread to its (possibly hung) call; the next call starts anew."""
        with self._lock:
            stale, self._queue = self._queue, None
        if stale is not None:
            stale.put(None)

    def _serve(self, calls: queue.SimpleQueue[Any]) -> None:
        while True:
            try:
                call = calls.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                # Idle threads go (an event loop that ended leaves its observers' behind);
                # under the lock, so no call is put on a queue that nobody serves.
                with self._lock:
                    if self._queue is calls and calls.empty():
                        self._queue = None
                        return
                continue
            if call is None:
                return
            fn, kwargs, future = call
            # The waiter may have given up (a timeout cancels the future): nobody listens.
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(**kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


class HookTimeout(TimeoutError):
    pass


# Each thread that calls hooks (the host loading plugins) has its own hook thread.
_callers = threading.local()


def call_with_timeout(fn: Callable[..., Any], timeout: float, **kwargs: Any) -> Any:
    """Run a plugin hook, giving up after ``timeout`` seconds (its thread is abandoned)."""
    runner: HookThread | None = getattr(_callers, "hook_thread", None)
    if runner is None:
        runner = _callers.hook_thread = HookThread()
    future = runner.submit(fn, kwargs)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        runner.abandon()
        raise HookTimeout(f"did not return within {timeout:g}s") from None


def call_kwargs(impl: Any, offered: dict[str, Any]) -> dict[str, Any]:
    """The arguments a hookimpl asked for; pluggy lets it take a subset of the spec's."""
    return {k: v for k, v in offered.items() if k in impl.argnames}


class Observers:
    """Queues events for ``impls`` (on_task_event hookimpls, in load order)."""

    def __init__(
        self, impls: list[Any], timeout: float, report: Callable[[str, str], None]
    ) -> None:
        self.impls = impls
        self.timeout = timeout
        self.report = report  # (plugin name, message) -> None: shown by `plugins list`
        # Queues belong to one event loop; each loop (a test, a second asyncio.run, a thread
        # with its own loop) gets its own, dropped with the loop.
        self.loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Queue[Any]]
        ] = weakref.WeakKeyDictionary()
        self.workers: set[asyncio.Task[None]] = set()
        self.timeouts: dict[str, int] = {}
        self.off: set[str] = set()

    def put(self, event: Any) -> None:
        impls = [i for i in self.impls if i.plugin_name not in self.off]
        if not impls:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a sync caller): fire and forget, a thread each
            for impl in impls:
                thread = HookThread()
                thread.submit(impl.function, call_kwargs(impl, {"event": event}))
                thread.abandon()  # its one call done, the thread exits instead of idling
            return
        queues = self.loops.setdefault(loop, {})
        for impl in impls:
            queue = queues.get(impl.plugin_name)
            if queue is None:
                queue = queues[impl.plugin_name] = asyncio.Queue(QUEUE_SIZE)
                worker = loop.create_task(
                    self._work(impl, queue, HookThread()), name=f"observer-{impl.plugin_name}"
                )
                self.workers.add(worker)
                worker.add_done_callback(self.workers.discard)
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                log.warning("plugin %s: on_task_event is behind; event dropped", impl.plugin_name)

    async def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every queued event to be handled."""
        queues = self.loops.get(asyncio.get_running_loop(), {})
        joins = [asyncio.ensure_future(q.join()) for q in queues.values()]
        if joins:
            _, pending = await asyncio.wait(joins, timeout=timeout)
            for join in pending:
                join.cancel()

    async def _work(self, impl: Any, queue: asyncio.Queue[Any], thread: HookThread) -> None:
        while True:
            event = await queue.get()
            try:
                if impl.plugin_name not in self.off:
                    await self._deliver(impl, event, thread)
            except Exception as exc:
                log.warning("plugin %s: on_task_event failed: %r", impl.plugin_name, exc)
            finally:
                queue.task_done()

    async def _deliver(self, impl: Any, event: Any, thread: HookThread) -> None:
        kwargs = call_kwargs(impl, {"event": event})
        if inspect.iscoroutinefunction(impl.function):
            work: asyncio.Future[Any] = asyncio.ensure_future(impl.function(**kwargs))
        else:  # a sync observer must never block the call's event loop
            work = asyncio.wrap_future(thread.submit(impl.function, kwargs))
        # asyncio.wait, not wait_for: an observer that swallows cancellation can't hold us.
        done, _ = await asyncio.wait({work}, timeout=self.timeout)
        if not done:
            work.cancel()
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
            thread.abandon()
            self._timed_out(impl.plugin_name)
            return
        self.timeouts[impl.plugin_name] = 0
        result = work.result()  # raises the observer's error, logged by _work
        if inspect.isawaitable(result):  # a sync def that returned a coroutine
            await asyncio.wait_for(result, self.timeout)

    def _timed_out(self, plugin: str) -> None:
        count = self.timeouts[plugin] = self.timeouts.get(plugin, 0) + 1
        log.warning("plugin %s: on_task_event did not return within %gs", plugin, self.timeout)
        if count >= MAX_TIMEOUTS:
            self.off.add(plugin)
            message = f"on_task_event timed out {count} times in a row (>{self.timeout:g}s)"
            self.report(plugin, f"{message}; switched off")
