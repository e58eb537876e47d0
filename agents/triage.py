"""Triage: the first desk. It greets, routes by the registered departments' descriptions and
delivers what is waiting for the caller from earlier calls."""

from __future__ import annotations

from frontdesk.core.department import Department

TRIAGE = "triage"


def triage_department(departments: list[Department], business: str) -> Department:
    """The front desk of ``business`` (the profile's name), offering every enabled desk."""
    menu = "\n".join(f"- {d.name}: {d.description}" for d in departments)
    return Department(
        name=TRIAGE,
        description="the front desk: greets callers and routes them to the right department",
        instructions=(
            f"You are the front desk of {business}. Greet the caller, find out what "
            "they need and transfer them to the right department:\n"
            f"{menu}\n"
            "Answer questions about the caller's own tasks (for example 'what happened to my "
            "report') yourself with task_status or my_tasks; do not transfer for those."
        ),
        keywords=["hello", "front desk", "operator", "back", "main menu"],
    )
