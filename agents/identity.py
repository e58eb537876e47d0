"""Who is calling: the key under which a caller's tasks, history and follow-ups are kept.

A phone caller gets a new LiveKit identity on every call, so for SIP participants the caller is
their phone number (the ``sip.phoneNumber`` attribute LiveKit SIP sets); that is what lets a
report ordered on Monday's call be delivered on Tuesday's. Everyone else is their participant
identity, which the token issuer (your backend) chose.

The phone number is trusted only from a SIP participant: a participant with permission to
update its own attributes could otherwise set ``sip.phoneNumber`` and read someone else's tasks.

The console's caller page (``frontdesk web``) never lets a browser name itself: the server
issues ``web-<random>`` (``WEB_CALLER_PREFIX``), a shape no SIP key has (a SIP key is a phone
number, ``+`` and digits, or ``sip-withheld:<call>``), so a web caller can never be filed under
a phone caller or under anyone the server did not pick.
"""

from __future__ import annotations

import re
from typing import Any

SIP_PHONE_ATTRIBUTE = "sip.phoneNumber"
# rtc.ParticipantKind.PARTICIPANT_KIND_SIP; a plain int so this module needs no livekit import
# (tests/test_identity.py checks it against livekit).
PARTICIPANT_KIND_SIP = 3
WEB_CALLER_PREFIX = "web-"

_PHONE_NOISE = re.compile(r"[\s\-().]")
_PHONE = re.compile(r"^\+?\d{6,15}$")
# What carriers and SIP providers send for a withheld number (Twilio's anonymous, restricted,
# unavailable and blocked). Keying callers by these would pool every hidden caller together.
_PLACEHOLDER_NUMBERS = {"+266696687", "+7378742833", "+8656696", "+2562533"}


def normalize_phone(raw: str) -> str:
    """``tel:+1 (555) 010-0199`` -> ``+15550100199``; the same person, the same key."""
    value = raw.strip()
    for prefix in ("tel:", "sip:"):
        if value.lower().startswith(prefix):
            value = value[len(prefix) :]
    value = value.split("@", 1)[0]  # sip:+1555...@host
    return _PHONE_NOISE.sub("", value)


def is_sip(participant: Any) -> bool:
    return getattr(participant, "kind", None) == PARTICIPANT_KIND_SIP


def caller_identity(participant: Any) -> str:
    """The caller key for a (remote) participant.

    SIP participants with a number are keyed by it. A SIP caller who withholds their number
    ("anonymous", "Restricted", a carrier's placeholder) is keyed to this call alone: sharing
    one key would let hidden callers hear each other's results. Everyone else is keyed by
    their identity."""
    if is_sip(participant):
        attributes = getattr(participant, "attributes", None) or {}
        phone = normalize_phone(str(attributes.get(SIP_PHONE_ATTRIBUTE) or ""))
        if _PHONE.match(phone) and phone not in _PLACEHOLDER_NUMBERS:
            return phone
        call = getattr(participant, "sid", "") or attributes.get("sip.callID") or ""
        if not call:
            raise ValueError("SIP participant with a withheld number and no call id")
        return f"sip-withheld:{call}"
    identity = getattr(participant, "identity", "") or ""
    if not identity:
        raise ValueError("participant has no identity")
    return identity


__all__ = [
    "PARTICIPANT_KIND_SIP",
    "SIP_PHONE_ATTRIBUTE",
    "WEB_CALLER_PREFIX",
    "caller_identity",
    "is_sip",
    "normalize_phone",
]
