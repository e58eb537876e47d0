"""Rich tables and transcripts for the terminal."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

# Piped output (CI logs, `| less`) keeps whole rows rather than rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 160)


def _short(value: Any, width: int = 48) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def task_table(rows: list[Any], title: str = "tasks") -> None:
    table = Table(title=title)
    for col in (
        "id",
        "caller",
        "department",
        "tool",
        "pattern",
        "status",
        "result / error",
        "delivered",
    ):
        table.add_column(col)
    for t in rows:
        table.add_row(
            str(t.id),
            t.caller,
            t.department or "",
            t.tool,
            t.pattern,
            t.status,
            _short(t.error if t.error else t.result),
            "yes" if t.delivered_at else "",
        )
    console.print(table)


def task_detail(task: Any, events: list[dict[str, Any]]) -> None:
    table = Table(title=f"task {task.id}", show_header=False)
    table.add_column("field")
    table.add_column("value")
    for key, value in task.to_json().items():
        table.add_row(key, _short(value, 200))
    for path in artifact_paths(task.result):
        table.add_row("artifact", path)
    console.print(table)
    ev = Table(title="events")
    for col in ("at", "status", "note"):
        ev.add_column(col)
    for e in events:
        ev.add_row(e["at"], e["status"], e["note"] or "")
    console.print(ev)


def artifact_paths(result: Any) -> list[str]:
    if isinstance(result, dict):
        files = result.get("files") or result.get("artifacts") or {}
        if isinstance(files, dict):
            return [str(v) for v in files.values()]
        if isinstance(files, list):
            return [str(v) for v in files]
    return []


def stats_table(rows: list[dict[str, Any]]) -> None:
    table = Table(title="task stats")
    for col in ("department", "status", "count", "median s"):
        table.add_column(col)
    for r in rows:
        med = r["median_seconds"]
        table.add_row(
            r["department"], r["status"], str(r["count"]), "" if med is None else f"{med:.3f}"
        )
    console.print(table)


COLORS = {"user": "cyan", "agent": "green", "handoff": "magenta", "task": "yellow"}


def transcript_line(event: dict[str, Any]) -> None:
    """One readable line of a simulated call, with the active agent on each spoken line."""
    kind = event["type"]
    t = f"[dim]{event.get('t', 0):6.2f}s {event.get('caller', '')}[/dim]"
    if kind == "user":
        console.print(f"{t} [cyan]caller[/cyan]: {escape(event['text'])}")
    elif kind == "agent":
        console.print(f"{t} [green]{event['agent']}[/green]: {escape(event['text'])}")
    elif kind == "handoff":
        console.print(f"{t} [magenta]handoff {event['from']} → {event['to']}[/magenta]")
    elif kind == "task":
        note = f" ({escape(str(event['note']))})" if event.get("note") else ""
        console.print(
            f"{t} [yellow]task {event['task_id']} {event['tool']}: {event['status']}{note}[/yellow]"
        )
    elif kind == "tool_call":
        console.print(
            f"{t} [dim]{event['agent']} calls {event['name']}({escape(str(event['arguments']))})[/dim]"
        )
    elif kind in ("interrupt", "interrupt_refused"):
        console.print(f"{t} [red]{kind.replace('_', ' ')}[/red] {event.get('reason', '')}")
    elif kind in ("session_start", "session_end"):
        console.print(f"{t} [bold]{kind.replace('_', ' ')}[/bold]")
    elif kind in ("expect_failed", "problem"):
        console.print(f"{t} [bold red]{escape(event['message'])}[/bold red]")
    elif kind == "brain":
        console.print(f"{t} [dim]{event['what']}: answered by the offline brain[/dim]")
    elif kind == "followup":
        console.print(f"{t} [dim]follow-up for task {event['task_id']} by {event['agent']}[/dim]")
