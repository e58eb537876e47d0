"""The LiveKit worker's wiring, offline: prewarm, the entrypoint under livekit's
``fake_job_context`` with a stand-in room, the server object and the runner thread."""

from __future__ import annotations

import asyncio
from unittest.mock import AsyncMock, create_autospec

import pytest
from livekit import rtc
from livekit.agents import AgentSession, JobExecutorType, JobProcess
from livekit.agents.testing import fake_job_context

from frontdesk.agents.followups import FollowupWatcher
from frontdesk.agents.programs import worker
from frontdesk.agents.rpc import METHOD_CANCEL, METHOD_TASKS
from frontdesk.core import host
from frontdesk.core.schema import open_store
from frontdesk.db.store import TaskStore

pytestmark = pytest.mark.usefixtures("no_network")

VOICE_VARS = (
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DEEPGRAM_API_KEY",
    "ELEVEN_API_KEY",
)


@pytest.fixture
def env(monkeypatch, tmp_path, db_url):
    for var in VOICE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FRONTDESK_DATABASE_URL", db_url)
    monkeypatch.setenv("FRONTDESK_CACHE_PATH", str(tmp_path / "cache"))
    # A real provider object (never called) rather than the offline brain: the job path.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    monkeypatch.setenv("FRONTDESK_LLM", "openai:gpt-4.1-mini")
    monkeypatch.setenv("FRONTDESK_STT", "none")
    monkeypatch.setenv("FRONTDESK_TTS", "none")
    no_prewarm(monkeypatch)
    return monkeypatch


def no_prewarm(monkeypatch) -> None:
    """AgentSession opens the LLM's connection early (openai: GET /models); not in tests."""
    from livekit.agents import llm
    from livekit.plugins import openai

    monkeypatch.setattr(openai.LLM, "_prewarm_impl", llm.LLM._prewarm_impl)


def new_proc() -> JobProcess:
    return JobProcess(executor_type=JobExecutorType.THREAD, user_arguments=None, http_proxy=None)


async def test_prewarm_fills_userdata_once_per_process(env):
    proc = new_proc()
    worker.prewarm(proc)
    ud = proc.userdata
    assert set(ud) == {"settings", "choices", "vad", "registry", "store"}
    assert isinstance(ud["registry"], host.Registry) and "tasks" in ud["registry"].plugins
    assert isinstance(ud["store"], TaskStore) and ud["store"].dialect == "sqlite"
    assert ud["choices"].llm.label() == "openai:gpt-4.1-mini"
    assert ud["vad"] is None  # text only: no VAD to load
    await ud["store"].close()


async def test_prewarm_loads_silero_when_there_is_speech_input(env):
    from livekit.plugins import silero

    env.setenv("DEEPGRAM_API_KEY", "dg-dummy")
    env.setenv("FRONTDESK_STT", "deepgram:nova-3")
    proc = new_proc()
    worker.prewarm(proc)
    assert isinstance(proc.userdata["vad"], silero.VAD)
    await proc.userdata["store"].close()


def stand_in_room(*participants: object) -> object:
    """livekit's own console/fake-job recipe (ipc/mock_room.py), with our participants."""
    room = create_autospec(rtc.Room, instance=True)
    room.local_participant = create_autospec(rtc.LocalParticipant, instance=True)
    room.local_participant.identity = "agent"
    room.local_participant.sid = ""
    room.isconnected.return_value = True
    room.name = "call-room"
    room.remote_participants = {f"PA_{i}": p for i, p in enumerate(participants)}
    room.sid = AsyncMock(return_value="RM_test")
    return room


def sip_participant(identity: str = "sip_abc123", phone: str = "+15550100199") -> object:
    p = create_autospec(rtc.RemoteParticipant, instance=True)
    p.identity = identity
    p.kind = rtc.ParticipantKind.PARTICIPANT_KIND_SIP
    p.state = rtc.ParticipantState.PARTICIPANT_STATE_ACTIVE
    p.attributes = {"sip.phoneNumber": phone, "sip.callID": "SCL_1"}
    return p


class FakeRuntime:
    def __init__(self) -> None:
        self.shutdown_reasons: list[str] = []

    async def shutdown(self, reason: str = "call ended") -> None:
        self.shutdown_reasons.append(reason)


class RecordingStartCall:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[object, dict]] = []
        self.fail = fail
        self.runtime = FakeRuntime()

    async def __call__(self, session, **kwargs):
        self.calls.append((session, kwargs))
        if self.fail:
            raise RuntimeError("agent failed to start")
        return self.runtime


async def test_entrypoint_wires_a_sip_call(env):
    room = stand_in_room(sip_participant())
    start = RecordingStartCall()
    with fake_job_context(room=room, job_id="job-42") as ctx:
        call = await worker.run_call(ctx, start_call=start)

    assert call.caller == "+15550100199"  # the phone number, not the per-call identity
    assert call.participant_identity == "sip_abc123" and call.session_id == "job-42"
    ((session, kwargs),) = start.calls
    assert isinstance(session, AgentSession) and session.llm.model == "gpt-4.1-mini"
    assert session.stt is None and session.tts is None  # text only, as configured
    ud = ctx.proc.userdata  # prewarm ran because the fake job had not
    assert kwargs["store"] is ud["store"] and kwargs["registry"] is ud["registry"]
    assert kwargs["settings"] is ud["settings"]
    assert kwargs["caller"] == "+15550100199" and kwargs["session_id"] == "job-42"
    assert isinstance(kwargs["watcher"], FollowupWatcher)
    assert kwargs["room"] is room
    assert kwargs["room_options"].participant_identity == "sip_abc123"
    assert kwargs["acks"] is None  # no TTS, nothing to cache

    registered = {c.args[0] for c in room.local_participant.register_rpc_method.call_args_list}
    assert registered == {METHOD_TASKS, METHOD_CANCEL}
    store = ud["store"]
    assert call.rpc.on_event in store.observers and ud["registry"].observe in store.observers
    assert call.rpc.identity == "sip_abc123" and call.rpc.caller == "+15550100199"

    # The job's shutdown: the runtime's rules first, then RPC and the store are closed.
    assert ctx._shutdown_callbacks, "shutdown callback registered"
    await ctx._shutdown_callbacks[-1]("room disconnected")
    assert start.runtime.shutdown_reasons == ["room disconnected"]
    assert call.rpc.on_event not in store.observers
    unregistered = {c.args[0] for c in room.local_participant.unregister_rpc_method.call_args_list}
    assert unregistered == {METHOD_TASKS, METHOD_CANCEL}


