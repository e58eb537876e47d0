"""Run the frontdesk CLI with the test plugin `kit` registered, as an installed plugin would be."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import kit  # noqa: E402

from frontdesk.core import host  # noqa: E402

_load = host.load


def load(settings=None, *, extra=()):  # noqa: ANN001, ANN201
    return _load(settings, extra=[*extra, ("kit", kit)])


host.load = load

from frontdesk.agents.programs.cli import main  # noqa: E402

main()
