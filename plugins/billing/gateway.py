"""The payment gateway billing moves money through: what one must do, the built-in sandbox, and
how the one to use is chosen (a plugin's ``frontdesk_payment_gateway`` answer, else the sandbox).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from frontdesk.core import ToolError

if TYPE_CHECKING:
    from .ledger import AccountView
    from .settings import BillingSettings

log = logging.getLogger("frontdesk.billing")

NOT_AVAILABLE = "The payment service isn't available right now, so nothing was charged."


class PaymentDeclined(Exception):
    """Raised by a gateway when it refuses a charge or refund. Its text is caller-safe."""


@runtime_checkable
class PaymentGateway(Protocol):
    """What ``frontdesk_payment_gateway`` returns. Every method is keyed by the idempotency key,
    and calling ``charge`` or ``refund`` again with a key the gateway has seen must return the
    first ref without moving money again (Stripe's Idempotency-Key semantics)."""

    async def charge(self, account: AccountView, amount: Decimal, idempotency_key: str) -> str:
        """Take ``amount`` from the account holder; the gateway's reference for the charge."""
        ...

    async def refund(self, payment_ref: str, amount: Decimal, idempotency_key: str) -> str:
        """Return ``amount`` of the charge ``payment_ref``; the refund's reference."""
        ...

    async def find(self, idempotency_key: str) -> str | None:
        """The ref of a charge or refund made under this key, or None if none was made."""
        ...


class SandboxGateway:
    """The embedded default: moves no money. A ref is derived from the idempotency key, so even
    after a crash wipes this memory a repeated key yields the same ref, as a real gateway's
    idempotency does."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}  # idempotency key -> ref
        self.calls = 0  # how many times money "moved", for tests and the demo
        # A card network round trip takes a few hundred ms; FRONTDESK_BILLING_SANDBOX_SECONDS
        # gives the sandbox that shape, so a demo can show a payment refusing interruption.
        self.latency = 0.0

    def _record(self, prefix: str, key: str) -> str:
        if key not in self.seen:
            self.calls += 1
            self.seen[key] = f"{prefix}_{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        return self.seen[key]

    async def charge(self, account: AccountView, amount: Decimal, idempotency_key: str) -> str:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._record("sbx_ch", idempotency_key)

    async def refund(self, payment_ref: str, amount: Decimal, idempotency_key: str) -> str:
        return self._record("sbx_re", idempotency_key)

    async def find(self, idempotency_key: str) -> str | None:
        return self.seen.get(idempotency_key)


SANDBOX = SandboxGateway()


def gateway_for(hook: Any, config: BillingSettings) -> PaymentGateway:
    """The plugin-supplied gateway, or the sandbox when no plugin supplies one."""
    SANDBOX.latency = config.sandbox_seconds
    caller = getattr(hook, "frontdesk_payment_gateway", None) if hook is not None else None
    if caller is None:
        return SANDBOX
    try:
        gateway = caller(config=config)
    except Exception:
        # Never fall back to the sandbox here: a "payment" that moved no money is worse.
        log.exception("frontdesk_payment_gateway failed")
        raise ToolError(NOT_AVAILABLE) from None
    if gateway is None:
        return SANDBOX
    if not all(callable(getattr(gateway, m, None)) for m in ("charge", "refund", "find")):
        log.error("frontdesk_payment_gateway returned %r, which is not a gateway", gateway)
        raise ToolError(NOT_AVAILABLE)
    return gateway
