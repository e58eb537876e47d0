"""Built-in reports plugin: ``generate_report(kind, period)``, a background job.

Written as an outside package would be: it imports only ``frontdesk.core``'s public names and
its own modules. The job runs in the runner, not the call (DESIGN.md "Processes"): it writes a
CSV and a PNG bar chart (``chart.py``: a title, labelled axes, values and a legend) into its
``path`` setting (``FRONTDESK_REPORTS_PATH`` or ``[plugins.reports] path``; default
``reports``) and returns their paths with a two-sentence summary that the follow-up speaks.
The chart needs matplotlib, the optional ``charts`` extra (``pip install 'frontdesk[charts]'``);
without it the report is written without its PNG, its result's ``chart.skipped`` says why and
its summary says so in one more sentence. Kinds:

- ``statement``: the caller's invoices and payments made in the period, asked of the billing
  plugin through its ``billing_statement`` hook (``ctx.hook``). Without billing loaded the
  report says there is no billing data;
- ``activity``: the caller's tasks in the period (``ctx.tasks``), counted by department, tool
  and status.

Periods: ``YYYY-MM``, ``this-month``, ``last-month`` and ``last-30-days`` (UTC).
``validate_report_args`` is also what the call side runs before queueing, so a bad kind or
period is answered at once instead of becoming a failed job minutes later.
"""

from __future__ import annotations

import asyncio
import csv
import inspect
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict

from frontdesk.core import Department, ToolContext, ToolError, hookimpl, tool

from . import chart as charts
from .chart import Chart, ChartUnavailable, Series

log = logging.getLogger("frontdesk.reports")

KINDS = ("statement", "activity")
BAD_KIND = "I can make a statement or an activity report. Which would you like?"
BAD_PERIOD = "I need a period like 2026-03, this month, last month or the last 30 days."
_MONTH_RE = re.compile(r"(\d{4})[-/](\d{1,2})")
_ALIASES = {
    "last-30-days": "last-30-days",
    "past-30-days": "last-30-days",
    "the-last-30-days": "last-30-days",
    "this-month": "this-month",
    "current-month": "this-month",
    "last-month": "last-month",
    "previous-month": "last-month",
}
# How task outcomes are read out in an activity summary: the good news first.
_STATUS_ORDER = {"succeeded": 0, "failed": 1, "cancelled": 2, "running": 3, "queued": 4}
# ... and their colours in the activity chart (Okabe-Ito names, chart.COLOURS).
_STATUS_COLOURS = {
    "succeeded": "green", "failed": "vermillion", "cancelled": "grey", "running": "blue",
    "queued": "sky",
}  # fmt: skip


class ReportsSettings(BaseSettings):
    """The reports desk's settings: ``FRONTDESK_REPORTS_*`` or the profile's
    ``[plugins.reports]``."""

    model_config = SettingsConfigDict(env_prefix="FRONTDESK_REPORTS_", extra="ignore")

    path: Path = Path("reports")  # where the CSV and PNG files are written


def money(amount: Decimal, currency: str = "USD") -> str:
    """How an amount is read back: "$1,200.00" (or "1,200.00 EUR")."""
    text = f"{Decimal(amount).quantize(Decimal('0.01')):,}"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


@dataclass(frozen=True)
class Period:
    label: str  # canonical and file-name safe: "2026-03", "last-30-days"
    spoken: str  # "March 2026", "the last 30 days"
    start: datetime  # inclusive, UTC
    end: datetime  # exclusive, UTC

    def holds(self, at: datetime) -> bool:
        return self.start <= at < self.end


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
    return Period(f"{year:04d}-{month:02d}", f"{start:%B} {year}", start, end)


