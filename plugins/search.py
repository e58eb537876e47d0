"""Built-in search plugin: the hotel's knowledge base, and web search through the operator's service.

``search_knowledge`` runs ranked full-text search (SQLite FTS5, bm25) over a folder of Markdown
files: the sample hotel in ``frontdesk/plugins/kb/`` or the folder ``FRONTDESK_KB_PATH`` names.
Each file is split into sections at its headings, so an answer points at "Late checkout" rather
than at a whole page. The index lives in memory, is built on first use in a worker thread and is
rebuilt whenever the files' paths, modification times or sizes change.

Web search contract
-------------------
``search_web`` is off until ``FRONTDESK_SEARCH_WEB_URL`` names an HTTP(S) endpoint. frontdesk
sends::

    POST <FRONTDESK_SEARCH_WEB_URL>
    Content-Type: application/json

    {"query": "fireworks tonight", "limit": 3}

and expects status 200 with a JSON body, best result first::

    {"results": [{"title": "Harbor fireworks", "url": "https://...", "snippet": "..."}]}

``title`` or ``snippet`` must be a non-empty string; ``url`` may be empty; other fields are
ignored and at most ``limit`` results are read. Any other status, a body of another shape, a
body over 1 MB or no complete answer within 10 seconds is told to the caller as a short apology.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import sqlite3
import stat
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from frontdesk.core import Department, ToolContext, ToolError, hookimpl, tool
from frontdesk.core.settings import Settings

log = logging.getLogger("frontdesk.plugins.search")

DEFAULT_KB = Path(__file__).parent / "kb"
RESULT_LIMIT = 3
# The best hit is read out in full-ish; the runners-up only briefly, to keep the answer short.
SNIPPET_TOKENS = 32
BRIEF_TOKENS = 14
# A spoken question is a sentence; anything longer is pasted or hostile, and only its start
# is worth searching for.
MAX_QUERY_CHARS = 500
MAX_TERMS = 24
MAX_FILE_BYTES = 1_000_000
WEB_LIMIT = 3
WEB_TIMEOUT_SECONDS = 10.0
MAX_WEB_BYTES = 1_000_000

_WORD = re.compile(r"[^\W_]+")
_HYPHENATED = re.compile(r"[^\W_]+(?:-[^\W_]+)+")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_STOPWORDS = frozenset(
    "a an and any are as at be can could do does for from have how i if in is it me my of on"
    " or our please should tell that the there this to we what when where which who will with"
    " would you your".split()
)
# Callers ask "what time" or "how much"; pages say "hours" and "costs". Extra terms, not
# replacements, so a page that does say "time" still matches.
_EXPANSIONS = {"time": "hours", "when": "hours", "open": "hours", "much": "cost", "price": "cost"}

T = TypeVar("T")


@dataclass(frozen=True)
class Hit:
    heading: str  # the section's own heading
    document: str  # the file's title (its first level-1 heading, else its name)
    path: str  # relative to the KB folder
    snippet: str
    brief: str  # a shorter snippet, for runners-up
    score: float  # bm25: lower is more relevant


# -- Markdown to sections -------------------------------------------------------------------


def _plain(markdown: str) -> str:
    """Markdown as speakable text: link text kept, markup and line breaks dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<[^>\n]+>", " ", text)
    text = re.sub(r"(?m)^\s*(?:[-*+]|\d+[.)]|>)\s+", "", text)
    text = re.sub(r"[*`~]|(?<!\w)_+|_+(?!\w)", "", text)
    return " ".join(text.split())


def split_sections(text: str, fallback_title: str) -> tuple[str, list[tuple[list[str], str]]]:
    """Split Markdown at ATX headings: (document title, [(heading path, plain body)])."""
    doc_title: str | None = None
    path: list[str] = []
    lines: list[str] = []
    sections: list[tuple[list[str], str]] = []
    in_fence = False

    def flush() -> None:
        if body := _plain("\n".join(lines)):
            sections.append((list(path), body))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            lines.append(line)
            continue
        flush()
        level, title = len(match.group(1)), _plain(match.group(2))
        if level == 1 and doc_title is None and title:
            doc_title = title
        path = [*path[: level - 1], title]
    flush()
    doc = doc_title or fallback_title
    return doc, [([h for h in p if h] or [doc], body) for p, body in sections]


