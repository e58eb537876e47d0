"""Exact money for billing: what a caller says, parsed to a Decimal, and read back in words.

Never a float: a float amount from the LLM's JSON is converted through its shortest repr, so
120.1 is 120.10 and 0.1 + 0.2 is refused as a fraction of a cent, not rounded.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from frontdesk.core import ToolError

CENT = Decimal("0.01")
ZERO = Decimal("0.00")
MAX_AMOUNT = Decimal("9999999999.99")  # Numeric(12, 2)
MALFORMED = "I need the amount to pay, in dollars and cents."
_AMOUNT_RE = re.compile(
    r"(?P<sign>[-+]?)\s*\$?\s*(?P<sign2>[-+]?)\s*"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d*)(?:\.(?P<frac>\d+))?\s*(?:usd|dollars?)?",
    re.IGNORECASE,
)
# Words a caller may say before an id: "invoice number 1001", "payment PAY-7K3M9Q".
_FILLER_RE = re.compile(r"^(?:INVOICE|PAYMENT|REFERENCE)\s*(?:NUMBER|NO\.?|#)?[\s#]*(?=[A-Z0-9])")


def parse_amount(raw: Any) -> Decimal:
    """An amount the caller said, as an exact positive Decimal with cents, or a ToolError.

    Accepts "120", "120.5", "$1,200.00", "45 dollars" and JSON numbers; rejects negative, zero,
    fractions of a cent, NaN, infinity and exponents.
    """
    if isinstance(raw, bool) or raw is None:
        raise ToolError(MALFORMED)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise ToolError(MALFORMED)
        raw = repr(raw)
    text = str(raw).strip()
    match = _AMOUNT_RE.fullmatch(text) if len(text) <= 40 else None
    if match is None or not (match["int"] or match["frac"]):
        raise ToolError(MALFORMED)
    try:
        value = Decimal(f"{match['int'].replace(',', '') or '0'}.{match['frac'] or '0'}")
    except InvalidOperation:
        raise ToolError(MALFORMED) from None
    if "-" in (match["sign"], match["sign2"]) or value <= 0:
        raise ToolError("The amount has to be more than zero.")
    if value != value.quantize(CENT):
        raise ToolError("Amounts can have at most two decimal places.")
    if value > MAX_AMOUNT:
        raise ToolError("That amount is too large.")
    return value.quantize(CENT)


def money(amount: Decimal, currency: str = "USD") -> str:
    """How an amount is read back: "$1,200.00" (or "1,200.00 EUR")."""
    text = f"{amount.quantize(CENT):,}"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def normalize_id(raw: Any, prefix: str) -> str | None:
    """ "INV-1001", "inv 1001", "invoice number 1001" and "1001" all mean INV-1001; None when
    ``raw`` cannot be an id with this prefix (so no query is made for it)."""
    text = str(raw).strip().upper()
    if len(text) > 40:
        return None
    text = _FILLER_RE.sub("", text)
    if match := re.fullmatch(rf"{prefix}[\s_#-]+([A-Z0-9]{{1,26}})", text):
        return f"{prefix}-{match[1]}"
    if not re.fullmatch(r"[A-Z0-9]{1,26}", text):
        return None
    rest = text[len(prefix) :] if text.startswith(prefix) and len(text) > len(prefix) else text
    return f"{prefix}-{rest}"
