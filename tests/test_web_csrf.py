"""State-changing requests from another origin are refused in every mode, over real HTTP
(uvicorn on loopback), and a real chromium submitting a cross-origin form cancels nothing.

The rule (guard.py): a POST must carry an Origin, or failing that a Referer, naming the console
itself; a request with neither passes only with the bearer token, which no other site can make
a browser send. Same-origin requests are unchanged."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

import httpx
import pytest
from webclient import served
from webkit import chromium, need_browser, run_async, serve

from frontdesk.agents.programs.web.app import create_app
from frontdesk.agents.programs.web.auth import COOKIE
from frontdesk.core.schema import open_store

TOKEN = "csrf-test-token-0123456789"
EVIL = "http://127.0.0.2:9999"


async def _job(store, status: str = "queued") -> int:
    job = await store.create(caller="ann", tool="experiment", pattern="background", args={})
    if status == "failed":
        await store.transition(job.id, "running")
        await store.transition(job.id, "failed", error="x")
    return job.id


def _cases(base: str) -> list[tuple[str, dict[str, str], bool]]:
    """(what, headers, refused) for one request."""
    return [
        ("evil Origin", {"Origin": EVIL}, True),
        ("evil Origin, own Referer", {"Origin": EVIL, "Referer": base + "/tasks"}, True),
        ("evil Referer, no Origin", {"Referer": EVIL + "/attack.html"}, True),
        ("Origin null", {"Origin": "null"}, True),
        ("another port", {"Origin": base.rsplit(":", 1)[0] + ":1"}, True),
        ("https twin", {"Origin": base.replace("http://", "https://")}, True),
        ("neither header", {}, True),
        ("own Origin", {"Origin": base}, False),
        ("own Referer, no Origin", {"Referer": base + "/tasks?status=failed"}, False),
    ]


@pytest.mark.parametrize("mode", ["no token", "token, session cookie", "token, bearer"])
async def test_cross_origin_writes_are_403_in_every_mode(db_url, store, mode):
    token = None if mode == "no token" else TOKEN
    async with served(db_url, store=store, token=token) as (_, base):
        async with httpx.AsyncClient(base_url=base) as c:
            auth: dict[str, str] = {}
            if mode == "token, bearer":
                auth = {"Authorization": f"Bearer {TOKEN}"}
            elif token:
                login = await c.post("/login", data={"token": TOKEN}, headers={"Origin": base})
                assert login.status_code == 303
                c.cookies.set(COOKIE, login.cookies[COOKIE])
            for what, headers, refused in _cases(base):
                if mode == "token, bearer" and what == "neither header":
                    refused = False  # a script with the token: no browser can forge it
                queued, failed = await _job(store), await _job(store, "failed")
                for path in (f"/api/tasks/{queued}/cancel", f"/api/tasks/{failed}/retry"):
                    r = await c.post(path, headers={**auth, **headers})
                    if refused:
                        assert r.status_code == 403, (mode, what, path, r.status_code)
                        assert r.json()["message"].startswith("forbidden")
                    else:
                        assert r.status_code == 200, (mode, what, path, r.text)
                expected = ("queued", "failed") if refused else ("cancelled", "queued")
                got = ((await store.get(queued)).status, (await store.get(failed)).status)
                assert got == expected, (mode, what)
                # Login and logout are writes too (login CSRF, forced logout).
                for path in ("/login", "/logout"):
                    r = await c.post(path, data={"token": "x"}, headers={**auth, **headers})
                    assert (r.status_code == 403) is refused, (mode, what, path, r.status_code)
                if not refused and token and mode != "token, bearer":
                    # That logout ended the session: log in again for the next case.
                    login = await c.post("/login", data={"token": TOKEN}, headers={"Origin": base})
                    c.cookies.set(COOKIE, login.cookies[COOKIE])


@contextlib.contextmanager
def attacker_site(target: str) -> Iterator[str]:
    """A page on another origin (127.0.0.2) whose form posts itself to ``target``."""
    page = (
        f'<html><body><form id="f" method="post" action="{target}">'
        '<input name="x" value="1"></form>'
        "<script>document.getElementById('f').submit()</script></body></html>"
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    # Threaded: chromium keeps a speculative connection open, which would hold a
    # single-threaded server (and its shutdown) until it timed out.
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}/attack.html"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
def test_a_cross_origin_form_in_chromium_cancels_nothing(tmp_path, token):
    need_browser()
    url = f"sqlite+aiosqlite:///{tmp_path}/csrf.db"

    async def seed() -> int:
        store = await open_store(url)
        try:
            return await _job(store)
        finally:
            await store.close()

    async def status(job: int) -> str:
        store = await open_store(url)
        try:
            return (await store.get(job)).status
        finally:
            await store.close()

    job = run_async(seed)
    with serve(create_app(url, token=token)) as base, chromium() as browser:
        page = browser.new_page()
        if token:  # the operator is logged in: the browser holds a session cookie
            page.goto(f"{base}/login")
            page.fill("input[name=token]", token)
            page.click("form.login button")
            page.wait_for_url(f"{base}/tasks")
        with attacker_site(f"{base}/api/tasks/{job}/cancel") as attack:
            with page.expect_response(f"{base}/api/tasks/{job}/cancel") as answer:
                page.goto(attack)
            refused = answer.value
            assert refused.status == 403, refused.status
            assert refused.request.header_value("origin").startswith("http://127.0.0.2:")
        # The console's own button, same origin, still works from the same browser.
        page.on("dialog", lambda d: d.accept())
        page.goto(f"{base}/tasks")
        assert run_async(lambda: status(job)) == "queued"
        page.click(f"#task-{job} button[data-action=cancel]")
        page.wait_for_selector(f"#task-{job}[data-status=cancelled]")
        page.close()
    assert run_async(lambda: status(job)) == "cancelled"
