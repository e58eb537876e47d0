"""What the database-fault tests (``-m faults``) share.

A fault that cannot be set up here (no root for a tmpfs, no PostgreSQL binaries, no
libfaketime) skips the test with the reason, unless FRONTDESK_REQUIRE_FAULTS=1, which .ci/run
sets: then it fails, so a run meant to cover the faults cannot pass without them.
"""

from __future__ import annotations

import glob
import os
from typing import NoReturn

import pytest

REQUIRE = "FRONTDESK_REQUIRE_FAULTS"
LIBFAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))


def cannot(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE}=1 but {reason}")
    pytest.skip(reason)


def faketime(**fake: str) -> dict[str, str]:
    """Environment for a subprocess whose clocks libfaketime moves (``FAKETIME="+1h"``, or a
    ``FAKETIME_TIMESTAMP_FILE``). It fakes the monotonic clock too unless
    ``FAKETIME_DONT_FAKE_MONOTONIC="1"`` is among ``fake``: a real wall-clock step leaves it."""
    if not LIBFAKETIME:
        cannot("libfaketime is not installed (apt-get install faketime)")
    return {"LD_PRELOAD": LIBFAKETIME[0], **fake}
