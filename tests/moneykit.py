"""Helpers for the payment-in-doubt tests: a gateway at the network edge whose answers a test
scripts, billing wired to it through a real call (run_tool), the reconciler's pass, and a
stand-in live call that hears follow-ups."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from frontdesk.agents.followups import FollowupWatcher, followup_instructions
from frontdesk.core import hookimpl, host
from frontdesk.db.store import wait_for

ROOT = Path(__file__).resolve().parent.parent
DEMO_SEED = ROOT / "examples" / "demo" / "invoices.toml"

Hook = Callable[[], Awaitable[None]] | None


class Gateway:
    """Stripe-like: a key seen before returns its first ref and moves no money. ``before`` and
    ``after`` run around the move (raise to lose the request or the answer, wait to hold it)."""

    def __init__(self) -> None:
        self.refs: dict[str, str] = {}
        # (op, key, amount, whose: the account charged or the charge refunded), once per move
        self.moves: list[tuple[str, str, Decimal, str]] = []
        self.finds: list[str] = []
        self.before: Hook = None
        self.after: Hook = None
        self.find_fails = False

    async def _move(self, op: str, key: str, amount: Decimal, whose: str) -> str:
        if self.before is not None:
            await self.before()
        if key not in self.refs:
            self.refs[key] = f"gw_{op}_{len(self.refs) + 1}"
            self.moves.append((op, key, amount, whose))
        if self.after is not None:
            await self.after()
        return self.refs[key]

    async def charge(self, account: Any, amount: Decimal, idempotency_key: str) -> str:
        return await self._move("charge", idempotency_key, amount, account.caller)

    async def refund(self, payment_ref: str, amount: Decimal, idempotency_key: str) -> str:
        return await self._move("refund", idempotency_key, amount, payment_ref)

    async def find(self, idempotency_key: str) -> str | None:
        self.finds.append(idempotency_key)
        if self.find_fails:
            raise ConnectionError("gateway unreachable")
        return self.refs.get(idempotency_key)

    def double_charges(self) -> int:
        """Moves beyond one per caller (or refunded charge) and amount: what a caller who
        paid once would see twice on their statement (the trials pay once per caller)."""
        seen: dict[Any, int] = {}
        for op, _key, amount, whose in self.moves:
            seen[(op, whose, amount)] = seen.get((op, whose, amount), 0) + 1
        return sum(n - 1 for n in seen.values())


async def answer_lost() -> None:
    """For ``Gateway.after``: the money moved, but its answer never came back."""
    raise ConnectionError("connection reset after the money moved")


async def request_lost() -> None:
    """For ``Gateway.before``: the request never reached the gateway."""
    raise ConnectionError("the request never reached the gateway")


class GatewayPlugin:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    @hookimpl
    def frontdesk_payment_gateway(self, config: Any) -> Gateway:
        return self.gateway


def billing_registry(settings: Any, gateway: Gateway, monkeypatch: Any, grace: float = 0) -> Any:
    monkeypatch.setenv("FRONTDESK_BILLING_SEED_INVOICES", str(DEMO_SEED))
    monkeypatch.setenv("FRONTDESK_BILLING_RECONCILE_GRACE_SECONDS", str(grace))
    monkeypatch.setenv("FRONTDESK_BILLING_RECONCILE_SECONDS", "0.2")
    return host.load(settings, extra=[("gw", GatewayPlugin(gateway))])


async def reconcile_once(store: Any, registry: Any) -> Any:
    """One pass of billing's reconciler, as a runner runs it."""
    from frontdesk.core.housekeeping import Housekeeper

    keeper = Housekeeper(store, registry)
    [job] = [j for j in keeper.jobs if (j.plugin, j.name) == ("billing", "reconcile_payments")]
    return await job.fn(keeper.contexts["billing"])


class Listener:
    """A live call of ``caller`` as the follow-up watcher sees it: idle, and it hears what it
    is told (the instructions the agent would be given), then marks it delivered."""

    def __init__(self, store: Any, caller: str) -> None:
        self.store = store
        self.caller = caller
        self.heard: list[tuple[int, str]] = []
        self._tasks: set[asyncio.Future[Any]] = set()

    def is_idle(self) -> bool:
        return True

    def spawn(self, coro: Any) -> None:
        self._tasks.add(asyncio.ensure_future(coro))

    async def deliver(self, task: Any) -> bool:
        self.heard.append((task.id, followup_instructions(task)))
        return await self.store.mark_delivered(task.id, note="delivered by test")


async def hear_followups(store: Any, caller: str, n: int = 1) -> list[tuple[int, str]]:
    """What ``caller``'s live call hears (at least ``n`` follow-ups, waited for on the store)."""
    watcher = FollowupWatcher(store, interval=0.05)
    listener = Listener(store, caller)
    watcher.add(listener)  # type: ignore[arg-type]
    try:

        async def enough() -> bool:
            return len(listener.heard) >= n and not await store.pending_followups([caller])

        assert await wait_for(store, enough, timeout=15), listener.heard
    finally:
        await watcher.aclose()
    return listener.heard
