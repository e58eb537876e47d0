"""The LiveKit worker: an ``AgentServer`` whose rtc session is one frontdesk call.

LiveKit runs each call in its own process (JobExecutorType.PROCESS on Linux), started from a
warm pool. ``prewarm`` runs once per such process, before any call is assigned, and pays for
what is slow to set up: the Silero VAD model, the plugin host (imports every plugin) and the
store's engine. ``entrypoint`` then only connects, identifies the caller, builds the session's
providers and hands over to ``frontdesk.agents.runtime.start_call``.

``frontdesk start`` also runs the background runner in the worker's main process, on its own
thread and event loop, so a CPU-heavy job never delays the worker's dispatch loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frontdesk.agents import provider_build, providers
from frontdesk.agents.identity import caller_identity
from frontdesk.core.errors import FrontdeskError
from frontdesk.core.settings import Settings

if TYPE_CHECKING:
    from livekit.agents import AgentServer, JobContext, JobProcess

    from frontdesk.agents.acks import AckCache
    from frontdesk.agents.rpc import TaskRpc
    from frontdesk.core.host import Registry
    from frontdesk.db.store import TaskStore

log = logging.getLogger("frontdesk.worker")

# What prewarm leaves in proc.userdata for the call that process will serve.
SETTINGS, VAD, REGISTRY, STORE, CHOICES = "settings", "vad", "registry", "store", "choices"

StartCall = Callable[..., Awaitable[Any]]


def prewarm(proc: JobProcess) -> None:
    """Once per job process: settings, provider plugins, Silero VAD, plugin host, store engine.

    The store is constructed but not connected: an async engine's connections belong to the
    event loop that opens them, and the call's loop is not running yet."""
    from frontdesk.agents.programs.logs import configure
    from frontdesk.agents.provider_failures import quiet_provider_noise
    from frontdesk.core import host
    from frontdesk.db.store import TaskStore

    configure()  # a job process sets its own levels: ours INFO, libraries WARNING
    settings = Settings()
    choices = providers.select_all(settings)
    modules = providers.import_plugins(choices)  # plugins register on the main thread only
    quiet_provider_noise(modules)
    proc.userdata[SETTINGS] = settings
    proc.userdata[CHOICES] = choices
    proc.userdata[VAD] = provider_build.build_vad() if choices.stt.enabled else None
    proc.userdata[REGISTRY] = host.load(settings)
    proc.userdata[STORE] = TaskStore(settings.database_url)
    # Background jobs are handed to DBOS through its client: import it here, not on a call's
    # loop. Nothing of DBOS runs in this process (no DBOS instance, no threads, no workflows).
    from frontdesk.core.jobs import client_for

    client_for(settings).prepare()


@dataclass
class Call:
    """What ``run_call`` set up; returned for tests and logging."""

    caller: str
    session_id: str
    participant_identity: str
    session: Any
    runtime: Any
    rpc: TaskRpc
    acks: AckCache | None
    shutdown: Callable[[str], Awaitable[None]]


def _default_start_call() -> StartCall:
    # Imported late: frontdesk.agents.runtime imports livekit.agents and every department.
    from frontdesk.agents.runtime import start_call

    return start_call


async def entrypoint(ctx: JobContext) -> None:
    """The rtc session entrypoint (module level, so job processes can import it by name)."""
    await run_call(ctx)


