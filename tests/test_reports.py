"""Reports against a real TaskStore on SQLite: argument checks, the statement and activity
reports, their CSV and PNG artifacts (parsed back), and progress recorded on the row."""

from __future__ import annotations

import csv
import struct
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pluggy
import pytest

from frontdesk.core import Database, ToolContext, ToolError, hookimpl, host
from frontdesk.core.settings import Settings
from frontdesk.plugins import billing, reports
from frontdesk.plugins.billing import ledger
from frontdesk.plugins.billing.settings import BillingSettings
from frontdesk.plugins.reports import ReportsSettings, chart, validate_report_args

ROOT = Path(__file__).resolve().parent.parent
DEMO_SEED = ROOT / "examples" / "demo" / "invoices.toml"
generate_report = reports.generate_report.fn
NOW = datetime(2026, 3, 15, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def billing_config() -> BillingSettings:
    return BillingSettings(seed_invoices=DEMO_SEED, payee="Harbor Light Hotel")


@pytest.fixture
def hook():
    """The plugin manager's hook relay with the built-ins loaded, billing among them."""
    return host.load(Settings(load_plugins="")).pm.hook


@pytest.fixture
def ctx_for(store, tmp_path, hook, billing_config):
    async def make(
        caller="alice", tool="generate_report", pattern="background", key="k1", hook=hook
    ) -> ToolContext:
        row = await store.create(caller=caller, tool=tool, pattern=pattern, status="running")
        # As in the runner: no live turn, so run_ctx is None; each plugin gets its own config.
        config = (
            billing_config if tool in ("pay_invoice", "list_invoices")
            else ReportsSettings(path=tmp_path / "r")
        )  # fmt: skip
        return ToolContext(
            caller=caller, session_id=None, task_id=row.id, department="reports",
            idempotency_key=key, store=store, run_ctx=None, hook=hook, config=config,
        )  # fmt: skip

    return make


def read_png(data: bytes) -> tuple[int, int, bytes]:
    """(width, height, decompressed scanlines), checking the signature and every chunk CRC."""
    assert data[:8] == chart.PNG_SIGNATURE
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + length
    assert list(chunks)[0] == b"IHDR" and b"IEND" in chunks
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2)
    return width, height, zlib.decompress(chunks[b"IDAT"])


def read_csv(path: str) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def sentences(text: str) -> int:
    return sum(1 for part in text.replace("$", "").split(". ") if part.strip())


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "label", "start", "end"),
    [
        ("2026-02", "2026-02", datetime(2026, 2, 1), datetime(2026, 3, 1)),
        ("2025/12", "2025-12", datetime(2025, 12, 1), datetime(2026, 1, 1)),
        ("last-30-days", "last-30-days", datetime(2026, 2, 13, 12), datetime(2026, 3, 15, 12)),
        ("Last 30 days", "last-30-days", datetime(2026, 2, 13, 12), datetime(2026, 3, 15, 12)),
        ("this-month", "this-month", datetime(2026, 3, 1), datetime(2026, 4, 1)),
        ("last month", "last-month", datetime(2026, 2, 1), datetime(2026, 3, 1)),
    ],
)
def test_periods(period, label, start, end):
    kind, span = validate_report_args(" Statement ", period, now=NOW)
    assert kind == "statement" and span.label == label
    assert (span.start, span.end) == (
        start.replace(tzinfo=timezone.utc),
        end.replace(tzinfo=timezone.utc),
    )


def test_last_month_in_january_is_december():
    _, span = validate_report_args(
        "activity", "last-month", now=datetime(2026, 1, 5, tzinfo=timezone.utc)
    )
    assert (span.start.year, span.start.month, span.spoken) == (2025, 12, "December 2025")


@pytest.mark.parametrize("kind", ["", "invoice", "statements", "x" * 10_000, "' OR 1=1 --"])
def test_unknown_kind(kind):
    with pytest.raises(ToolError, match="statement or an activity report"):
        validate_report_args(kind, "2026-01", now=NOW)


