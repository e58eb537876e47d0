"""``python -m frontdesk.agents.programs`` is the ``frontdesk`` command."""

from frontdesk.agents.programs.cli import main

main()