def validate_report_args(
    kind: str, period: str, *, now: datetime | None = None
) -> tuple[str, Period]:
    """(kind, period) normalized, or a ToolError with a sentence the caller can act on."""
    kind_norm = str(kind).strip().lower()
    if kind_norm not in KINDS:
        raise ToolError(BAD_KIND)
    now = now or datetime.now(timezone.utc)
    if len(str(period)) > 40:  # checked before normalizing, so padding cannot sneak through
        raise ToolError(BAD_PERIOD)
    text = re.sub(r"[\s_]+", "-", str(period).strip().lower())
    alias = _ALIASES.get(text)
    if alias == "last-30-days":
        return kind_norm, Period(alias, "the last 30 days", now - timedelta(days=30), now)
    if alias == "this-month":
        this = _month(now.year, now.month)
        return kind_norm, Period(alias, "this month", this.start, this.end)
    if alias == "last-month":
        prev = _month(now.year - (now.month == 1), (now.month - 2) % 12 + 1)
        return kind_norm, Period(alias, prev.spoken, prev.start, prev.end)
    match = _MONTH_RE.fullmatch(text)
    if match is None:
        raise ToolError(BAD_PERIOD)
    year, month = int(match[1]), int(match[2])
    if not (2000 <= year <= 2100 and 1 <= month <= 12):
        raise ToolError(BAD_PERIOD)
    chosen = _month(year, month)
    if chosen.start > now:
        raise ToolError(f"{chosen.spoken} hasn't started yet, so there's nothing to report.")
    return kind_norm, chosen


# -- building the data ----------------------------------------------------------------------


@dataclass
class Report:
    header: list[str]
    rows: list[list[str]]
    labels: list[str]  # one per bar
    values: list[float]
    summary: str
    chart: Chart | None = None  # how the PNG is drawn; None: plain bars of labels/values


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


STATEMENT_HEADER = ["date", "type", "reference", "invoice", "description", "amount", "status"]
STATEMENT_BARS = ["invoiced", "paid", "refunded"]
_STATEMENT_LINES = {"invoiced": "invoice", "paid": "payment", "refunded": "refund"}
_STATEMENT_COLOURS = {"invoiced": "blue", "paid": "green", "refunded": "orange"}


def _statement_chart(
    caller: str, period: Period, values: list[float], counts: list[int], cur: str = "USD"
) -> Chart:
    """Three bars (invoiced, paid, refunded), each its own legend entry with how many lines."""
    series = [
        Series(
            f"{name} ({_plural(n, _STATEMENT_LINES[name])})",
            [v if j == i else 0.0 for j in range(len(values))],
            _STATEMENT_COLOURS[name],
        )
        for i, (name, v, n) in enumerate(zip(STATEMENT_BARS, values, counts, strict=True))
    ]
    return Chart(
        title=f"Statement for {caller}: {period.spoken}",
        xlabel="Entries in the period",
        ylabel=f"Amount ({cur})",
        categories=STATEMENT_BARS,
        series=series,
        value_format=lambda v: money(Decimal(str(v)), cur),
        empty_note="No invoices or payments in this period",
        description="; ".join(
            f"{name} {money(Decimal(str(v)), cur)}"
            for name, v in zip(STATEMENT_BARS, values, strict=True)
        ),
    )


async def _billing_statement(ctx: ToolContext, period: Period) -> tuple[bool, Any]:
    """(billing is there, its answer) through billing's ``billing_statement`` hook."""
    ask = getattr(ctx.hook, "billing_statement", None) if ctx.hook is not None else None
    if ask is None or not ask.get_hookimpls():
        return False, None
    answer = ask(caller=ctx.caller, database=ctx.database, start=period.start, end=period.end)
    if inspect.isawaitable(answer):
        answer = await answer
    return True, answer


def _statement(caller: str, period: Period, billing: bool, found: Any) -> Report:
    """The statement report from billing's answer (gathered by ``_gather``)."""
    nothing = _statement_chart(caller, period, [0.0, 0.0, 0.0], [0, 0, 0])
    if not billing:
        return Report(
            STATEMENT_HEADER, [], STATEMENT_BARS, [0.0, 0.0, 0.0],
            f"There is no billing data to report for {period.spoken}. "
            "Billing is not available at this front desk.", nothing,
        )  # fmt: skip
    if found is None:
        return Report(
            STATEMENT_HEADER, [], STATEMENT_BARS, [0.0, 0.0, 0.0],
            f"You have no billing account yet, so there is nothing to report for {period.spoken}. "
            "Billing opens one the first time you ask about your balance.", nothing,
        )  # fmt: skip
    lines = list(found["lines"])
    cur = found.get("currency", "USD")

    def total(kind: str) -> Decimal:
        return sum((Decimal(ln["amount"]) for ln in lines if ln["type"] == kind), Decimal("0.00"))

    def count(kind: str) -> int:
        return sum(1 for ln in lines if ln["type"] == kind)

    invoiced, paid, refunded = total("invoice"), total("payment"), total("refund")
    also = f", with {money(refunded, cur)} refunded" if count("refund") else ""
    summary = (
        f"Your statement for {period.spoken} lists {_plural(count('invoice'), 'invoice')} "
        f"totalling {money(invoiced, cur)} and {_plural(count('payment'), 'payment')} "
        f"totalling {money(paid, cur)}{also}. "
        f"Your balance today is {money(found['balance'], cur)}."
    )
    rows = [
        [f"{ln['date']:%Y-%m-%d}", ln["type"], ln["reference"], ln["invoice"],
         ln["description"], f"{Decimal(ln['amount']):.2f}", ln["status"]]
        for ln in lines
    ]  # fmt: skip
    values = [float(invoiced), float(paid), float(refunded)]
    counts = [count("invoice"), count("payment"), count("refund")]
    return Report(
        STATEMENT_HEADER, rows, STATEMENT_BARS, values, summary,
        _statement_chart(caller, period, values, counts, cur),
    )  # fmt: skip


