"""The business profile: the one place a business is named. Another business's profile changes
the greeting and every desk's words; a desk it switches off is not offered; a bad profile is
one line naming the file and the key, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clirun import FRONTDESK

from frontdesk.agents.programs.scenario import Scenario, Step
from frontdesk.agents.programs.simulate import CallDriver, Environment
from frontdesk.core import host
from frontdesk.core.profile import Profile

ROOT = Path(__file__).resolve().parent.parent
BAYSIDE = Profile.model_validate(
    {
        "business": {
            "name": "Bayside Dental",
            "greeting": "Thank you for calling Bayside Dental. How can I help?",
            "instructions": "Always offer the next free appointment.",
        },
        "departments": {"search": {"instructions": "Answer from the clinic's leaflets."}},
    }
)


def tool_names(agent) -> set[str]:
    return {t.id if hasattr(t, "id") else t.info.name for t in agent.tools}


async def call_with(settings, profile, transcript) -> tuple[CallDriver, Environment]:
    registry = host.load(settings, profile=profile)
    env = await Environment.open(settings, registry)
    driver = CallDriver(env, Scenario("profile", "pat", []), "pat", transcript.append)
    await driver.connect()
    return driver, env


async def test_another_business_changes_the_greeting_and_every_desks_words(settings, transcript):
    driver, env = await call_with(settings, BAYSIDE, transcript)
    try:
        greeting = transcript.of("agent")[0]
        assert greeting["text"] == "Thank you for calling Bayside Dental. How can I help?"
        runtime = driver.runtime
        for name in ["triage", *env.registry.departments]:
            words = runtime.make_agent(name).instructions
            assert "Bayside Dental" in words, name
            assert "Always offer the next free appointment." in words, name
        assert "the front desk of Bayside Dental" in runtime.make_agent("triage").instructions
        assert "Answer from the clinic's leaflets." in runtime.make_agent("search").instructions
        assert "clinic's leaflets" not in runtime.make_agent("billing").instructions
    finally:
        await driver.hangup()
        await env.close()


async def test_without_a_profile_the_front_desk_is_neutral(settings, transcript):
    driver, env = await call_with(settings, Profile(), transcript)
    try:
        greeting = transcript.of("agent")[0]["text"]
        assert greeting == "Hello, you've reached the front desk. How can I help?"
        assert "You work at the front desk" in driver.runtime.make_agent("billing").instructions
    finally:
        await driver.hangup()
        await env.close()


async def test_a_desk_switched_off_is_not_offered(settings, transcript):
    profile = Profile.model_validate({"departments": {"billing": {"enabled": False}}})
    driver, env = await call_with(settings, profile, transcript)
    try:
        assert "billing" not in env.registry.departments
        triage = driver.session.current_agent
        assert "transfer_to_billing" not in tool_names(triage)
        assert "transfer_to_search" in tool_names(triage)
        offered = {t.name for d in ["triage", *env.registry.departments]
                   for t in env.registry.tools_for(d)}  # fmt: skip
        assert "pay_invoice" not in offered and "account_balance" not in offered
        assert (
            "billing" not in triage.instructions.split("transfer them to the right department")[1]
        )
        # The caller asking for billing anyway is not transferred there.
        await driver.play(
            Step(
                1, "user", "I'd like to pay my bill", llm=[{"tools": [{"transfer_to_billing": {}}]}]
            ),
            None,
        )
        assert driver.session.current_agent.id == "triage"
    finally:
        await driver.hangup()
        await env.close()


@pytest.mark.parametrize(
    ("toml", "wanted"),
    [
        ('[business]\nnmae = "Bayside"\n', "frontdesk.toml: business.nmae: unknown key"),
        ('[departments.billing]\nenabled = "maybe"\n', "frontdesk.toml: departments.billing.enabled:"),
        ("[business\nname = 1\n", "frontdesk.toml: not valid TOML"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [["plugins", "list"], ["simulate", "SMOKE"], ["db", "upgrade"]])
def test_a_bad_profile_is_one_line_naming_the_file_and_key(tmp_path, toml, wanted, command):
    (tmp_path / "frontdesk.toml").write_text(toml)
    argv = [str(ROOT / "examples/calls/smoke.yaml") if a == "SMOKE" else a for a in command]
    if command[0] != "plugins":
        argv += ["--db", f"sqlite:///{tmp_path}/x.db"]
    done = subprocess.run(
        [*FRONTDESK, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FRONTDESK_LOAD_PLUGINS": ""},
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {wanted}"), done.stderr
    assert not (tmp_path / "x.db").exists()


def test_an_unknown_desk_stops_calls_but_not_the_commands_that_diagnose(tmp_path):
    (tmp_path / "frontdesk.toml").write_text("[departments.dentistry]\nenabled = false\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FRONTDESK_LOAD_PLUGINS": ""}
    wanted = "frontdesk.toml: departments.dentistry: no such department (known: triage, "

    def run(*argv):
        return subprocess.run(
            [*FRONTDESK, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
        )

    sim = run(
        "simulate", str(ROOT / "examples/calls/smoke.yaml"), "--db", f"sqlite:///{tmp_path}/x.db"
    )
    assert sim.returncode == 2 and sim.stderr.startswith(f"error: {wanted}"), sim.stderr
    assert not (tmp_path / "x.db").exists()
    import json

    listed = run("plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [line.split(" (known")[0] for line in json.loads(listed.stdout)["profile"]] == [
        "frontdesk.toml: departments.dentistry: no such department"
    ]
    doctor = run("doctor", "--json", "--db", f"sqlite:///{tmp_path}/x.db")
    rows = json.loads(doctor.stdout)["sections"]["profile"]
    assert doctor.returncode == 1 and any(
        r["status"] == "error" and r["detail"].startswith(wanted) for r in rows
    ), rows
    up = run("db", "upgrade", "--db", f"sqlite:///{tmp_path}/x.db")
    assert up.returncode == 0, up.stderr


def test_a_bad_plugin_setting_in_the_profile_stops_calls_and_shows_in_plugins_list(tmp_path):
    (tmp_path / "frontdesk.toml").write_text('[plugins.search]\ncolour = "blue"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FRONTDESK_LOAD_PLUGINS": ""}
    wanted = "frontdesk.toml: plugins.search.colour: unknown key"
    sim = subprocess.run(
        [*FRONTDESK, "simulate", str(ROOT / "examples/calls/smoke.yaml"), "--db", f"sqlite:///{tmp_path}/x.db"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert sim.returncode == 2 and sim.stderr.strip() == f"error: {wanted}", sim.stderr
    assert not (tmp_path / "x.db").exists()
    # Listing plugins is how an operator sees what is wrong, so it shows it and exits 0.
    listed = subprocess.run(
        [*FRONTDESK, "plugins", "list", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    import json

    search = next(p for p in json.loads(listed.stdout)["plugins"] if p["name"] == "search")
    assert any(wanted in e for e in search["errors"]), search