def _title_from_name(relpath: str) -> str:
    return re.sub(r"[-_]+", " ", Path(relpath).stem).strip().capitalize() or "Notes"


# -- the index ------------------------------------------------------------------------------


class _Interrupter:
    """Lets the event loop stop a query running in a worker thread (sqlite3 interrupt())."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._cancelled = False

    @contextmanager
    def attached(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._cancelled:  # cancelled before the query even started
                raise sqlite3.OperationalError("interrupted")
            self._conn = conn
        try:
            yield conn
        finally:
            # Detach before the caller closes it: interrupt() on a closed connection raises.
            with self._lock:
                self._conn = None

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._conn is not None:
                self._conn.interrupt()


async def _run_interruptible(work: Callable[[_Interrupter], T]) -> T:
    """Run ``work`` in a worker thread; if this coroutine is cancelled, interrupt its query."""
    guard = _Interrupter()
    try:
        return await asyncio.to_thread(work, guard)
    except asyncio.CancelledError:
        guard.cancel()
        raise


Signature = tuple[tuple[str, int, int], ...]

# Column weights for bm25: a word in a heading counts four times one in the body.
_SEARCH_SQL = f"""
    SELECT heading, document, path,
           snippet(sections, 1, '', '', '…', {SNIPPET_TOKENS}),
           snippet(sections, 1, '', '', '…', {BRIEF_TOKENS}),
           bm25(sections, 4.0, 1.0, 2.0, 1.0) AS score  -- title, body, aliases, document
    FROM sections WHERE sections MATCH ? ORDER BY score, rowid LIMIT ?
"""


class KnowledgeIndex:
    """An in-memory FTS5 index of one KB folder, rebuilt when the folder's files change.

    Every query opens its own connection to a shared-cache in-memory database, so cancelling
    one query interrupts only that one. A rebuild fills a new database and swaps it in; queries
    already running finish on the old one.
    """

    _ids = itertools.count(1)

    def __init__(self, root: Path) -> None:
        self.root = root
        self._swap_lock = threading.Lock()  # guards _uri/_keeper; held only briefly
        self._build_lock = threading.Lock()  # one rebuild at a time
        self._signature: Signature | None = None
        self._uri: str | None = None
        self._keeper: sqlite3.Connection | None = None  # keeps the in-memory database alive
        self.builds = 0

    def signature(self) -> Signature:
        found = []
        for p in sorted(self.root.rglob("*.md")):
            try:
                st = p.stat()
            except OSError:  # removed while we looked
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((p.relative_to(self.root).as_posix(), st.st_mtime_ns, st.st_size))
        return tuple(found)

    def refresh(self) -> bool:
        """Rebuild if the files changed since the last build. True when it rebuilt."""
        with self._build_lock:
            sig = self.signature()
            if sig == self._signature:
                return False
            keeper, uri = self._build(sig)
            with self._swap_lock:
                old, self._keeper, self._uri, self._signature = self._keeper, keeper, uri, sig
            self.builds += 1
        if old is not None:
            old.close()
        return True

    def _build(self, sig: Signature) -> tuple[sqlite3.Connection, str]:
        uri = f"file:frontdesk-kb-{next(self._ids)}?mode=memory&cache=shared"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            conn.execute(
                "CREATE VIRTUAL TABLE sections USING fts5(title, body, aliases, document,"
                " heading UNINDEXED, path UNINDEXED,"
                " tokenize = 'porter unicode61 remove_diacritics 2')"
            )
            conn.executemany("INSERT INTO sections VALUES (?, ?, ?, ?, ?, ?)", self._rows(sig))
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn, uri

    def _rows(self, sig: Signature) -> Iterator[tuple[str, ...]]:
        for rel, _mtime, size in sig:
            if size > MAX_FILE_BYTES:
                log.warning("knowledge base file %s is over %d bytes; skipped", rel, MAX_FILE_BYTES)
                continue
            try:
                text = (self.root / rel).read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                log.warning("knowledge base file %s unreadable: %s", rel, exc)
                continue
            doc, sections = split_sections(text, _title_from_name(rel))
            for path, body in sections:
                # The page title only weighs like body text: otherwise a query for "pool" ranks
                # every section of "Pool, gym and spa" alike, the gym's opening hours included.
                title = " ".join(h for h in dict.fromkeys(path) if h != doc) or doc
                # "Wi-Fi" is indexed as "wi" + "fi"; a caller says "wifi". Index the joined form.
                aliases = {w.replace("-", "") for w in _HYPHENATED.findall(f"{title} {body}")}
                yield title, body, " ".join(sorted(aliases)), doc, path[-1], rel

    def search(self, match: str, limit: int, guard: _Interrupter) -> list[Hit]:
        """Refresh if needed, then the best ``limit`` sections for an FTS5 ``match``."""
        self.refresh()
        with self._swap_lock:
            # Connect under the lock so a rebuild cannot drop this database before we hold it.
            conn = sqlite3.connect(self._uri or ":memory:", uri=True)
        try:
            with guard.attached(conn):
                rows = conn.execute(_SEARCH_SQL, (match, limit)).fetchall()
        finally:
            conn.close()
        return [
            Hit(h, d, p, " ".join(s.split()), " ".join(b.split()), float(score))
            for h, d, p, s, b, score in rows
        ]


_indexes: dict[Path, KnowledgeIndex] = {}


def kb_root(settings: Settings | None) -> Path:
    configured = settings.kb_path if settings is not None else None
    return Path(configured).expanduser().resolve() if configured else DEFAULT_KB.resolve()


def index_for(root: Path) -> KnowledgeIndex:
    """The process-wide index for a KB folder."""
    if (index := _indexes.get(root)) is None:
        index = _indexes[root] = KnowledgeIndex(root)
    return index


# -- queries --------------------------------------------------------------------------------


def _spoken(query: str, limit: int = 80) -> str:
    """The caller's words, safe to say back: one line, no control characters, short."""
    text = query[: limit * 4].encode("utf-8", "replace").decode("utf-8")
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def build_match(query: str) -> str | None:
    """An FTS5 MATCH expression for free text: every word quoted, OR-ed; None if no words.

    Quoting makes FTS5 operators, column filters and punctuation in the caller's words plain
    text. OR plus bm25 ranks sections by how many and how rare the matching words are.
    """
    words = _WORD.findall(unicodedata.normalize("NFKC", query[:MAX_QUERY_CHARS]).lower())
    words = words[:MAX_TERMS]
    terms = [w for w in words if w not in _STOPWORDS] or words
    terms += [_EXPANSIONS[w] for w in words if w in _EXPANSIONS]
    # Speech-to-text writes "check out" for "checkout"; try each adjacent pair joined too.
    terms += [a + b for a, b in itertools.pairwise(words)]
    unique = list(dict.fromkeys(terms))
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in unique) if unique else None


