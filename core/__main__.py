"""``python -m frontdesk.core`` is the ``frontdesk`` command."""

from frontdesk.core.cli import main

main()
