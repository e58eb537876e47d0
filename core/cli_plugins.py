"""``frontdesk plugins``: list, install and uninstall plugins."""

from __future__ import annotations

import typer

app = typer.Typer(help="Plugins: list, install, uninstall.", no_args_is_help=True)
