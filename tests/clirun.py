"""Running the `frontdesk` CLI as an operator would, in a subprocess, for the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

FRONTDESK = [sys.executable, "-m", "frontdesk.agents.programs"]


def tasks_json(db: str, *filters: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`frontdesk tasks list --json` (newest first) with ``filters``; ``env`` is the whole
    environment, default this one with only the test's chosen plugins."""
    env = env if env is not None else {**os.environ, "FRONTDESK_LOAD_PLUGINS": ""}
    out = subprocess.run(
        [*FRONTDESK, "tasks", "list", "--json", *filters, "--db", db],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
