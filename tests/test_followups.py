"""Follow-up delivery: only when idle, only once spoken, retried after an interruption."""

from __future__ import annotations

import asyncio

from jobkit import start_job

from frontdesk.agents.followups import FollowupWatcher, followup_instructions, task_noun
from frontdesk.agents.programs.scenario import Scenario, Step
from frontdesk.agents.programs.simulate import CallDriver, Environment
from frontdesk.db.store import wait_for


async def test_interrupted_followup_is_retried_and_delivered_once(
    settings, registry, store, transcript
):
    env = await Environment.open(settings, registry)
    driver = CallDriver(env, Scenario("f", "alice", []), "alice", transcript.append)
    try:
        await driver.connect()
        await driver.play(
            Step(1, "user", "lab", llm=[{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]),
            None,
        )
        await driver.play(
            Step(
                2,
                "user",
                "experiment",
                llm=[
                    {"tools": [{"experiment": {"name": "f", "seconds": 0.4}}]},
                    {"say": "Started."},
                ],
            ),
            None,
        )
        driver.llm.push({"say": "FIRST TRY at the update", "delay": 1.0})
        job = (await store.list(caller="alice", tool="experiment"))[0]
        started = await wait_for(store, lambda: _followups(transcript, job.id, 1), timeout=10)
        assert started
        # Interrupt once the follow-up's speech is under way (its reply is held back 1 s).
        assert await _until(lambda: driver.session.current_speech is not None)
        assert await driver.runtime.interrupt()
        assert await wait_for(store, lambda: _delivered(store, job.id), timeout=10)
        await driver.settle()
    finally:
        await driver.hangup()
        await env.close()
    offers = [e for e in transcript.of("followup") if e["task_id"] == job.id]
    assert len(offers) == 2  # the interrupted one, then the retry
    assert not any("FIRST TRY" in text for _, text in transcript.said())
    assert any("Experiment f finished" in text for _, text in transcript.said())
    notes = [e["note"] for e in await store.events(job.id)]
    assert notes.count("delivered by lab") == 1


async def _until(predicate, timeout: float = 10.0) -> bool:
    """Wait for a condition of the call itself (not the store) to hold."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def _progressed(store, task_id):
    return ((await store.get(task_id)).progress or 0) > 0


async def _followups(transcript, task_id, n):
    return len([e for e in transcript.of("followup") if e["task_id"] == task_id]) >= n


async def _delivered(store, task_id):
    return (await store.get(task_id)).delivered_at is not None


async def test_watcher_reads_data_version_not_the_table_when_nothing_changed(settings, store):
    watcher = FollowupWatcher(store, interval=0.01)
    assert watcher._changed() is True
    assert watcher._changed() is False  # no commit since: no query needed
    await store.create(caller="x", tool="t", pattern="background")
    # our own writes go through another connection, so they move data_version too
    assert watcher._changed() is True
    await watcher.aclose()


def test_followup_wording(store):
    from datetime import datetime, timezone

    from frontdesk.db.store import Task

    now = datetime.now(timezone.utc)
    base = dict(
        caller="c",
        session_id=None,
        department="reports",
        plugin="reports",
        pattern="background",
        args={},
        progress=None,
        progress_note=None,
        idempotency_key=None,
        attempts=1,
        lease_owner=None,
        lease_expires_at=None,
        created_at=now,
        started_at=now,
        finished_at=now,
        delivered_at=None,
    )
    ok = Task(
        id=7,
        tool="generate_report",
        status="succeeded",
        result={"summary": "All good."},
        error=None,
        **base,
    )
    bad = Task(
        id=8,
        tool="generate_report",
        status="failed",
        result=None,
        error="interrupted by restart",
        **base,
    )
    assert "report (reference 7) is done: All good." in followup_instructions(ok)
    # frontdesk's own errors are for operators: the caller hears that it did not complete.
    told = followup_instructions(bad)
    assert "report (reference 8) did not complete." in told and "restart" not in told
    # A ToolError's text was written for the caller: it is what they are told.
    refused = Task(
        id=9,
        tool="generate_report",
        status="failed",
        result=None,
        error="The archive is closed on Sundays.",
        **base,
    )
    assert "The reason, to tell them: The archive is closed on Sundays." in (
        followup_instructions(refused)
    )
    assert task_noun("generate_report") == "report" and task_noun("pay_invoice") == "pay invoice"


class _Handle:
    def __init__(self):
        self.stopped = False

    def stop(self):
        self.stopped = True


class _Player:
    """Stands in for BackgroundAudioPlayer, which needs a room to publish to."""

    def __init__(self):
        self.played = []

    def play(self, clip, loop=False):
        handle = _Handle()
        self.played.append((clip, loop, handle))
        return handle


async def test_thinking_sound_only_for_slow_work_and_periodic_status(
    settings, registry, store, transcript
):
    env = await Environment.open(
        settings.model_copy(update={"thinking_after_seconds": 0.2}), registry
    )
    driver = CallDriver(env, Scenario("p", "pat", []), "pat", transcript.append)
    try:
        await driver.connect()
        player = _Player()
        driver.runtime.progress.audio = player
        await driver.play(
            Step(1, "user", "lab", llm=[{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]),
            None,
        )
        await driver.play(
            Step(
                2, "user", "quick", llm=[{"tools": [{"lookup": {"query": "a"}}]}, {"say": "Quick."}]
            ),
            None,
        )
        assert player.played == []  # fast work: silence
        await driver.play(
            Step(
                3,
                "user",
                "slow",
                llm=[{"tools": [{"lookup": {"query": "b", "seconds": 0.6}}]}, {"say": "Slow."}],
            ),
            None,
        )
        [(clip, loop, handle)] = player.played
        assert loop and handle.stopped and "keyboard" in str(clip.source).lower()
        # a running background job gets a short spoken status when the agent is idle
        await driver.play(
            Step(
                4,
                "user",
                "exp",
                llm=[{"tools": [{"experiment": {"name": "s", "seconds": 2}}]}, {"say": "Started."}],
            ),
            None,
        )
        exp = (await store.list(caller=driver.caller, tool="experiment"))[0]
        assert await wait_for(store, lambda: _progressed(store, exp.id), timeout=10)
        said = await driver.runtime.progress.announce()
        assert (
            said and said[0].startswith("Your experiment is about") and said[0].endswith("% done.")
        )
    finally:
        await driver.hangup()
        await env.close()


async def test_a_spoken_followup_offered_again_is_not_spoken_twice(
    settings, registry, store, transcript
):
    env = await Environment.open(settings, registry, runner=False)
    driver = CallDriver(env, Scenario("twice", "tina", []), "tina", transcript.append)
    try:
        job = await store.create(caller="tina", tool="experiment", pattern="background")
        await start_job(store, job.id)
        await store.transition(job.id, "succeeded", result={"summary": "All done."})
        await driver.connect()
        assert await wait_for(store, lambda: _delivered(store, job.id), timeout=10)
        stale = await store.get(job.id)  # what an overtaken watcher query would still hold
        assert await driver.runtime.deliver(stale) is True
        await driver.settle()
    finally:
        await driver.hangup()
        await env.close()
    assert len([e for e in transcript.of("followup") if e["task_id"] == job.id]) == 1
    assert len([t for _, t in transcript.said() if "All done." in t]) == 1
