"""The search plugin: its settings (kb_path, web_url; no built-in knowledge base), FTS5 ranking
over the demo hotel's KB (examples/demo/kb), refresh on change, hostile queries, and web search
against a real loopback HTTP server (including cancellation closing the socket).

How fast hostile queries are answered is measured in bench/ (``search`` section), not here."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import frontdesk.plugins.search as search
from frontdesk.core import ToolContext, ToolError, host
from frontdesk.core.profile import load_profile
from frontdesk.core.schema import open_store
from frontdesk.core.settings import Settings
from frontdesk.db.store import TaskStore
from frontdesk.plugins.search import SearchSettings, knowledge, search_knowledge, search_web

ROOT = Path(__file__).resolve().parent.parent
DEMO_KB = ROOT / "examples" / "demo" / "kb"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    # Nothing from the developer's shell may steer these tests: no proxy for loopback, no KB.
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name in ("FRONTDESK_SEARCH_KB_PATH", "FRONTDESK_SEARCH_WEB_URL", "FRONTDESK_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def store(tmp_path):
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path}/t.db")
    yield store
    await store.close()


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


def config(**values) -> SearchSettings:
    """The search plugin's settings; the demo hotel's KB unless told otherwise."""
    return SearchSettings(_env_file=None, **{"kb_path": DEMO_KB, **values})


async def make_ctx(
    store: TaskStore, tool: str = "search_knowledge", cfg: SearchSettings | None = None
):
    row = await store.create(caller="alice", tool=tool, pattern="interruptible", status="running")
    return ToolContext(
        caller="alice",
        session_id="s1",
        task_id=row.id,
        department="search",
        idempotency_key="k",
        store=store,
        config=cfg if cfg is not None else config(),
    )


def write_kb(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


# -- ranking --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("late checkout", "Late checkout"),
        ("what time is checkout?", "Checkout time"),
        ("check out time", "Checkout time"),  # speech-to-text splits the word
        ("breakfast hours", "Breakfast hours"),
        ("what time is breakfast", "Breakfast hours"),  # "time" also looks for "hours"
        ("how much is breakfast", "Breakfast price"),
        ("vegan options at breakfast", "Dietary needs"),
        ("is there a pool", "Rooftop pool"),
        ("when does the pool open", "Rooftop pool"),  # not the gym's "open 24 hours"
        ("can I check in early", "Early check-in"),
        ("where can I leave my bags", "Luggage storage"),
        ("can I bring my dog", "Pet policy"),
        ("pet fee", "Pet fee"),
        ("wifi not working", "Wi-Fi not working"),  # "wifi" finds "Wi-Fi"
        ("electric car charger", "Electric vehicle charging"),
        ("cancellation policy", "Cancellation policy"),
        ("airport shuttle", "Airport shuttle"),
        ("Is there a pharmacy nearby", "Pharmacy and medical help"),
    ],
)
async def test_most_relevant_section_ranks_first(query, best):
    hits = await knowledge.search_kb(DEMO_KB.resolve(), query)
    assert hits, query
    assert hits[0].heading == best
    assert [h.score for h in hits] == sorted(h.score for h in hits)  # bm25: lower is better
    assert hits[0].score < hits[-1].score or len(hits) == 1


async def test_bm25_prefers_headings_and_denser_sections(tmp_path):
    root = write_kb(
        tmp_path / "kb",
        {
            "a.md": "# Garden\n\n## Roses\n\nThe lighthouse can be seen from here, among other things"
            " such as the harbor, the boats, the market and the old town walls.\n",
            "b.md": "# Tours\n\n## Lighthouse\n\nClimb the tower daily from ten.\n",
            "c.md": "# Museum\n\n## Exhibits\n\nLighthouse lamps, lighthouse lenses and a lighthouse"
            " keeper's log.\n",
        },
    )
    hits = await knowledge.search_kb(root, "lighthouse")
    assert [h.heading for h in hits] == ["Lighthouse", "Exhibits", "Roses"]
    assert hits[0].score < hits[1].score < hits[2].score
    assert hits[0].path == "b.md" and hits[0].document == "Tours"


async def test_tool_reads_back_top_hits_and_records_progress(store):
    ctx = await make_ctx(store)
    answer = await search_knowledge.fn(ctx, query="late checkout")
    lines = answer.splitlines()
    assert 1 <= len(lines) <= knowledge.RESULT_LIMIT
    assert lines[0].startswith("1. Late checkout: Late checkout until 2 pm")
    assert len(answer) <= 400  # short enough to say; runners-up get brief snippets
    assert "#" not in answer and "**" not in answer  # markdown stripped: it is spoken
    row = await store.get(ctx.task_id)
    assert row.progress == pytest.approx(0.3)


async def test_no_hits_is_a_polite_answer_not_an_error(store):
    ctx = await make_ctx(store)
    answer = await search_knowledge.fn(ctx, query="helicopter landing pad")
    assert answer == "I couldn't find anything about helicopter landing pad in our information."


def test_sections_split_at_headings_not_inside_code():
    doc, sections = knowledge.split_sections(
        "Intro before any heading.\n# Guide\n\n## Parking\nPark **here**, see [map](http://x).\n"
        "```\n# not a heading\n```\n### Valet\n- Keys at the desk\n## Empty\n",
        "fallback",
    )
    assert doc == "Guide"
    assert sections == [
        (["Guide"], "Intro before any heading."),
        (["Guide", "Parking"], "Park here, see map. # not a heading"),
        (["Guide", "Parking", "Valet"], "Keys at the desk"),
    ]


# -- KB path and refresh --------------------------------------------------------------------


async def test_custom_kb_folder_from_settings(store, tmp_path):
    root = write_kb(
        tmp_path / "mykb", {"spa.md": "# Spa\n\n## Hammam\n\nThe hammam opens at noon.\n"}
    )
    ctx = await make_ctx(store, cfg=config(kb_path=root))
    assert (await search_knowledge.fn(ctx, query="hammam")).startswith("1. Hammam: The hammam")
    # Only the configured folder is consulted: the demo's KB is not a fallback.
    assert "couldn't find" in await search_knowledge.fn(ctx, query="late checkout")


async def test_without_a_knowledge_base_the_desk_says_so(store):
    # No hotel (or any other) knowledge base is built in.
    ctx = await make_ctx(store, cfg=SearchSettings(_env_file=None))
    assert ctx.config.kb_path is None
    with pytest.raises(ToolError) as err:
        await search_knowledge.fn(ctx, query="late checkout")
    assert str(err.value) == "There's no knowledge base set up here, so I can't look that up."
    with pytest.raises(
        ToolError, match="what you'd like me to look up"
    ):  # input still checked first
        await search_knowledge.fn(ctx, query="  ")


async def test_kb_path_from_environment_when_ctx_has_no_config(store, tmp_path, monkeypatch):
    root = write_kb(tmp_path / "envkb", {"golf.md": "# Golf\n\nTee times start at 7 am.\n"})
    monkeypatch.setenv("FRONTDESK_SEARCH_KB_PATH", str(root))
    ctx = await make_ctx(store)
    ctx.config = None
    assert "Tee times" in await search_knowledge.fn(ctx, query="golf tee times")


def test_settings_come_from_the_environment_and_the_profile(tmp_path, monkeypatch):
    kb = write_kb(tmp_path / "biz" / "kb", {"a.md": "# A\n\nText.\n"})
    profile = tmp_path / "biz" / "frontdesk.toml"
    profile.write_text(
        '[business]\nname = "Bayside Dental"\n\n'
        '[plugins.search]\nkb_path = "kb"\nweb_url = "http://127.0.0.1:9/search"\n'
    )
    monkeypatch.chdir(tmp_path)  # not the profile's folder
    monkeypatch.setenv("FRONTDESK_PROFILE", str(profile.relative_to(tmp_path)))
    registry = host.load(settings(load_plugins=""), profile=load_profile())
    cfg = registry.configs["search"]
    assert isinstance(cfg, SearchSettings) and registry.config_errors == []
    # A relative path in the profile is taken from the profile's folder, not the cwd.
    assert cfg.kb_path == kb.resolve()
    assert cfg.web_url == "http://127.0.0.1:9/search"

    # The environment beats the profile; an absolute path is left as it is.
    other = write_kb(tmp_path / "other", {"b.md": "# B\n\nText.\n"})
    monkeypatch.setenv("FRONTDESK_SEARCH_KB_PATH", str(other))
    monkeypatch.setenv("FRONTDESK_SEARCH_WEB_URL", "  ")
    cfg = host.load(settings(load_plugins=""), profile=load_profile()).configs["search"]
    assert cfg.kb_path == other and cfg.web_url is None  # blank means off


def test_an_unknown_profile_key_is_one_line_naming_it(tmp_path, monkeypatch):
    profile = tmp_path / "frontdesk.toml"
    profile.write_text('[plugins.search]\nkb_pth = "kb"\n')
    monkeypatch.setenv("FRONTDESK_PROFILE", str(profile))
    registry = host.load(settings(load_plugins=""), profile=load_profile())
    assert registry.config_errors == [f"{profile}: plugins.search.kb_pth: unknown key"]


async def test_missing_kb_folder_is_a_clean_error(store, tmp_path):
    ctx = await make_ctx(store, cfg=config(kb_path=tmp_path / "nowhere"))
    with pytest.raises(ToolError, match="isn't available"):
        await search_knowledge.fn(ctx, query="pool")


async def test_index_refreshes_when_files_change_and_only_then(tmp_path):
    root = write_kb(
        tmp_path / "kb", {"bar.md": "# Bar\n\nThe bar serves mojitos until midnight.\n"}
    )
    index = knowledge.index_for(root.resolve())
    assert [h.heading for h in await knowledge.search_kb(root.resolve(), "mojitos")] == ["Bar"]
    builds = index.builds
    await knowledge.search_kb(root.resolve(), "mojitos")
    assert index.builds == builds  # unchanged files: no rebuild

    (root / "bar.md").write_text("# Bar\n\nThe bar serves negronis and spritz until 2 am.\n")
    st = (root / "bar.md").stat()
    os.utime(root / "bar.md", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert await knowledge.search_kb(root.resolve(), "mojitos") == []
    assert [h.heading for h in await knowledge.search_kb(root.resolve(), "negronis")] == ["Bar"]

    write_kb(root, {"sub.md": "# Kids club\n\nThe kids club runs crafts every morning.\n"})
    (root / "more").mkdir()
    (root / "more" / "deep.md").write_text("# Laundry\n\nSame-day laundry if dropped by 9 am.\n")
    assert [h.heading for h in await knowledge.search_kb(root.resolve(), "crafts")] == ["Kids club"]
    hit = (await knowledge.search_kb(root.resolve(), "laundry"))[0]
    assert (hit.heading, hit.path) == ("Laundry", "more/deep.md")

    (root / "sub.md").unlink()
    assert await knowledge.search_kb(root.resolve(), "crafts") == []
    assert index.builds == builds + 3  # edit, two files added at once, delete


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\n\t  \r\n"])
async def test_empty_query_is_a_tool_error(store, query):
    ctx = await make_ctx(store)
    with pytest.raises(ToolError, match="what you'd like me to look up"):
        await search_knowledge.fn(ctx, query=query)


async def test_query_without_words_is_a_tool_error(store):
    ctx = await make_ctx(store)
    with pytest.raises(ToolError, match="a few words"):
        await search_knowledge.fn(ctx, query='?!... "" -- ** ()')


HOSTILE = [
    'late "checkout',
    '"late" checkout"',
    "late* NOT checkout",
    "title:pool OR body:gym",
    "NEAR(pool gym, 2)",
    "pool AND",
    "^pool + - ( ) { } [ ] : ; , . ' ` \\ / | ? !",
    "'; DROP TABLE sections; --",
    "Robert'); DELETE FROM sections WHERE 1=1; --",
    "pool\x00gym\x07",
    "\ud800 pool \udfff",
    "Frühstück ☕ 朝食 🏊 ｐｏｏｌ",
    "e\u0301cole cafe\u0301",
    "a" * 1_000_000,
    "pool " * 200_000,
    '"' * 1_000_000,
    "é" * 1_000_000,
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_queries_are_searched_safely(store, query):
    # Correctness only: how long these take is bench/search_queries.py's business.
    ctx = await make_ctx(store)
    try:
        answer = await search_knowledge.fn(ctx, query=query)
    except ToolError as exc:  # only the clean "give me some words" error is acceptable
        assert "a few words" in str(exc)
    else:
        assert isinstance(answer, str) and 0 < len(answer) < 2000
        answer.encode("utf-8")  # speakable: no lone surrogates
        assert "\x00" not in answer
    # Injection-shaped text changed nothing: the index still answers.
    assert "Late checkout" in await search_knowledge.fn(ctx, query="late checkout")


async def test_fullwidth_and_accented_words_still_match(tmp_path):
    hits = await knowledge.search_kb(DEMO_KB.resolve(), "ｐｏｏｌ towels")
    assert hits[0].heading == "Rooftop pool"
    root = write_kb(tmp_path / "kb", {"cafe.md": "# Café\n\nThe café serves crème brûlée.\n"})
    assert (await knowledge.search_kb(root, "creme brulee"))[0].document == "Café"


def test_match_expression_quotes_every_term():
    match = knowledge.build_match('late" OR title:x NEAR(y)')
    assert match is not None
    assert re.fullmatch(r'"[^"]+"( OR "[^"]+")*', match)
    assert '"or"' not in match.split(" OR ")[:1]  # stopwords dropped, operators quoted
    assert knowledge.build_match("a" * 1_000_000) == '"' + "a" * knowledge.MAX_QUERY_CHARS + '"'
    assert len(knowledge.build_match("word " * 100_000).split(" OR ")) <= 2 * knowledge.MAX_TERMS


# -- cancellation of a running query --------------------------------------------------------


async def test_cancelling_interrupts_the_running_sqlite_query():
    finished = threading.Event()
    outcome: list[str] = []

    def slow(guard: knowledge._Interrupter) -> None:
        conn = sqlite3.connect(":memory:")
        try:
            with guard.attached(conn):
                conn.execute(
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000000)"
                    " SELECT count(*) FROM c"
                ).fetchall()
            outcome.append("completed")
        except sqlite3.OperationalError as exc:
            outcome.append(str(exc))
        finally:
            conn.close()
            finished.set()

    task = asyncio.create_task(knowledge._run_interruptible(slow))
    await asyncio.sleep(0.2)
    cancelled_at = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(finished.wait, 5)
    assert time.perf_counter() - cancelled_at < 1
    assert outcome == ["interrupted"]


async def test_cancelled_search_leaves_the_index_usable(store):
    ctx = await make_ctx(store)
    task = asyncio.create_task(search_knowledge.fn(ctx, query="parking"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "parking" in (await search_knowledge.fn(ctx, query="valet parking")).lower()


# -- web search against a real loopback server ----------------------------------------------


class Loopback:
    """A tiny HTTP/1.1 server on 127.0.0.1 that records what it saw, including disconnects."""

    def __init__(self, mode: str, delay: float = 0.0, body: bytes | None = None) -> None:
        self.mode, self.delay, self.body = mode, delay, body
        self.requests: list[dict] = []
        self.request_seen = asyncio.Event()
        self.disconnected = asyncio.Event()
        self.disconnected_at: float | None = None
        self.slept_out = False

    async def __aenter__(self) -> Loopback:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/search"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
            self.requests.append(json.loads(await reader.readexactly(length)))
            self.request_seen.set()
            if self.mode == "slow":
                try:
                    # Nothing more is sent by the client, so a read returns only on EOF.
                    eof = await asyncio.wait_for(reader.read(1), self.delay)
                except asyncio.TimeoutError:
                    self.slept_out = True
                else:
                    assert eof == b""
                    self.disconnected_at = time.perf_counter()
                    self.disconnected.set()
                    return
            status, body = self._answer()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            self.disconnected.set()
        finally:
            writer.close()

    def _answer(self) -> tuple[str, bytes]:
        if self.mode == "500":
            return "500 Internal Server Error", b'{"error": "boom"}'
        if self.body is not None:
            return "200 OK", self.body
        results = [
            {
                "title": "Harbor fireworks tonight",
                "url": "https://www.example.org/fw",
                "snippet": "Fireworks at 9 pm over the harbor.",
            },
            {
                "title": "Night market",
                "url": "https://example.com/m",
                "snippet": "Stalls open from 6 pm.",
            },
            {"title": "Boat tours", "url": "", "snippet": "Evening cruises leave the pier at 7."},
            {"title": "Fourth", "url": "https://example.net", "snippet": "Past the limit."},
        ]
        return "200 OK", json.dumps({"results": results}).encode()


async def web_ctx(store: TaskStore, url: str | None):
    return await make_ctx(store, tool="search_web", cfg=config(web_url=url))


async def test_web_search_answers_from_the_service(store):
    async with Loopback("ok") as srv:
        answer = await search_web.fn(await web_ctx(store, srv.url), query="  fireworks   tonight ")
    assert srv.requests == [{"query": "fireworks tonight", "limit": search.WEB_LIMIT}]
    assert answer.splitlines() == [
        "1. Harbor fireworks tonight (example.org): Fireworks at 9 pm over the harbor.",
        "2. Night market (example.com): Stalls open from 6 pm.",
        "3. Boat tours: Evening cruises leave the pier at 7.",
    ]


async def test_cancelling_web_search_closes_the_connection(store):
    async with Loopback("slow", delay=5.0) as srv:
        task = asyncio.create_task(search_web.fn(await web_ctx(store, srv.url), query="fireworks"))
        await asyncio.wait_for(srv.request_seen.wait(), 3)
        await asyncio.sleep(0.2)
        cancelled_at = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(srv.disconnected.wait(), 2)
    assert srv.disconnected_at is not None and srv.disconnected_at - cancelled_at < 1.0
    assert not srv.slept_out  # the server saw EOF long before its 5 s sleep ended


async def test_slow_web_search_times_out_cleanly(store, monkeypatch):
    monkeypatch.setattr(search, "WEB_TIMEOUT_SECONDS", 0.3)
    async with Loopback("slow", delay=5.0) as srv:
        started = time.perf_counter()
        with pytest.raises(ToolError, match="took too long"):
            await search_web.fn(await web_ctx(store, srv.url), query="fireworks")
        assert time.perf_counter() - started < 2
        await asyncio.wait_for(srv.disconnected.wait(), 2)


@pytest.mark.parametrize(
    ("mode", "body", "message"),
    [
        ("500", None, "isn't working right now"),
        ("ok", b"<html>not json", "couldn't read"),
        ("ok", b'{"results": "nope"}', "couldn't read"),
        ("ok", b'["results"]', "couldn't read"),
        ("ok", b'{"results": [42, {"title": 7}]}', "couldn't read"),
        ("ok", b'{"results": ["' + b"x" * 1_100_000 + b'"]}', "couldn't read"),
    ],
    ids=["http-500", "not-json", "results-not-list", "not-object", "bad-items", "oversized"],
)
async def test_web_search_failures_are_tool_errors(store, mode, body, message):
    async with Loopback(mode, body=body) as srv:
        with pytest.raises(ToolError, match=message):
            await search_web.fn(await web_ctx(store, srv.url), query="fireworks")


async def test_web_search_with_no_results(store):
    async with Loopback("ok", body=b'{"results": []}') as srv:
        answer = await search_web.fn(await web_ctx(store, srv.url), query="unicorn rodeo")
    assert answer == "I couldn't find anything on the web about unicorn rodeo."


async def test_web_search_unreachable_and_unconfigured(store):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ToolError, match="couldn't reach"):
        await search_web.fn(await web_ctx(store, f"http://127.0.0.1:{port}/"), query="fireworks")
    with pytest.raises(ToolError, match="couldn't reach"):
        await search_web.fn(await web_ctx(store, "not a url at all"), query="fireworks")
    with pytest.raises(ToolError, match="Web search isn't set up here."):
        await search_web.fn(await web_ctx(store, None), query="fireworks")
    with pytest.raises(ToolError, match="look up"):
        await search_web.fn(await web_ctx(store, "http://127.0.0.1:9/"), query="   ")


async def test_web_search_sends_hostile_text_safely(store):
    async with Loopback("ok") as srv:
        for query in ["\ud800 fireworks", "x" * 1_000_000, '"; DROP TABLE --']:
            await search_web.fn(await web_ctx(store, srv.url), query=query)
    assert [len(r["query"]) <= knowledge.MAX_QUERY_CHARS for r in srv.requests] == [True] * 3
    assert srv.requests[0]["query"] == "? fireworks"


# -- registration ---------------------------------------------------------------------------


def test_plugin_registers_the_search_department():
    registry = host.load(settings(load_plugins=""))
    assert registry.plugins["search"].errors == []
    assert type(registry.configs["search"]).__name__ == "SearchSettings"
    dept = registry.departments["search"]
    assert [t.name for t in dept.tools] == ["search_knowledge", "search_web"]
    assert {"checkout", "wifi", "pets"} <= set(dept.keywords)
    for spec in dept.tools:
        assert spec.pattern == "interruptible" and spec.plugin == "search"
        assert spec.json_schema()["required"] == ["query"]


def test_demo_kb_ships_enough_to_demo():
    files = sorted(p.name for p in DEMO_KB.glob("*.md"))
    assert 6 <= len(files) <= 10
    text = (DEMO_KB / "checkout.md").read_text()
    assert "Late checkout until 2 pm" in text


def test_the_plugin_names_no_business():
    # The business is the profile's (examples/demo/ is the hotel); the plugin is anyone's.
    for path in Path(search.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8").lower()
        assert "harbor light" not in text and "hotel" not in text, path


async def test_web_search_never_logs_the_configured_url(store, caplog):
    # Operators put API keys in the URL; failures are logged without it.
    caplog.set_level("DEBUG")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with Loopback("500") as srv:
        for url in (
            f"{srv.url}?key=SECRET-KEY-123",
            f"http://127.0.0.1:{port}/?key=SECRET-KEY-123",
        ):
            with pytest.raises(ToolError) as err:
                await search_web.fn(await web_ctx(store, url), query="fireworks")
            assert "SECRET" not in str(err.value)
    # httpx itself logs request URLs at INFO; the app's logging setup keeps that logger quiet.
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("frontdesk")]
    assert len(ours) == 2 and not any("SECRET" in m for m in ours)
