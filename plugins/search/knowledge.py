"""The search desk's knowledge base: ranked full-text search (SQLite FTS5, bm25) over the folder
of Markdown files that ``FRONTDESK_SEARCH_KB_PATH`` (or the profile's ``[plugins.search]
kb_path``) names. No knowledge base is built in; the demo's is ``examples/demo/kb/``.

Each file is split into sections at its headings, so an answer points at "Late checkout" rather
than at a whole page. The index lives in memory, is built on first use in a worker thread and is
rebuilt whenever the files' paths, modification times or sizes change. A search runs in a
worker thread that the caller's barge-in interrupts (``sqlite3.Connection.interrupt``).
"""

from __future__ import annotations

import asyncio
import itertools
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
from typing import TypeVar

from frontdesk.core import ToolError

log = logging.getLogger("frontdesk.plugins.search")

RESULT_LIMIT = 3
# The best hit is read out in full-ish; the runners-up only briefly, to keep the answer short.
SNIPPET_TOKENS = 32
BRIEF_TOKENS = 14
# A spoken question is a sentence; anything longer is pasted or hostile, and only its start
# is worth searching for.
MAX_QUERY_CHARS = 500
MAX_TERMS = 24
MAX_FILE_BYTES = 1_000_000

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


def index_for(root: Path) -> KnowledgeIndex:
    """The process-wide index for a KB folder."""
    if (index := _indexes.get(root)) is None:
        index = _indexes[root] = KnowledgeIndex(root)
    return index


# -- queries --------------------------------------------------------------------------------


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


def require_words(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ToolError("Please tell me what you'd like me to look up.")
    match = build_match(query)
    if match is None:
        raise ToolError("I need a few words to search for. What would you like me to look up?")
    return match


async def search_kb(root: Path, query: str, limit: int = RESULT_LIMIT) -> list[Hit]:
    """Ranked sections of the KB at ``root`` for ``query``, best first."""
    match = require_words(query)
    if not root.is_dir():
        log.warning("knowledge base folder %s does not exist", root)
        raise ToolError("Our information isn't available right now.")
    index = index_for(root)
    try:
        return await _run_interruptible(lambda guard: index.search(match, limit, guard))
    except (sqlite3.Error, OSError):
        log.exception("knowledge base search failed for %r", match[:200])
        raise ToolError("I couldn't search our information just now.") from None