async def test_entrypoint_sends_task_updates_to_the_participant(env):
    room = stand_in_room(sip_participant())
    with fake_job_context(room=room) as ctx:
        call = await worker.run_call(ctx, start_call=RecordingStartCall())
    store = ctx.proc.userdata["store"]
    await store.create(caller="+15550100199", tool="build_report", pattern="background")
    await store.create(caller="someone-else", tool="build_report", pattern="background")
    await call.rpc.flush()
    sends = room.local_participant.perform_rpc.await_args_list
    assert len(sends) == 1
    assert sends[0].kwargs["destination_identity"] == "sip_abc123"
    assert sends[0].kwargs["method"] == "frontdesk.task"
    await call.shutdown("done")


async def test_entrypoint_builds_an_ack_cache_when_there_is_a_voice(env, tmp_path):
    env.setenv("FRONTDESK_TTS", "openai:coral")
    web = create_autospec(rtc.RemoteParticipant, instance=True)
    web.identity, web.kind, web.attributes = (
        "alice",
        rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD,
        {},
    )
    web.state = rtc.ParticipantState.PARTICIPANT_STATE_ACTIVE
    start = RecordingStartCall()
    with fake_job_context(room=stand_in_room(web)) as ctx:
        call = await worker.run_call(ctx, start_call=start)
    assert call.caller == "alice"
    acks = start.calls[0][1]["acks"]
    assert (
        acks is call.acks
        and acks.voice == "coral"
        and acks.cache_dir == tmp_path / "cache" / "acks"
    )
    await call.shutdown("done")


async def test_a_failed_start_releases_what_it_took(env):
    room = stand_in_room(sip_participant())
    with fake_job_context(room=room) as ctx:
        with pytest.raises(RuntimeError, match="agent failed to start"):
            await worker.run_call(ctx, start_call=RecordingStartCall(fail=True))
    store = ctx.proc.userdata["store"]
    assert store.observers == []
    assert not ctx._shutdown_callbacks


async def test_real_start_call_binds_the_room_and_keeps_the_ack_cache(tmp_path):
    from livekit.agents import AgentSession

    from frontdesk.agents.runtime import start_call
    from frontdesk.agents.testing import ScriptedLLM
    from frontdesk.core import host
    from frontdesk.core.settings import Settings

    class RecordingSession(AgentSession):
        started_with: dict = {}

        async def start(self, agent, **kwargs):  # the room itself needs a server; record it
            RecordingSession.started_with = kwargs
            return await super().start(agent)

    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path}/w.db", load_plugins="")
    store = await open_store(settings.database_url)
    llm = ScriptedLLM()
    session = RecordingSession(llm=llm)
    room, options, acks = object(), object(), object()
    try:
        runtime = await start_call(
            session,
            store=store,
            registry=host.load(settings),
            settings=settings,
            caller="+15550100",
            session_id="job-1",
            room=room,
            room_options=options,
            acks=acks,
        )
        assert RecordingSession.started_with == {"room": room, "room_options": options}
        assert (
            runtime.acks is acks and runtime.caller == "+15550100" and runtime.current == "triage"
        )
        assert (await store.get_call("job-1"))["caller"] == "+15550100"
        await runtime.shutdown()
    finally:
        await session.aclose()
        await llm.aclose()
        await store.close()


def test_build_server(env, settings):
    server = worker.build_server(settings, agent_name="frontdesk")
    assert server._agent_name == "frontdesk"  # explicit dispatch
    assert server.setup_fnc is worker.prewarm and server._entrypoint_fnc is worker.entrypoint
    assert "frontdesk.agents.programs.worker" in server._preload_modules
    assert server._shutdown_process_timeout >= settings.fire_and_forget_grace_seconds + 30


async def test_runner_thread_runs_background_jobs_and_stops(settings, registry, store):
    job = await store.create(
        caller="alice", tool="experiment", pattern="background", args={"name": "x", "seconds": 0.05}
    )
    runner = worker.RunnerThread(settings, registry)
    runner.start()
    try:
        for _ in range(200):
            if (await store.get(job.id)).finished:
                break
            await asyncio.sleep(0.05)
    finally:
        stopped = await asyncio.to_thread(runner.stop, 10)
    assert stopped and runner.error is None
    assert (await store.get(job.id)).status == "succeeded"


def test_runner_thread_that_cannot_open_the_database_refuses_to_start(tmp_path):
    from frontdesk.core.errors import FrontdeskError
    from frontdesk.core.settings import Settings

    bad = Settings(database_url="sqlite+aiosqlite:////nonexistent-dir/x/y.db", load_plugins="")
    runner = worker.RunnerThread(bad)
    with pytest.raises(FrontdeskError, match="background runner could not start"):
        runner.start()
    assert runner.stop(timeout=5)
