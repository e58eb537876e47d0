"""Calling plugin hooks under a time limit, and delivering task events to ``on_task_event``
hooks without ever holding up a call.

Kept apart from the plugin host because these rules are about time, not registration: a hook
runs in a daemon thread it may be abandoned in, and each observer plugin gets its own FIFO and
worker per event loop, so events arrive in order and a slow, failing or hung observer only
ever delays itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger("frontdesk.plugins")

# A sync observer that hangs leaves a thread behind each time; after this many timeouts in a
# row the observer is switched off for the rest of the process.
MAX_TIMEOUTS = 3
QUEUE_SIZE = 1000


def in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> concurrent.futures.Future[Any]:
    """Run ``fn`` in a fresh daemon thread. A pool would let a hung hook starve the others, and
    its non-daemon workers would keep the process from exiting."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        # The waiter may have given up (a timeout cancels the future): then nobody listens.
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = fn(**kwargs)
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)

    threading.Thread(target=run, daemon=True, name="frontdesk-hook").start()
    return future


class HookTimeout(TimeoutError):
    pass


def call_with_timeout(fn: Callable[..., Any], timeout: float, **kwargs: Any) -> Any:
    """Run a plugin hook, giving up after ``timeout`` seconds (the thread is abandoned)."""
    try:
        return in_thread(fn, kwargs).result(timeout=timeout)
    except concurrent.futures.TimeoutError:
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
        except RuntimeError:  # no loop (a sync caller): fire and forget in threads
            for impl in impls:
                in_thread(impl.function, call_kwargs(impl, {"event": event}))
            return
        queues = self.loops.setdefault(loop, {})
        for impl in impls:
            queue = queues.get(impl.plugin_name)
            if queue is None:
                queue = queues[impl.plugin_name] = asyncio.Queue(QUEUE_SIZE)
                worker = loop.create_task(
                    self._work(impl, queue), name=f"observer-{impl.plugin_name}"
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

    async def _work(self, impl: Any, queue: asyncio.Queue[Any]) -> None:
        while True:
            event = await queue.get()
            try:
                if impl.plugin_name not in self.off:
                    await self._deliver(impl, event)
            except Exception as exc:
                log.warning("plugin %s: on_task_event failed: %r", impl.plugin_name, exc)
            finally:
                queue.task_done()

    async def _deliver(self, impl: Any, event: Any) -> None:
        kwargs = call_kwargs(impl, {"event": event})
        if inspect.iscoroutinefunction(impl.function):
            work: asyncio.Future[Any] = asyncio.ensure_future(impl.function(**kwargs))
        else:  # a sync observer must never block the call's event loop
            work = asyncio.wrap_future(in_thread(impl.function, kwargs))
        # asyncio.wait, not wait_for: an observer that swallows cancellation can't hold us.
        done, _ = await asyncio.wait({work}, timeout=self.timeout)
        if not done:
            work.cancel()
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
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
