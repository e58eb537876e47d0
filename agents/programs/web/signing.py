"""Signed, expiring cookie values: ``value.expiry.mac``, the MAC an HMAC-SHA256 of the rest.

A cookie signed here cannot be forged or extended without the key, and says itself when it
stops being good, so a stolen one does not last for ever. Keys are derived from a secret the
operator already holds (the console token, the caller-page token, the LiveKit API secret), one
derivation per purpose, so a cookie for one purpose is worthless for another and changing the
secret voids every cookie signed with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time


def derive(secret: str, purpose: str) -> bytes:
    return hmac.new(secret.encode(), f"frontdesk-web:{purpose}".encode(), hashlib.sha256).digest()


def _mac(key: bytes, body: str) -> str:
    digest = hmac.new(key, body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def sign(key: bytes, value: str, ttl: float, now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + ttl)
    body = f"{value}.{expires}"
    return f"{body}.{_mac(key, body)}"


def unsign(key: bytes, signed: str | None, now: float | None = None) -> str | None:
    """The value, or None when ``signed`` is missing, forged, malformed or expired."""
    if not signed or len(signed) > 512:
        return None
    parts = signed.rsplit(".", 2)
    if len(parts) != 3:
        return None
    value, expires, mac = parts
    if not hmac.compare_digest(mac.encode(), _mac(key, f"{value}.{expires}").encode()):
        return None
    try:
        if int(expires) <= (time.time() if now is None else now):
            return None
    except ValueError:
        return None
    return value