@pytest.mark.parametrize(
    "period",
    [
        "",
        "2026-13",
        "2026-00",
        "1999-01",
        "march",
        "2026-03-01",
        "../../etc",
        "9" * 5000,
        "last-30-days" + " " * 40,
    ],
)
def test_bad_period(period):
    with pytest.raises(ToolError, match="I need a period like 2026-03"):
        validate_report_args("activity", period, now=NOW)


def test_future_month_is_refused():
    with pytest.raises(ToolError, match="April 2026 hasn't started yet"):
        validate_report_args("activity", "2026-04", now=NOW)


async def test_bad_arguments_fail_before_any_work(store, ctx_for, tmp_path):
    ctx = await ctx_for()
    for kind, period in (("nope", "last-30-days"), ("activity", "someday")):
        with pytest.raises(ToolError):
            await generate_report(ctx, kind, period)
    row = await store.get(ctx.task_id)
    assert row.progress is None
    assert not (tmp_path / "r").exists()


# -- the reports ----------------------------------------------------------------------------


async def test_statement_report(store, ctx_for, tmp_path, billing_config):
    pay_ctx = await ctx_for(tool="pay_invoice", pattern="critical", key="pay1")
    paid = await billing.pay_invoice.fn(pay_ctx, "INV-1002", "120", confirmed=True)
    payment_id = paid.rsplit(" ", 1)[-1].rstrip(".")
    await ledger.ensure_account(Database(store), "bob", billing_config.seeds())  # stays out

    ctx = await ctx_for()
    result = await generate_report(ctx, "statement", "this-month")
    assert result["kind"] == "statement" and result["period"] == "this-month"
    assert result["summary"] == (
        "Your statement for this month lists 3 invoices totalling $525.15 and 1 payment "
        "totalling $120.00. Your balance today is $405.15."
    )
    assert sentences(result["summary"]) == 2
    csv_path, png_path = Path(result["files"]["csv"]), Path(result["files"]["png"])
    assert csv_path.parent == (tmp_path / "r").resolve() == png_path.parent
    assert f"task{ctx.task_id}" in csv_path.name and "alice" in csv_path.name
    rows = read_csv(str(csv_path))
    assert [(r["type"], r["reference"]) for r in rows] == [
        ("invoice", "INV-1001"), ("invoice", "INV-1002"), ("invoice", "INV-1003"),
        ("payment", payment_id),
    ]  # fmt: skip
    by_ref = {r["reference"]: r for r in rows}
    assert by_ref["INV-1002"]["status"] == "paid" and by_ref["INV-1001"]["amount"] == "358.40"
    assert by_ref[payment_id]["description"] == "paid to Harbor Light Hotel"
    assert result["chart"] == {
        "labels": ["invoiced", "paid", "refunded"],
        "values": [525.15, 120.0, 0.0],
    }

    width, height, raw = read_png(png_path.read_bytes())
    assert (width, height) == (640, 360) and len(raw) == height * (1 + width * 3)

    row = await store.get(ctx.task_id)
    assert row.progress == pytest.approx(0.95)
    notes = [e["note"] for e in await store.events(ctx.task_id)]
    progress = [n for n in notes if n and n.startswith("progress")]
    assert len(progress) >= 3 and progress[-1] == "progress 95%: finishing up"


async def test_statement_for_a_month_without_activity(store, ctx_for, billing_config):
    await ledger.ensure_account(Database(store), "alice", billing_config.seeds())
    result = await generate_report(await ctx_for(), "statement", "2025-01")
    assert result["summary"].startswith(
        "Your statement for January 2025 lists 0 invoices totalling $0.00"
    )
    assert read_csv(result["files"]["csv"]) == []


async def test_statement_without_an_account(ctx_for):
    result = await generate_report(await ctx_for(caller="newcomer"), "statement", "last-30-days")
    assert "no billing account yet" in result["summary"] and sentences(result["summary"]) == 2
    assert read_csv(result["files"]["csv"]) == []
    assert read_png(Path(result["files"]["png"]).read_bytes())[:2] == (640, 360)


