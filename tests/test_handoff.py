"""Handoffs: generated transfer tools, free movement between desks, context carried along."""

from __future__ import annotations

from frontdesk.agents.programs.scenario import Scenario, Step
from frontdesk.agents.programs.simulate import CallDriver, Environment


async def test_context_and_caller_facts_reach_the_new_desk(settings, registry, store, transcript):
    env = await Environment.open(settings, registry)
    driver = CallDriver(env, Scenario("ctx", "alice", []), "alice", transcript.append)
    try:
        await driver.connect()
        await driver.play(
            Step(
                1,
                "user",
                "Hi, my name is Alice Smith, account AC-7781.",
                llm=[{"say": "Hello Alice."}],
            ),
            None,
        )
        await driver.play(
            Step(
                2,
                "user",
                "I need the lab about argon",
                llm=[{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab here, Alice."}],
            ),
            None,
        )
        agent = driver.session.current_agent
        assert agent.id == "lab"
        texts = [i.text_content for i in agent.chat_ctx.items if i.type == "message"]
        assert "Hi, my name is Alice Smith, account AC-7781." in texts
        assert "I need the lab about argon" in texts
        assert (
            "name: Alice Smith" in agent.instructions and "account: AC-7781" in agent.instructions
        )
        # the request the new desk answered is the carried one: its first LLM request saw it
        last_request = driver.llm.requests[-1]
        assert any(
            i.type == "message" and i.text_content == "I need the lab about argon"
            for i in last_request.items
        )
        tool_names = {t.id if hasattr(t, "id") else t.info.name for t in agent.tools}
        assert {
            "transfer_to_triage",
            "transfer_to_archive",
            "lookup",
            "task_status",
            "my_tasks",
            "cancel_task",
        } <= tool_names
        assert "transfer_to_lab" not in tool_names
    finally:
        await driver.hangup()
        await env.close()
    call = await store.get_call(transcript.of("session_start")[0]["session_id"])
    assert [(h["from"], h["to"]) for h in call["handoffs"]] == [("triage", "lab")]
    assert call["ended_at"] is not None


async def test_desks_transfer_directly_and_back(settings, registry, transcript):
    from frontdesk.agents.programs.scenario import parse_scenario
    from frontdesk.agents.programs.simulate import simulate

    scenario = parse_scenario(
        {
            "caller": "bo",
            "steps": [
                {"user": "lab", "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab."}]},
                {
                    "user": "archive",
                    "llm": [{"tools": [{"transfer_to_archive": {}}]}, {"say": "Archive."}],
                },
                {"expect": {"agent": "archive"}},
                {
                    "user": "lab again",
                    "llm": [{"tools": [{"transfer_to_lab": {}}]}, {"say": "Lab again."}],
                },
                {
                    "user": "front desk",
                    "llm": [{"tools": [{"transfer_to_triage": {}}]}, {"say": "Front desk."}],
                },
                {"expect": {"agent": "triage"}},
            ],
        }
    )
    assert await simulate([scenario], settings, registry, transcript.append) == []
    assert [(e["from"], e["to"]) for e in transcript.of("handoff")] == [
        ("triage", "lab"),
        ("lab", "archive"),
        ("archive", "lab"),
        ("lab", "triage"),
    ]
    assert [
        a for a, t in transcript.said() if t in ("Lab.", "Archive.", "Lab again.", "Front desk.")
    ] == ["lab", "archive", "lab", "triage"]
