"""The console's views in a real headless chromium (Debian's, through Playwright) at 1366 px,
against a real uvicorn on loopback:

- long values (a 157-character caller id, a 500-character progress note, a 480-character
  error, a long call id) never widen a page past the window, and the Cancel button stays on
  screen;
- no page trips its own Content-Security-Policy (no inline script or style, no eval);
- the calls page follows a call that starts and ends in another process, without a reload;
- with a token, the Log out button ends the session.
"""

from __future__ import annotations

from typing import Any

import webkit
from webkit import serve, write_from_another_process

from frontdesk.agents.programs.web.app import create_app

browser, sqlite_url = webkit.browser, webkit.sqlite_url  # the fixtures
TOKEN = "browser-token-0123456789"
LONG_CALLER = "caller-" + "x" * 150  # 157 characters, as in the audit
NOTE = ("drawing charts for every floor " * 20)[:500]
ERROR = "the reporting service answered: " + "E" * 448  # 480 characters, one unbroken run


def _seed(url: str) -> dict[str, int]:
    out = write_from_another_process(
        url,
        f"""
        await store.call_started("RM_" + "9" * 90, {LONG_CALLER!r})
        await store.call_handoff("RM_" + "9" * 90, None, "triage")
        failed = await store.create(caller={LONG_CALLER!r}, department="reports",
                                    tool="generate_report", pattern="background", args={{}})
        await store.transition(failed.id, "running", expect=("queued",))
        await store.transition(failed.id, "failed", error={ERROR!r})
        job = await store.create(caller={LONG_CALLER!r}, session_id="RM_" + "9" * 90,
                                 department="reports", tool="generate_report",
                                 pattern="background", args={{"note": {NOTE!r}}})
        await store.transition(job.id, "running", expect=("queued",))
        await store.set_progress(job.id, 0.95, {NOTE!r})
        print(job.id, failed.id)
        """,
    )
    job, failed = map(int, out.split())
    return {"job": job, "failed": failed}


def _watch_csp(page: Any) -> list[str]:
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(msg.text)
            if "Content Security Policy" in msg.text or "Refused to" in msg.text
            else None
        ),
    )
    return problems


def test_long_values_never_widen_a_page_and_nothing_trips_the_csp(browser, sqlite_url):
    ids = _seed(sqlite_url)
    with serve(create_app(sqlite_url)) as base:
        page = browser.new_page()
        problems = _watch_csp(page)
        for path in (
            "/tasks",
            f"/tasks/{ids['job']}",
            f"/tasks/{ids['failed']}",
            "/calls",
            "/calls/RM_" + "9" * 90,
            "/stats",
            "/api/docs",
            "/tasks?since=garbage",
        ):
            page.goto(base + path)
            page.wait_for_load_state("networkidle") if path == "/stats" else None
            width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1] == 1366, (path, width)
        page.goto(base + "/tasks")
        page.wait_for_selector("#live[data-live=on]")
        button = page.locator(f"#task-{ids['job']} button[data-action=cancel]")
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1366
        row = page.locator(f"#task-{ids['job']}").inner_text()
        assert "95%" in row  # the note is there, clipped, with the whole of it in the tooltip
        page.close()
    assert problems == [], problems


def test_the_calls_page_follows_a_call_from_another_process(browser, sqlite_url):
    write_from_another_process(sqlite_url, "pass")  # the schema, before the console watches it
    with serve(create_app(sqlite_url)) as base:
        page = browser.new_page()
        page.goto(base + "/calls")
        page.wait_for_selector("#live[data-live=on]")
        assert "No calls yet." in page.inner_text("#calls-live")
        write_from_another_process(
            sqlite_url, 'await store.call_started("RM_LIVE", "zoe")\n'
            'await store.call_handoff("RM_LIVE", None, "triage")',
        )  # fmt: skip
        page.wait_for_selector('tr[data-session="RM_LIVE"][data-ended=no]')
        write_from_another_process(sqlite_url, 'await store.call_ended("RM_LIVE")')
        page.wait_for_selector('tr[data-session="RM_LIVE"][data-ended=yes]')
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        page.close()


def test_log_out_ends_the_session(browser, sqlite_url):
    write_from_another_process(sqlite_url, "pass")
    with serve(create_app(sqlite_url, token=TOKEN)) as base:
        page = browser.new_page()
        page.goto(base + "/stats")
        page.wait_for_url(f"{base}/login?next=%2Fstats")
        page.fill("input[name=token]", TOKEN)
        page.click("form.login button")
        page.wait_for_url(f"{base}/stats")
        cookie = next(c for c in page.context.cookies() if c["name"] == "frontdesk_session")
        page.click("form.logout button")
        page.wait_for_url(f"{base}/login")
        page.goto(base + "/tasks")
        page.wait_for_url(f"{base}/login?next=%2Ftasks")
        # The cookie itself is dead on the server, not just forgotten by this browser.
        page.context.add_cookies([{**cookie}])
        page.goto(base + "/tasks")
        page.wait_for_url(f"{base}/login?next=%2Ftasks")
        page.close()
