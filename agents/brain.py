"""The offline brain: a deterministic ``llm.LLM`` for demos, the console and scenario fallbacks.

It needs no key and no network. It routes by the words in tool and desk descriptions, fills
arguments from the utterance (ids, amounts, periods, quoted text), reads tool results and
follow-up instructions back, greets on handoff, and says plainly what it did not understand.
"""

from __future__ import annotations

import json
import re
from typing import Any

from livekit.agents import APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr

from frontdesk.agents.testing import reply_chunk

YES = re.compile(
    r"^\s*(yes|yeah|yep|sure|ok(ay)?|confirm(ed)?|go ahead|please do|do it|correct)\b", re.I
)
BYE = re.compile(r"\b(bye|goodbye|that's all|that is all|hang up)\b", re.I)
STOP = set(
    "a an the i me my to of for is are was be it this that please can could you would like want "
    "what whats what's how do does in on at and or with about need tell get".split()
)
IDS = re.compile(r"\b((?:INV|PAY|R)-[A-Z0-9-]+)\b", re.I)
MONEY = re.compile(r"(?:\$|€|£)\s*(\d+(?:[.,]\d{1,2})?)|\b(\d+(?:\.\d{1,2})?)\b")
STATUS = re.compile(
    r"\b(what happened|status|ready yet|done yet|is it ready|how is (it|my)|progress)\b", re.I
)
NUMBER = re.compile(r"\b(\d+)\b")
MONTH = re.compile(r"\b(\d{4}-\d{2})\b")
QUOTED = re.compile(r"[\"“']([^\"”']{2,})[\"”']")


def words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in STOP or len(w) < 3:
            continue
        out.add(w[:-1] if w.endswith("s") and len(w) > 4 else w)
    return out


def tool_schema(tool: Any) -> dict[str, Any]:
    info = tool.info
    if hasattr(info, "raw_schema"):
        return info.raw_schema
    return {
        "name": info.name,
        "description": getattr(info, "description", "") or "",
        "parameters": {},
    }


class OfflineBrain(llm.LLM):
    @property
    def model(self) -> str:
        return "offline"

    @property
    def provider(self) -> str:
        return "frontdesk"

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        schemas = [tool_schema(t) for t in tools or []]
        text, calls = decide(chat_ctx, schemas)
        return _Stream(
            self,
            chat_ctx=chat_ctx,
            tools=tools or [],
            conn_options=conn_options,
            reply=(text, calls),
        )


class _Stream(llm.LLMStream):
    def __init__(
        self, owner: OfflineBrain, *, reply: tuple[str | None, list[tuple[str, Any]]], **kw: Any
    ) -> None:
        super().__init__(owner, **kw)
        self._reply = reply

    async def _run(self) -> None:
        self._event_ch.send_nowait(reply_chunk(*self._reply))


def decide(
    ctx: llm.ChatContext, schemas: list[dict[str, Any]]
) -> tuple[str | None, list[tuple[str, Any]]]:
    items = [i for i in ctx.items if i.type in ("message", "function_call_output", "function_call")]
    if not items:
        return "How can I help?", []
    last = items[-1]
    if last.type == "function_call_output":
        return read_back(last), []
    if last.type == "message" and last.role in ("system", "developer"):
        return follow_instructions(last.text_content or "", items, schemas)
    if last.type == "message" and last.role == "user":
        return answer(last.text_content or "", items, schemas)
    return None, []


def read_back(out: Any) -> str:
    text = out.output or ""
    if out.is_error:
        return text if text.endswith((".", "?", "!")) else f"Sorry, {text}."
    try:
        data = json.loads(text)
    except ValueError:
        return text[:400]
    if isinstance(data, dict):
        for key in ("summary", "message", "answer", "text"):
            if isinstance(data.get(key), str):
                return data[key][:400]
        return "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in list(data.items())[:6])
    if isinstance(data, list):
        return "; ".join(str(x) for x in data[:5]) or "Nothing to report."
    return str(data)


def follow_instructions(
    text: str, items: list[Any], schemas: list[dict[str, Any]]
) -> tuple[str | None, list[tuple[str, Any]]]:
    if text.startswith("Tell the caller"):
        # "Tell the caller, ... that their X (reference N) is done: RESULT"
        m = re.search(
            r"their (.+?) \(reference (\d+)\) (is done|did not complete)[^:]*:?\s*(.*)", text, re.S
        )
        if m:
            what, ref, state, rest = m.groups()
            if state == "is done":
                return f"An update: your {what} (reference {ref}) is ready. {rest.strip()}", []
            return (
                f"An update: your {what} (reference {ref}) did not complete. Sorry about that; I can try again.",
                [],
            )
        return text, []
    m = re.search(r"You are the (\w+) desk and just took over", text)
    if m:
        desk = m.group(1)
        user = next((i for i in reversed(items) if i.type == "message" and i.role == "user"), None)
        if user is not None:
            said, calls = answer(user.text_content or "", items, schemas, transfers=False)
            if calls:
                return said, calls
        if desk == "triage":
            return "You're back at the front desk. How can I help?", []
        return f"You're through to the {desk} desk. How can I help?", []
    return None, []