def _require_words(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ToolError("Please tell me what you'd like me to look up.")
    match = build_match(query)
    if match is None:
        raise ToolError("I need a few words to search for. What would you like me to look up?")
    return match


async def search_kb(root: Path, query: str, limit: int = RESULT_LIMIT) -> list[Hit]:
    """Ranked sections of the KB at ``root`` for ``query``, best first."""
    match = _require_words(query)
    if not root.is_dir():
        log.warning("knowledge base folder %s does not exist", root)
        raise ToolError("The hotel information isn't available right now.")
    index = index_for(root)
    try:
        return await _run_interruptible(lambda guard: index.search(match, limit, guard))
    except (sqlite3.Error, OSError):
        log.exception("knowledge base search failed for %r", match[:200])
        raise ToolError("I couldn't search the hotel information just now.") from None


@tool(pattern="interruptible", ack="Let me look that up.")
async def search_knowledge(ctx: ToolContext, query: str) -> str:
    """Look up the hotel's own information: policies, times, prices and rules for check-in and
    checkout (late checkout too), breakfast and restaurants, wifi, parking and the airport
    shuttle, pets and dogs, pool, gym and spa, smoking, bookings and cancellations, and the
    local area. Pass the caller's question in a few words. Returns the best matching passages,
    best first; answer only from them."""
    root = kb_root(ctx.settings or Settings())
    _require_words(query)
    await ctx.progress(0.3, "searching the hotel information")
    hits = await search_kb(root, query)
    if not hits:
        return f"I couldn't find anything about {_spoken(query)} in the hotel information."
    best, *others = hits
    lines = [f"1. {best.heading}: {best.snippet}"]
    lines += [f"{i}. {hit.heading}: {hit.brief}" for i, hit in enumerate(others, 2)]
    return "\n".join(lines)


# -- web search -----------------------------------------------------------------------------

_UNREADABLE = "The web search service sent an answer I couldn't read."


async def _post_json(url: str, payload: dict[str, Any]) -> Any:
    # The client is a context manager so that a cancellation (barge-in) closes the socket.
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(WEB_TIMEOUT_SECONDS), follow_redirects=False
    ) as client:
        async with client.stream("POST", url, json=payload) as response:
            if response.status_code != 200:
                log.warning("web search answered HTTP %d", response.status_code)
                raise ToolError("The web search service isn't working right now.")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_WEB_BYTES:
                    raise ToolError(_UNREADABLE)
    try:
        return json.loads(bytes(body))
    except ValueError:
        raise ToolError(_UNREADABLE) from None