async def _activity_counts(ctx: ToolContext, period: Period) -> list[tuple[str, str, str, int]]:
    """(department, tool, status, count) of the caller's own tasks in the period, this report
    itself left out (it is still running)."""
    counted: Counter[tuple[str, str, str]] = Counter(
        (t.department or "other", t.tool, t.status)
        for t in await ctx.tasks.list(limit=None)
        if period.holds(t.created_at) and t.id != ctx.task_id
    )
    return sorted((d, t, s, n) for (d, t, s), n in counted.items())


def _activity(caller: str, period: Period, found: list[tuple[str, str, str, int]]) -> Report:
    """The activity report from the counts (gathered by ``_gather``)."""
    by_dept: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for dept, _, status, n in found:
        by_dept[dept] += n
        by_status[status] += n
    total = sum(by_dept.values())
    ranked = by_dept.most_common()
    if not total:
        summary = (
            f"I found no activity on your account for {period.spoken}. "
            "Anything you ask the front desk to do will show up in this report."
        )
    else:
        ranked_status = sorted(by_status, key=lambda s: (_STATUS_ORDER.get(s, 9), s))
        states = ", ".join(f"{by_status[s]} {s}" for s in ranked_status)
        summary = (
            f"For {period.spoken} you had {_plural(total, 'task')} across "
            f"{_plural(len(by_dept), 'department')}: {states}. "
            f"The busiest was {ranked[0][0]} with {_plural(ranked[0][1], 'task')}."
        )
    departments = [d for d, _ in ranked]
    statuses = sorted(by_status, key=lambda s: (_STATUS_ORDER.get(s, 9), s))
    per: Counter[tuple[str, str]] = Counter()
    for dept, _, status, n in found:
        per[dept, status] += n
    chart = Chart(
        title=f"Activity for {caller}: {period.spoken}",
        xlabel="Department",
        ylabel="Tasks",
        categories=departments,
        series=[
            Series(s, [float(per[d, s]) for d in departments], _STATUS_COLOURS.get(s))
            for s in statuses
        ],
        integer=True,
        empty_note="No tasks in this period",
        legend_title="Status",
        description="; ".join(f"{d} {n} tasks" for d, n in ranked) or "no tasks",
    )
    return Report(
        ["department", "tool", "status", "count"],
        [[d, t, s, str(n)] for d, t, s, n in found],
        departments, [float(n) for _, n in ranked], summary, chart,
    )  # fmt: skip


# -- writing the files ----------------------------------------------------------------------


def slug(caller: str) -> str:
    """A file-name-safe form of the caller's name: no separators, no dots, bounded."""
    return re.sub(r"[^a-z0-9]+", "-", caller.lower()).strip("-")[:32] or "caller"


def _cell(value: str) -> str:
    # A spreadsheet runs cells starting with these as formulas; quote them (CSV injection).
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


CHART_FAILED = "drawing it failed (see the log)"


def _chart_of(report: Report) -> Chart:
    if report.chart is not None:
        return report.chart
    return Chart("Report", "", "Value", report.labels, [Series("value", report.values)])


