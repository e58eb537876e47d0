"""Caller identity from a participant: SIP phone number, otherwise the identity."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from livekit import rtc

from frontdesk.agents.identity import (
    PARTICIPANT_KIND_SIP,
    SIP_PHONE_ATTRIBUTE,
    caller_identity,
    normalize_phone,
)

STANDARD = rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD
SIP = rtc.ParticipantKind.PARTICIPANT_KIND_SIP


def participant(
    identity: str, kind: int = STANDARD, sid: str = "PA_1", **attributes: str
) -> SimpleNamespace:
    return SimpleNamespace(identity=identity, kind=kind, sid=sid, attributes=attributes)


def test_sip_kind_constant_matches_livekit():
    assert PARTICIPANT_KIND_SIP == SIP


def test_web_caller_is_their_identity():
    assert caller_identity(participant("alice@example.com")) == "alice@example.com"


def test_sip_caller_is_their_phone_number():
    p = participant(
        "sip_+15550100199", SIP, **{SIP_PHONE_ATTRIBUTE: "+15550100199", "sip.trunkID": "ST_x"}
    )
    assert caller_identity(p) == "+15550100199"


def test_same_person_same_key_across_calls():
    # A new LiveKit identity every call, one phone number: history follows the person.
    first = participant("sip_call_1", SIP, **{SIP_PHONE_ATTRIBUTE: "+1 (555) 010-0199"})
    second = participant("sip_call_2", SIP, **{SIP_PHONE_ATTRIBUTE: "tel:+15550100199"})
    assert caller_identity(first) == caller_identity(second) == "+15550100199"


@pytest.mark.parametrize(
    "withheld",
    ["", "  ", "anonymous", "sip:anonymous@anonymous.invalid", "Restricted", "+266696687"],
)
def test_withheld_numbers_are_keyed_to_the_call_alone(withheld):
    # Hidden callers must never share a key: they would hear each other's results.
    first = participant("sip_anon", SIP, sid="PA_a", **{SIP_PHONE_ATTRIBUTE: withheld})
    second = participant("sip_anon", SIP, sid="PA_b", **{SIP_PHONE_ATTRIBUTE: withheld})
    assert caller_identity(first) == "sip-withheld:PA_a"
    assert caller_identity(second) == "sip-withheld:PA_b"


def test_phone_attribute_is_not_trusted_from_a_non_sip_participant():
    # A web participant allowed to set its own attributes must not become someone else.
    spoof = participant("mallory", STANDARD, **{SIP_PHONE_ATTRIBUTE: "+15550100199"})
    assert caller_identity(spoof) == "mallory"


def test_missing_identity_is_an_error():
    with pytest.raises(ValueError):
        caller_identity(participant(""))


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("+44 20 7946 0958", "+442079460958"),
        ("sip:+15550100199@pbx.example", "+15550100199"),
        ("555.010.0199", "5550100199"),
    ],
)
def test_normalize_phone(raw, expected):
    assert normalize_phone(raw) == expected
