"""Whether a host is this machine: shared by the command's bind check and the app's guard,
and free of FastAPI so the command line can ask it cheaply."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