@pytest.mark.parametrize("without", ["no hook relay", "no billing hookspec", "billing disabled"])
async def test_statement_without_billing_says_there_is_no_billing_data(ctx_for, tmp_path, without):
    # With billing disabled its hookspec is never added, so the relay has no billing_statement.
    if without == "billing disabled":
        registry = host.load(Settings(load_plugins="", disable_plugins="billing"))
        assert "billing" not in registry.departments and "reports" in registry.departments
        assert not hasattr(registry.pm.hook, "billing_statement")
        hook = registry.pm.hook
    else:
        hook = None if without == "no hook relay" else pluggy.PluginManager("frontdesk").hook
    result = await generate_report(await ctx_for(hook=hook), "statement", "this-month")
    assert result["summary"] == (
        "There is no billing data to report for this month. "
        "Billing is not available at this front desk."
    )
    assert read_csv(result["files"]["csv"]) == []
    assert result["chart"] == {"labels": ["invoiced", "paid", "refunded"], "values": [0.0] * 3}
    assert read_png(Path(result["files"]["png"]).read_bytes())[:2] == (640, 360)


async def test_statement_lines_may_come_from_any_plugin_implementing_the_hook(ctx_for):
    """Reports knows billing only by its hook's contract: another plugin's answer (here a plain
    dict, not a coroutine) makes the same statement."""
    from decimal import Decimal

    class OtherLedger:
        @hookimpl
        def billing_statement(self, caller, database, start, end):
            at = start + timedelta(days=1)
            return {"currency": "EUR", "balance": Decimal("10.00"), "lines": [
                {"date": at, "type": "invoice", "reference": "B-1", "invoice": "B-1",
                 "description": "=cleaning", "amount": Decimal("30.00"), "status": "open"},
                {"date": at, "type": "payment", "reference": "P-1", "invoice": "B-1",
                 "description": "paid to Bayside Dental", "amount": Decimal("20.00"),
                 "status": "succeeded"},
            ]}  # fmt: skip

    pm = pluggy.PluginManager("frontdesk")
    pm.add_hookspecs(billing.frontdesk_hookspecs)
    pm.register(OtherLedger())
    result = await generate_report(await ctx_for(hook=pm.hook), "statement", "this-month")
    assert result["summary"] == (
        "Your statement for this month lists 1 invoice totalling 30.00 EUR and 1 payment "
        "totalling 20.00 EUR. Your balance today is 10.00 EUR."
    )
    rows = read_csv(result["files"]["csv"])
    assert [(r["reference"], r["description"], r["amount"]) for r in rows] == [
        ("B-1", "'=cleaning", "30.00"), ("P-1", "paid to Bayside Dental", "20.00"),
    ]  # fmt: skip


def test_reports_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("FRONTDESK_REPORTS_PATH", str(tmp_path / "out"))
    registry = host.load(Settings(load_plugins=""))
    assert registry.plugins["reports"].errors == []
    config = registry.configs["reports"]
    assert isinstance(config, ReportsSettings) and config.path == tmp_path / "out"


async def test_reports_writes_where_its_setting_says(ctx_for, tmp_path):
    ctx = await ctx_for()
    ctx.config = ReportsSettings(path=tmp_path / "elsewhere")
    result = await generate_report(ctx, "activity", "this-month")
    assert Path(result["files"]["csv"]).parent == (tmp_path / "elsewhere").resolve()


def test_reports_imports_only_the_public_core_and_its_own_package():
    import ast

    for path in (ROOT / "plugins" / "reports").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith("frontdesk") or name == "frontdesk.core", (path, name)
                assert not name.startswith("sqlalchemy"), (path, name)  # no SQL of its own


