"""A payment in doubt on a real voice AgentSession (issue 23): the gateway took the money but
its answer was lost. The caller is told it is being confirmed and that nothing will be charged
twice; the runner's reconciler then records it, and the caller hears how it ended once, as a
follow-up spoken when the agent is idle."""

from __future__ import annotations

import pytest
from moneykit import Gateway, answer_lost, billing_registry
from voicekit import no_dropped_turns, voice_settings

from frontdesk.agents.programs.simulate import Environment
from frontdesk.agents.testing.caller import CallerScript, VoiceCall
from frontdesk.core import Database
from frontdesk.plugins.billing import ledger

pytestmark = pytest.mark.usefixtures("no_dropped_turns")
__all__ = ["no_dropped_turns", "voice_settings"]  # fixtures, used by name

PAY = {"invoice_id": "INV-1001", "amount": "100", "confirmed": True}
WORDS = "pay one hundred dollars on invoice one thousand and one"


async def test_a_payment_in_doubt_is_told_then_settled_and_told_once_on_voice(
    voice_settings, monkeypatch
):
    gw = Gateway()
    registry = billing_registry(voice_settings, gw, monkeypatch)  # reconciles every 0.2 s
    env = await Environment.open(voice_settings, registry)
    try:
        async with VoiceCall.open(
            store=env.store, registry=registry, settings=env.settings, caller="vic",
            watcher=env.watcher,
        ) as call:  # fmt: skip
            call.watch_store(env.runner_store)
            call.llm.script(
                "billing please", [{"tools": [{"transfer_to_billing": {}}]}, {"say": "Billing."}]
            )
            await call.play(CallerScript().say("billing please", 0.3))
            await call.idle()

            gw.after = answer_lost
            call.llm.script(
                WORDS,
                [{"tools": [{"pay_invoice": PAY}]}, {"say": "It is being confirmed."}],
            )
            await call.play(CallerScript().say(WORDS, 0.4))
            await call.until(lambda: any(e["status"] == "succeeded" for e in call.task_events
                                         if e["tool"] == "pay_invoice"))  # fmt: skip
            await call.idle()

            told = " ".join(str(m) for ctx in call.llm.requests for m in ctx.items)
            assert "being confirmed" in told and "nothing will be charged twice" in told
            assert "something went wrong" not in told
            [row] = await env.store.list(caller="vic", tool="pay_invoice")
            assert row.status == "succeeded" and row.delivered_at is not None
            followups = [e for e in call.of("followup") if e["task_id"] == row.id]
            assert len(followups) == 1  # told once
            db = Database(env.store)
            account = await ledger.get_account(db, "vic")
            [payment] = await ledger.payments(db, account.id)
            assert payment.status == "succeeded" and len(gw.moves) == 1  # charged once
            asked = [str(ctx.items) for ctx in call.llm.requests]
            assert [a for a in asked if "went through" in a and payment.id in a], (
                "the follow-up names the payment that went through"
            )
            after = [s for s in call.pipeline.tts.syntheses if s.at > followups[0]["at"]]
            assert len(after) == 1  # synthesized once
            [heard] = [h for h in call.pipeline.output.heard() if h.id == after[0].id]
            assert heard.complete

    finally:
        await env.close()
