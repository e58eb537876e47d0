"""What the caller hears while work runs: a thinking sound during slow in-turn tools, and a
short spoken status for their background jobs now and then.

The sound is LiveKit's ``BackgroundAudioPlayer`` with a clip that ships in the livekit-agents
wheel; it only exists in a room, so text sessions (simulate, console) run without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from frontdesk.core.wording import task_noun

if TYPE_CHECKING:
    from frontdesk.agents.call import Call

log = logging.getLogger("frontdesk.progress")


def thinking_clip() -> Any:
    from livekit.agents.voice.background_audio import AudioConfig, BuiltinAudioClip

    return AudioConfig(BuiltinAudioClip.KEYBOARD_TYPING, volume=0.6)


class Progress:
    def __init__(self, runtime: Call, audio: Any = None) -> None:
        self.runtime = runtime
        self.audio = audio  # a started BackgroundAudioPlayer, or None
        self.spoken: dict[int, float] = {}  # job id -> progress last announced

    @contextlib.asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        """Play the thinking sound if the body outlasts FRONTDESK_THINKING_AFTER_SECONDS."""
        if self.audio is None:
            yield
            return
        handle: Any = None

        def start() -> None:
            nonlocal handle
            try:
                handle = self.audio.play(thinking_clip(), loop=True)
            except Exception:
                log.exception("thinking sound failed")

        timer = asyncio.get_running_loop().call_later(
            self.runtime.settings.thinking_after_seconds, start
        )
        try:
            yield
        finally:
            timer.cancel()
            if handle is not None:
                handle.stop()

    async def status_loop(self) -> None:
        """Every FRONTDESK_PROGRESS_UPDATE_SECONDS, when the agent is idle, say how far the
        caller's running background jobs are (0 turns this off)."""
        interval = self.runtime.settings.progress_update_seconds
        if not interval:
            return
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await self.announce()

    async def announce(self) -> list[str]:
        runtime = self.runtime
        if not runtime.is_idle():
            return []
        said = []
        jobs = await runtime.store.list(
            caller=runtime.caller, status="running", pattern="background", limit=5
        )
        for job in jobs:
            if job.progress is None or self.spoken.get(job.id) == job.progress:
                continue
            self.spoken[job.id] = job.progress
            text = f"Your {task_noun(job.tool)} is about {round(job.progress * 100)}% done."
            runtime.session.say(text)
            said.append(text)
        return said
