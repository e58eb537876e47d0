"""Built-in search plugin: a knowledge base of the business's own information
(``knowledge.py``), and web search through the operator's service.

Settings (``register_settings``; environment, ``.env`` or the profile's ``[plugins.search]``)
-------------------------------------------------------------------------------------------
- ``kb_path`` (``FRONTDESK_SEARCH_KB_PATH``): a folder of Markdown files to answer from. None is
  built in: without one ``search_knowledge`` says plainly that there is no knowledge base. A
  relative path in the profile is relative to the profile's folder (frontdesk resolves it), so
  ``kb_path = "kb"`` in ``examples/demo/frontdesk.toml`` is ``examples/demo/kb``; one from the
  environment is relative to the working directory.
- ``web_url`` (``FRONTDESK_SEARCH_WEB_URL``): the web search service; off when unset.

Web search contract
-------------------
``search_web`` is off until ``FRONTDESK_SEARCH_WEB_URL`` names an HTTP(S) endpoint. frontdesk
sends::

    POST <FRONTDESK_SEARCH_WEB_URL>
    Content-Type: application/json

    {"query": "fireworks tonight", "limit": 3}

and expects status 200 with a JSON body, best result first::

    {"results": [{"title": "Fireworks", "url": "https://...", "snippet": "..."}]}

``title`` or ``snippet`` must be a non-empty string; ``url`` may be empty; other fields are
ignored and at most ``limit`` results are read. Any other status, a body of another shape, a
body over 1 MB or no complete answer within 10 seconds is told to the caller as a short apology.
"""

from __future__ import annotations

import asyncio
import json
import logging
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from frontdesk.core import Department, ToolContext, ToolError, hookimpl, tool
from frontdesk.plugins.search.knowledge import MAX_QUERY_CHARS, require_words, search_kb

log = logging.getLogger("frontdesk.plugins.search")

WEB_LIMIT = 3
WEB_TIMEOUT_SECONDS = 10.0
MAX_WEB_BYTES = 1_000_000


NO_KB = "There's no knowledge base set up here, so I can't look that up."


class SearchSettings(BaseSettings):
    """The search desk's settings: ``FRONTDESK_SEARCH_*`` or the profile's ``[plugins.search]``."""

    model_config = SettingsConfigDict(env_prefix="FRONTDESK_SEARCH_", extra="ignore")

    kb_path: Path | None = None
    web_url: str | None = None

    @field_validator("kb_path", mode="before")
    @classmethod
    def _unset_when_blank(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("kb_path")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        path = value.expanduser()
        return path.resolve()

    @field_validator("web_url")
    @classmethod
    def _stripped(cls, value: str | None) -> str | None:
        return (value or "").strip() or None


def _config(ctx: ToolContext) -> SearchSettings:
    config = ctx.config
    return config if isinstance(config, SearchSettings) else SearchSettings()


def _spoken(query: str, limit: int = 80) -> str:
    """The caller's words, safe to say back: one line, no control characters, short."""
    text = query[: limit * 4].encode("utf-8", "replace").decode("utf-8")
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@tool(pattern="interruptible", ack="Let me look that up.")
async def search_knowledge(ctx: ToolContext, query: str) -> str:
    """Look up our own information: policies, opening hours and times, prices and fees,
    rules, amenities and services, bookings and cancellations, getting here and parking, and the
    local area. Pass the caller's question in a few words. Returns the best matching passages,
    best first; answer only from them."""
    require_words(query)
    root = _config(ctx).kb_path
    if root is None:
        raise ToolError(NO_KB)
    await ctx.progress(0.3, "searching our information")
    hits = await search_kb(root, query)
    if not hits:
        return f"I couldn't find anything about {_spoken(query)} in our information."
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
    """Search the web for things our own information does not cover, such as events,
    outside businesses or news. Pass a short search query. Returns titles and snippets."""
    url = _config(ctx).web_url
    if not url:
        raise ToolError("Web search isn't set up here.")
    require_words(query)
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
You are the information desk, speaking with a caller on the phone. You answer questions about
our policies, amenities, hours and prices, and about the local area.
- Call search_knowledge before you answer any question about us, and answer only from what it
  returns. Never guess a time, a price or a rule.
- Reply in one or two short spoken sentences: plain words, no lists, no markdown, no web
  addresses read aloud.
- If nothing is found, say so briefly and offer to help another way. Use search_web only for
  things outside our own information, and only if it is set up.
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
                "answers questions about our policies, hours, prices, amenities and local"
                " information: check-in and checkout, breakfast, wifi, parking, pets, pool and gym"
            ),
            instructions=INSTRUCTIONS,
            tools=[search_knowledge, search_web],
            keywords=list(KEYWORDS),
        )
    )


@hookimpl
def register_settings(register: Callable[..., None]) -> None:
    register(SearchSettings)