def _clip(value: Any, limit: int) -> str:
    return _spoken(value, limit) if isinstance(value, str) else ""


def _web_lines(data: Any, limit: int) -> list[str]:
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ToolError(_UNREADABLE)
    lines = []
    for item in results[:limit]:
        if not isinstance(item, dict):
            continue
        title, snippet = _clip(item.get("title"), 120), _clip(item.get("snippet"), 300)
        if not (title or snippet):
            continue
        try:
            host = httpx.URL(item.get("url") or "").host if isinstance(item.get("url"), str) else ""
        except Exception:  # a malformed URL only loses the site name
            host = ""
        source = f" ({host.removeprefix('www.')})" if host else ""
        lines.append(f"{len(lines) + 1}. {title or 'Result'}{source}: {snippet}".rstrip(": "))
    if results[:limit] and not lines:
        raise ToolError(_UNREADABLE)
    return lines


@tool(pattern="interruptible", ack="Let me check the web.")
async def search_web(ctx: ToolContext, query: str) -> str:
    """Search the web for things the hotel's own information does not cover, such as events,
    outside businesses or news. Pass a short search query. Returns titles and snippets."""
    url = ((ctx.settings or Settings()).search_web_url or "").strip()
    if not url:
        raise ToolError("Web search isn't set up here.")
    _require_words(query)
    text = " ".join(query[:MAX_QUERY_CHARS].split())
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be sent
    await ctx.progress(0.3, "asking the web search service")
    try:
        data = await asyncio.wait_for(
            _post_json(url, {"query": text, "limit": WEB_LIMIT}), WEB_TIMEOUT_SECONDS
        )
    except (asyncio.TimeoutError, httpx.TimeoutException):
        raise ToolError("The web search took too long to answer.") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # The URL may carry the operator's API key, and httpx messages can quote it: log the kind.
        log.warning("web search failed: %s", type(exc).__name__)
        raise ToolError("I couldn't reach the web search service.") from None
    lines = _web_lines(data, WEB_LIMIT)
    if not lines:
        return f"I couldn't find anything on the web about {_spoken(query)}."
    return "\n".join(lines)


# -- registration ---------------------------------------------------------------------------

INSTRUCTIONS = """\
You are the hotel's information desk, speaking with a caller on the phone. You answer questions
about the hotel's policies, amenities, hours and prices, and about the local area.
- Call search_knowledge before you answer any question about the hotel, and answer only from
  what it returns. Never guess a time, a price or a rule.
- Reply in one or two short spoken sentences: plain words, no lists, no markdown, no web
  addresses read aloud.
- If nothing is found, say so briefly and offer to help another way. Use search_web only for
  things outside the hotel, and only if it is set up.
- Payments and bills belong to billing, reports to reports; transfer the caller there, or back
  to triage when they are done with questions."""

# Words the offline brain routes on, besides the department name and description.
KEYWORDS = (
    "policy, policies, checkout, check out, check-in, late checkout, wifi, internet, breakfast,"
    " restaurant, parking, shuttle, pool, gym, spa, pets, dog, cancellation, nearby, search,"
    " find, look up, hours"
).split(", ")


@hookimpl
def register_departments(register: Callable[..., None]) -> None:
    register(
        Department(
            name="search",
            description=(
                "answers questions about hotel policies, amenities and local information:"
                " check-in and checkout, breakfast, wifi, parking, pets, pool and gym"
            ),
            instructions=INSTRUCTIONS,
            tools=[search_knowledge, search_web],
            keywords=list(KEYWORDS),
        )
    )