def _write_csv(folder: Path, stem: str, report: Report) -> str:
    """The CSV's path. Written beside and renamed, so a reader (or a re-run after a crash)
    never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path = folder / f"{stem}.csv"
    tmp = folder / f".{stem}.csv.tmp"
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(report.header)
        writer.writerows([_cell(c) for c in row] for row in report.rows)
    os.replace(tmp, csv_path)
    return str(csv_path.resolve())


def _draw_chart(folder: Path, stem: str, report: Report) -> tuple[str | None, str | None]:
    """(png path or None, why the chart was skipped or None): skipped, not fatal, without
    matplotlib or if drawing it fails."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        image = charts.bar_chart_png(_chart_of(report))
    except ChartUnavailable as exc:
        log.warning("report %s: chart skipped: %s", stem, exc)
        return None, str(exc)
    except Exception:
        log.exception("report %s: drawing the chart failed; the CSV is written", stem)
        return None, CHART_FAILED
    png_path = folder / f"{stem}.png"
    tmp = folder / f".{stem}.png.tmp"
    tmp.write_bytes(image)
    os.replace(tmp, png_path)
    return str(png_path.resolve()), None


async def _gather(ctx: ToolContext, kind: str, period: Period) -> tuple[bool, Any]:
    """What the report is made of, as plain data a durable step can record: billing's answer
    for a statement ((billing loaded, its answer)), the task counts for activity."""
    if kind == "statement":
        await ctx.progress(0.3, "reading payments")
        return await _billing_statement(ctx, period)
    found = await _activity_counts(ctx, period)
    await ctx.progress(0.4, "counting tasks")
    return True, found


@tool(pattern="background", precheck=validate_report_args)
async def generate_report(ctx: ToolContext, kind: str, period: str) -> dict[str, Any]:
    """Build a report as a CSV file and a chart: kind "statement" (invoices and payments) or
    "activity" (what the caller asked the front desk to do). period is a month like 2026-03,
    or "this-month", "last-month" or "last-30-days". It runs in the background; the caller
    hears a summary when it is ready."""
    kind, span = validate_report_args(kind, period)
    await ctx.progress(0.1, "reading invoices" if kind == "statement" else "reading task history")
    # Three durable steps (docs/plugins.md): a runner that dies while drawing resumes there,
    # with the same figures, instead of gathering them again. Each step's files are written
    # under the task's own name, by rename, so a step run twice writes the same file once.
    billing, found = await ctx.step("gather", _gather, ctx, kind, span)
    if kind == "statement":
        report = _statement(ctx.caller, span, billing, found)
    else:
        report = _activity(ctx.caller, span, found)
    await ctx.progress(0.6, "writing the spreadsheet and chart")
    config = ctx.config if isinstance(ctx.config, ReportsSettings) else ReportsSettings()
    stem = f"{kind}-{slug(ctx.caller)}-{span.label}-task{ctx.task_id}"
    folder = Path(config.path)
    csv_path = await ctx.step("write csv", asyncio.to_thread, _write_csv, folder, stem, report)
    png_path, skipped = await ctx.step(
        "draw chart", asyncio.to_thread, _draw_chart, folder, stem, report
    )
    await ctx.progress(0.95, "finishing up")
    files = {"csv": csv_path}
    summary = report.summary
    if png_path is not None:
        files["png"] = png_path
    else:
        summary += f" The chart was skipped because {skipped}; the spreadsheet has every figure."
    return {
        "summary": summary,
        "files": files,
        "kind": kind,
        "period": span.label,
        "rows": len(report.rows),
        "chart": {"labels": report.labels, "values": report.values, "skipped": skipped},
    }


INSTRUCTIONS = """\
You are the reports desk, talking with a caller by voice.
You make two kinds of report: a statement of their invoices and payments, and an activity
summary of what they asked the front desk to do. Ask which kind and which period if they did
not say; a period is a month, this month, last month or the last 30 days.
Start the report with generate_report, tell them its reference and that you will let them know
when it is ready; they can keep talking or hang up meanwhile.
Keep replies to one or two short spoken sentences, with no lists, symbols or markdown.
If the caller needs another department, transfer them."""


@hookimpl
def register_departments(register: Any) -> None:
    register(
        Department(
            name="reports",
            description="statements and activity reports, delivered as files with a summary",
            instructions=INSTRUCTIONS,
            tools=[generate_report],
            keywords=["report", "statement", "summary", "activity", "export"],
        )
    )


@hookimpl
def register_settings(register: Any) -> None:
    register(ReportsSettings)