async def test_activity_report(store, ctx_for):
    for dept, tool, status in [
        ("search", "search_knowledge", "succeeded"),
        ("search", "search_knowledge", "succeeded"),
        ("search", "search_web", "cancelled"),
        ("billing", "pay_invoice", "failed"),
        (None, "task_status", "succeeded"),
    ]:
        row = await store.create(
            caller="alice", tool=tool, pattern="interruptible", status="running", department=dept
        )
        await store.transition(row.id, status)
    await store.create(
        caller="bob", tool="search_web", pattern="interruptible", department="search"
    )

    ctx = await ctx_for()
    result = await generate_report(ctx, "activity", "last-30-days")
    assert result["summary"] == (
        "For the last 30 days you had 5 tasks across 3 departments: 3 succeeded, 1 failed, "
        "1 cancelled. The busiest was search with 3 tasks."
    )
    rows = read_csv(result["files"]["csv"])
    assert rows == [
        {"department": "billing", "tool": "pay_invoice", "status": "failed", "count": "1"},
        {"department": "other", "tool": "task_status", "status": "succeeded", "count": "1"},
        {"department": "search", "tool": "search_knowledge", "status": "succeeded", "count": "2"},
        {"department": "search", "tool": "search_web", "status": "cancelled", "count": "1"},
    ]
    assert result["chart"]["labels"][0] == "search" and result["chart"]["values"][0] == 3.0
    width, height, raw = read_png(Path(result["files"]["png"]).read_bytes())
    assert len(raw) == height * (1 + width * 3)
    # A month with nothing in it still gives files and a two-sentence summary.
    empty = await generate_report(await ctx_for(key="k2"), "activity", "2025-06")
    assert empty["summary"].startswith("I found no activity") and sentences(empty["summary"]) == 2


async def test_file_names_are_safe_for_any_caller(store, ctx_for, tmp_path):
    ctx = await ctx_for(caller="../../Evil Caller/..\\x")
    result = await generate_report(ctx, "activity", "this-month")
    for path in result["files"].values():
        assert Path(path).parent == (tmp_path / "r").resolve()
        assert Path(path).name.startswith("activity-evil-caller-x-this-month-task")
    assert reports.slug("...") == "caller"


def test_csv_cells_cannot_become_formulas():
    assert reports._cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and reports._cell("Spa") == "Spa"


def test_reports_department_registers_a_background_tool():
    found = []
    reports.register_departments(found.append)
    [dept] = found
    assert dept.name == "reports" and dept.problems() == []
    assert {"report", "statement", "export"} <= set(dept.keywords)
    [spec] = dept.tools
    assert spec.pattern == "background" and spec.problems() == []
    assert spec.validate({"kind": "statement", "period": "2026-01"}) == {
        "kind": "statement",
        "period": "2026-01",
    }


# -- the PNG writer -------------------------------------------------------------------------


def test_bar_chart_draws_bars_in_the_palette():
    width, height, raw = read_png(chart.bar_chart_png([1, 4, 0], width=120, height=80, margin=10))
    assert (width, height) == (120, 80)
    stride = 1 + width * 3
    row = raw[(height - 12) * stride : (height - 11) * stride]  # just above the x axis
    assert row[0] == 0  # filter type None
    pixels = {tuple(row[1 + x * 3 : 4 + x * 3]) for x in range(width)}
    assert (
        chart.PALETTE[0] in pixels and chart.PALETTE[1] in pixels and chart.PALETTE[2] not in pixels
    )
    top = raw[11 * stride : 12 * stride]  # near the top only the tallest bar reaches
    top_pixels = {tuple(top[1 + x * 3 : 4 + x * 3]) for x in range(width)}
    assert chart.PALETTE[1] in top_pixels and chart.PALETTE[0] not in top_pixels


def test_empty_chart_and_bad_images():
    assert read_png(chart.bar_chart_png([]))[:2] == (640, 360)
    with pytest.raises(ValueError):
        chart.encode_png(2, 2, [b"\x00" * 6])
    with pytest.raises(ValueError):
        chart.encode_png(2, 1, [b"\x00" * 5])