def answer(
    text: str, items: list[Any], schemas: list[dict[str, Any]], transfers: bool = True
) -> tuple[str | None, list[tuple[str, Any]]]:
    said = words(text)
    if BYE.search(text):
        if any(s["name"] == "record_call_outcome" for s in schemas):
            return None, [("record_call_outcome", {})]
        return "Thank you for calling. Goodbye!", []
    if STATUS.search(text) and any(s["name"] == "task_status" for s in schemas):
        ref = NUMBER.search(IDS.sub(" ", text))
        return None, [("task_status", {"task_id": int(ref.group(1))} if ref else {})]
    if YES.match(text):
        pending = _pending_confirmation(items)
        if pending is not None:
            name, args = pending
            return None, [(name, {**args, "confirmed": True})]
    best: tuple[float, dict[str, Any]] | None = None
    for schema in schemas:
        name = schema["name"]
        is_transfer = name.startswith("transfer_to_")
        if is_transfer and not transfers:
            continue
        vocab = words(name.replace("_", " ")) | words(schema.get("description", ""))
        score = len(said & vocab) + (1.5 if is_transfer and name[12:] in said else 0)
        score -= 0.25 if is_transfer else 0  # prefer doing over transferring on a tie
        if score > 0 and (best is None or score > best[0]):
            best = (score, schema)
    if best is None:
        desks = sorted(s["name"][12:] for s in schemas if s["name"].startswith("transfer_to_"))
        offer = f" I can connect you with {', '.join(desks)}." if desks else ""
        return f"Sorry, I didn't understand that.{offer}", []
    schema = best[1]
    if schema["name"].startswith("transfer_to_"):
        desk = schema["name"][12:]
        return f"Let me transfer you to {'the front desk' if desk == 'triage' else desk}.", [
            (schema["name"], {})
        ]
    args = fill_args(text, schema.get("parameters", {}), items)
    missing = [p for p in schema.get("parameters", {}).get("required", []) if p not in args]
    if missing:
        return f"To do that I need the {missing[0].replace('_', ' ')}.", []
    return None, [(schema["name"], args)]


def fill_args(text: str, params: dict[str, Any], items: list[Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, prop in params.get("properties", {}).items():
        kind = prop.get("type") or next(
            (t.get("type") for t in prop.get("anyOf", []) if t.get("type") != "null"), "string"
        )
        value = _value_for(name, kind, text)
        if value is not None:
            args[name] = value
    return args


def _value_for(name: str, kind: str, text: str) -> Any:
    if kind == "boolean":
        # Always explicit, so a later "yes" can find the unconfirmed call and repeat it.
        return bool(YES.match(text)) if name == "confirmed" else None
    if "period" in name:
        if m := MONTH.search(text):
            return m.group(1)
        if re.search(r"last\s*30\s*days|past month|recent", text, re.I):
            return "last-30-days"
        return None
    if name == "kind":
        for k in ("statement", "activity"):
            if k in text.lower():
                return k
        return None
    if name.endswith("id"):
        if m := IDS.search(text):
            return m.group(1).upper()
        if m := NUMBER.search(text):
            return int(m.group(1)) if kind == "integer" else m.group(1)
        return None
    if "amount" in name:
        if m := MONEY.search(IDS.sub(" ", text)):  # "INV-1002" is not an amount
            return (m.group(1) or m.group(2)).replace(",", ".")
        return None
    if kind in ("integer", "number"):
        m = NUMBER.search(text)
        return int(m.group(1)) if m else None
    if m := QUOTED.search(text):
        return m.group(1)
    if name in ("city", "place", "location"):
        m = re.search(r"\b(?:in|for|at)\s+([A-Z][\w\s-]+)", text)
        return m.group(1).strip(" ?.!") if m else None
    return text.strip()


def _pending_confirmation(items: list[Any]) -> tuple[str, dict[str, Any]] | None:
    """The last tool call that asked to be confirmed (called with confirmed false)."""
    for item in reversed(items):
        if item.type == "function_call":
            try:
                args = json.loads(item.arguments or "{}")
            except ValueError:
                return None
            if isinstance(args, dict) and "confirmed" in args and not args["confirmed"]:
                return item.name, args
            return None
    return None
