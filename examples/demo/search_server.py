"""A loopback web-search service for ``frontdesk demo``: the documented search_web JSON contract,
answering slowly on purpose so the tour can show a search being interrupted."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESULTS = [
    {
        "title": "Harbor Festival",
        "url": "https://example.org/festival",
        "snippet": "Boats, music and food on the quay every weekend in June.",
    },
    {
        "title": "Old Town walking tour",
        "url": "https://example.org/walk",
        "snippet": "Daily at 10 am from the lighthouse.",
    },
]


class _Handler(BaseHTTPRequestHandler):
    delay = 2.0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        query = json.loads(self.rfile.read(length) or b"{}").get("query", "")
        time.sleep(self.delay)
        body = json.dumps({"results": [r for r in RESULTS if query] or RESULTS}).encode()
        with contextlib.suppress(OSError):  # the caller may have hung up on us: that is the point
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve(delay: float = 2.0) -> Iterator[str]:
    """Run the service on an ephemeral loopback port; yields its URL."""
    handler = type("Handler", (_Handler,), {"delay": delay})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/search"
    finally:
        server.shutdown()
        server.server_close()
