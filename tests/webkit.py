"""Helpers for the console's browser tests and screenshots: a real uvicorn server on a loopback
port, Debian's headless chromium driven by Playwright (never a downloaded browser), and writes
to the store from another process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

CHROMIUM = os.environ.get("FRONTDESK_CHROMIUM", "/usr/bin/chromium")
REQUIRE_ENV = "FRONTDESK_REQUIRE_BROWSER"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def need_browser() -> None:
    """Skip without chromium or Playwright, unless FRONTDESK_REQUIRE_BROWSER=1 (CI, which
    installs chromium): there a missing browser fails instead of hiding."""
    problem = None
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        problem = f"{CHROMIUM} is missing (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "playwright (the dev extra) is not installed"
    if problem is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
    pytest.skip(problem)


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)  # uvicorn has no "started" event to wait on
    if not server.started:
        raise RuntimeError("the console did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A Playwright browser context on Debian's chromium, with a throwaway profile."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="frontdesk-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1366, "height": 860},
            )
            context.set_default_timeout(20_000)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator[Any]:
    """A chromium context for a browser test (skips without chromium, see ``need_browser``)."""
    need_browser()
    with chromium() as context:
        yield context


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/console.db"


def write_from_another_process(db_url: str, code: str) -> str:
    """Run ``code`` (the body of ``async def main(store)``) in a new Python process against
    the store at ``db_url``; returns what it printed."""
    script = "\n".join(
        [
            "import asyncio, sys",
            "from frontdesk.core.schema import open_store",
            "async def main(store):",
            textwrap.indent(textwrap.dedent(code), "    "),
            "async def run():",
            "    store = await open_store(sys.argv[1])",
            "    try:",
            "        await main(store)",
            "    finally:",
            "        await store.close()",
            "asyncio.run(run())",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", script, db_url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_async(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(fn())`` on a fresh thread: Playwright's sync API keeps a loop running on
    the test's own thread."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(fn())).result()
