"""``frontdesk console``: talk to the concierge in the terminal.

Text mode needs no PortAudio and no keys: it runs the same parts as a call (a real
AgentSession, the departments, an embedded runner and the follow-up watcher) and reads lines
from stdin. With no LLM key the offline brain answers.

On a terminal the ``you>`` line is prompt_toolkit's, under ``patch_stdout``: a follow-up that
arrives while the caller types is printed above the prompt, which is drawn again with what was
typed so far. Piped stdin (scripts, tests) is read line by line.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from frontdesk.agents.programs.scenario import Scenario, Step
from frontdesk.agents.programs.simulate import CallDriver, Environment
from frontdesk.core.host import Registry
from frontdesk.core.settings import Settings

HELP = "Type to talk; /tasks lists your tasks, /quit (or Ctrl-D) hangs up."


class LineReader(Protocol):
    async def read_line(self, prompt: str) -> str | None: ...


class Prompt:
    """The prompt on a terminal (prompt_toolkit). None at Ctrl-D or Ctrl-C: both hang up."""

    def __init__(self, input: Any = None, output: Any = None) -> None:
        from prompt_toolkit import PromptSession

        self._session: Any = PromptSession(input=input, output=output)

    async def read_line(self, prompt: str) -> str | None:
        try:
            return str(await self._session.prompt_async(prompt))
        except (EOFError, KeyboardInterrupt):
            return None


@contextlib.contextmanager
def keep_prompt(active: bool) -> Iterator[None]:
    """While ``active``, whatever is printed goes above the prompt line (``patch_stdout``;
    raw, so rich's colours pass through)."""
    if not active:
        yield
        return
    from prompt_toolkit.patch_stdout import patch_stdout

    with patch_stdout(raw=True):
        yield


def line_reader() -> LineReader:
    return Prompt() if sys.stdin.isatty() and sys.stdout.isatty() else _Stdin()


class _Stdin:
    """Lines from stdin, read on a daemon thread: an executor thread blocked in readline()
    would keep asyncio.run from exiting after Ctrl-C until the terminal sent another line."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        threading.Thread(target=self._read, name="frontdesk-stdin", daemon=True).start()

    def _put(self, line: str | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
        except RuntimeError:  # the console already closed its loop
            pass

    def _read(self) -> None:
        for line in sys.stdin:
            self._put(line)
        self._put(None)

    async def read_line(self, prompt: str) -> str | None:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        return await self._lines.get()


async def run_console(
    settings: Settings,
    registry: Registry,
    caller: str,
    emit: Callable[[dict[str, Any]], None],
    make_llm: Callable[[], Any] | None = None,
    reader: LineReader | None = None,
) -> None:
    reader = reader or line_reader()
    with keep_prompt(isinstance(reader, Prompt)):
        await _converse(settings, registry, caller, emit, make_llm, reader)


async def _converse(
    settings: Settings,
    registry: Registry,
    caller: str,
    emit: Callable[[dict[str, Any]], None],
    make_llm: Callable[[], Any] | None,
    stdin: LineReader,
) -> None:
    env = await Environment.open(settings, registry)
    driver = CallDriver(
        env, Scenario(name="console", caller=caller, steps=[]), caller, emit, make_llm
    )
    env.routes[caller] = driver.emit
    try:
        await driver.connect()
        while True:
            line = await stdin.read_line("you> ")
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            text = line.strip()
            if not text:
                continue
            if text == "/tasks":
                for task in await env.store.list(caller=caller, limit=10):
                    print(
                        f"  {task.id:>5} {task.tool:<20} {task.status:<10} {task.progress_note or ''}"
                    )
                continue
            await driver.play(Step(index=0, kind="user", value=text), None)
            await asyncio.sleep(0.05)  # let a follow-up that just became due start speaking
            await driver.settle()
    finally:
        await driver.hangup()
        env.routes.pop(caller, None)
        await env.close()


def console_mode(settings: Settings, env: Any = None) -> tuple[str, str]:
    """("voice" | "text", why), in words an operator can act on."""
    from ctypes.util import find_library

    from frontdesk.agents import providers

    choices = providers.select_all(settings, env)
    if not choices.voice:
        missing = [c for c in (choices.stt, choices.tts) if not c.enabled]
        why = "; ".join(f"no {c.kind.upper()} ({c.reason})" for c in missing)
        return "text", why
    if find_library("portaudio") is None:
        return (
            "text",
            "PortAudio is not installed (Debian: apt-get install libportaudio2), so there is no microphone",
        )
    return (
        "voice",
        f"STT {choices.stt.label()}, TTS {choices.tts.label()} and PortAudio are all present",
    )


def run_voice_console(settings: Settings) -> None:
    """LiveKit's own local-audio console, running our worker entrypoint, with a background
    runner beside it as `frontdesk start` has."""
    import os

    from frontdesk.agents.programs import worker

    # The job process builds its settings from the environment: pass --db on that way.
    os.environ["FRONTDESK_DATABASE_URL"] = settings.database_url
    runner = worker.RunnerThread(settings)
    runner.start()
    sys.argv = [sys.argv[0], "console"]
    from livekit.agents import cli

    try:
        cli.run_app(worker.build_server(settings))
    finally:
        runner.stop(timeout=settings.job_lease_seconds)