async def run_call(ctx: JobContext, *, start_call: StartCall | None = None) -> Call:
    from livekit.agents import AgentSession, room_io

    from frontdesk.agents.acks import AckCache, default_cache_dir
    from frontdesk.agents.followups import FollowupWatcher
    from frontdesk.agents.rpc import TaskRpc

    if STORE not in ctx.proc.userdata:  # a server built without our prewarm, or a fake job
        prewarm(ctx.proc)
    ud = ctx.proc.userdata
    settings: Settings = ud[SETTINGS]
    store: TaskStore = ud[STORE]
    registry: Registry = ud[REGISTRY]

    # Cheap when the schema is current; a fresh SQLite file is migrated by its first call. A
    # plugin whose migration fails is withdrawn from this process's desks; the call goes on.
    from frontdesk.core.schema import branches, upgrade, withdraw_failed
    from frontdesk.db.outage import OUTAGE

    try:
        withdraw_failed(registry, await upgrade(store, branches(registry)))
    except Exception as exc:
        # The database is not answering: the call still starts (greeting, handoffs, answers
        # that need no records); its tools say the records system is down until it is back.
        if not OUTAGE.failed(exc):
            raise
    await ctx.connect()
    participant = await ctx.wait_for_participant()
    caller = caller_identity(participant)
    session_id = ctx.job.id
    log.info("call %s from %s (%s)", session_id, caller, participant.identity)

    built = provider_build.build(ud[CHOICES], vad=ud[VAD], settings=settings, registry=ud[REGISTRY])
    session = AgentSession(**built.session_kwargs())

    acks = None
    warm_task: asyncio.Task[int] | None = None
    if built.tts is not None:
        from frontdesk.agents.provider_failures import PHRASES

        acks = AckCache(built.tts, cache_dir=default_cache_dir(settings))
        from frontdesk.agents.runtime import HOLD_LINE

        # The apology and goodbye too (they must play when the TTS is what fails), and the hold
        # line said while a caller talks over critical work.
        phrases = [*PHRASES, *(spec.ack for spec in registry.tools.values() if spec.ack), HOLD_LINE]
        # Not awaited: the greeting must not wait on ack synthesis; the disk cache is shared,
        # so only the first call per voice on a machine pays for it.
        warm_task = asyncio.create_task(acks.warm(phrases), name="frontdesk.acks.warm")

    rpc = TaskRpc(
        ctx.room.local_participant, store, caller, participant_identity=participant.identity
    )
    rpc.register()
    # on_task_event hooks see this process's writes; the RPC sees them at once, and the
    # runner's (another process) through its poll.
    store.observers.append(registry.observe)
    store.observers.append(rpc.on_event)
    rpc.watch(max(settings.followup_poll_seconds, 0.5))
    watcher = FollowupWatcher(store, settings.followup_poll_seconds)
    audio = None
    if built.tts is not None:
        # The thinking sound for slow tools: a clip shipped in the livekit-agents wheel.
        from livekit.agents import BackgroundAudioPlayer

        audio = BackgroundAudioPlayer()
        try:
            await audio.start(room=ctx.room, agent_session=session)
        except Exception as exc:
            log.warning("call %s: no thinking sound: %r", session_id, exc)
            audio = None

    async def close(reason: str) -> None:
        if warm_task is not None:
            warm_task.cancel()
        steps = [watcher.aclose(), registry.drain(2.0), rpc.aclose()]
        if audio is not None:
            steps.append(audio.aclose())
        for step in steps:
            try:
                await step
            except Exception as exc:  # one failing step must not keep the rest from running
                log.debug("call %s close: %r", session_id, exc)
        for observer in (rpc.on_event, registry.observe):
            if observer in store.observers:
                store.observers.remove(observer)
        await store.close()

    try:
        runtime = await (start_call or _default_start_call())(
            session,
            store=store,
            registry=registry,
            settings=settings,
            caller=caller,
            session_id=session_id,
            watcher=watcher,
            # The session binds to this participant's audio and text in the room.
            room=ctx.room,
            room_options=room_io.RoomOptions(participant_identity=participant.identity),
            acks=acks,
            audio=audio,
            providers=built,
            end_call=ctx.shutdown,
        )
    except BaseException:
        await close("start failed")
        raise

    async def shutdown(reason: str = "") -> None:
        # DESIGN.md's shutdown rules live in the runtime: critical work finishes, fire-and-forget
        # gets a bounded wait, the rest is closed with this reason. Then the last updates go out.
        reason = reason or "call ended"
        log.info("call %s ending: %s", session_id, reason)
        try:
            await runtime.shutdown(reason)
        finally:
            await close(reason)

    ctx.add_shutdown_callback(shutdown)
    return Call(caller, session_id, participant.identity, session, runtime, rpc, acks, shutdown)


def build_server(
    settings: Settings,
    *,
    agent_name: str = "",
    choices: providers.Choices | None = None,
) -> AgentServer:
    """The AgentServer for ``frontdesk start``/``dev``. A non-empty ``agent_name`` turns on
    explicit dispatch: rooms get this agent only when a token or the dispatch API asks."""
    from livekit.agents import AgentServer

    # Imported here, on the main thread; registered plugins are also preloaded into the
    # forkserver that job processes come from.
    providers.import_plugins(choices or providers.select_all(settings))
    server = AgentServer(
        setup_fnc=prewarm,
        # Loading the VAD and every plugin takes a few seconds on a small machine.
        initialize_process_timeout=60.0,
        # Room for the runtime's shutdown: critical work plus the fire-and-forget grace.
        shutdown_process_timeout=settings.fire_and_forget_grace_seconds + 55.0,
        preload_modules=["frontdesk.agents.programs.worker"],
    )
    server.rtc_session(entrypoint, agent_name=agent_name)
    return server


def run_server(server: AgentServer, *, dev: bool, log_level: str, log_format: str) -> None:
    """Run until SIGINT/SIGTERM, draining calls on the way out (not in dev).

    This is what ``python -m livekit.agents start`` calls; ``cli.run_app`` would parse our
    argv as its own and is deprecated in 1.8."""
    from livekit.agents.cli import proto
    from livekit.agents.cli.cli import _run_worker

    _run_worker(server, proto.CliArgs(log_level=log_level, dev=dev, log_format=log_format))


class RunnerThread:
    """The background runner on its own thread and event loop in this process."""

    def __init__(self, settings: Settings, registry: Registry | None = None) -> None:
        self.settings = settings
        self.registry = registry
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()

    def start(self) -> None:
        if self.registry is None:
            from frontdesk.core import host

            # On the calling (main) thread: a plugin that imports a livekit plugin must.
            self.registry = host.load(self.settings)
        self._thread = threading.Thread(target=self._main, name="frontdesk-runner", daemon=True)
        self._thread.start()
        self._ready.wait(60)
        if self.error is not None:
            # A worker whose background jobs would never run must not start taking calls.
            raise FrontdeskError(f"background runner could not start: {self.error}")

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:
            self.error = exc
            log.error("background runner stopped: %r", exc)
        finally:
            self._ready.set()

    async def _run(self) -> None:
        from frontdesk.core.runner import serve

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        assert self.registry is not None
        await serve(self.settings, self.registry, self._stop, ready=self._ready.set)

    def stop(self, timeout: float = 30.0) -> bool:
        """Ask the runner to stop (its unfinished jobs stay pending for the next runner) and
        wait; True if it ended."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


__all__ = [
    "Call",
    "RunnerThread",
    "build_server",
    "entrypoint",
    "prewarm",
    "run_call",
    "run_server",
]
