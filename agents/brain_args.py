"""Filling a tool's arguments from the caller's words, using only the tool's JSON schema.

What a parameter may take comes from its schema: the type, an ``enum``, a ``pattern``, the
``examples`` a plugin declares (``Field(examples=[...])``), its description, and values the
tool's description quotes next to the parameter's name (``kind "statement" or "activity"``).
A value is a span of the caller's words that fits; nothing is guessed, and a string argument
is never the whole utterance. Spans used for one argument are not reused for another, so the
digits of "INV-1002" are not also an amount.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from frontdesk.agents.brain_schema import (
    ASKING,
    CUES,
    CURRENCY,
    ID_SHAPE,
    MAX_FREE_WORDS,
    MAX_SPAN,
    MONEY_WORDS,
    NEGATION,
    NUMBER,
    PARTICLES,
    PLACES,
    QUOTED,
    STOP,
    Param,
    Token,
    stem,
    tokens,
)


@dataclass
class Filled:
    args: dict[str, Any]
    missing: list[Param]


def fill(text: str, params: list[Param], *, reply_to: str | None = None) -> Filled:
    """Arguments for ``params`` from ``text``. ``reply_to`` is the parameter the caller was
    just asked for: a short answer may then be the value itself ("Lisbon", "yes")."""
    toks = tokens(text)
    used: set[int] = set()  # token indexes already taken
    args: dict[str, Any] = {}
    order = sorted(params, key=_priority)
    for p in order:
        if p.is_confirmation:
            continue
        value = _value(p, text, toks, used, reply_to == p.name)
        if value is not None:
            args[p.name] = value
    missing = [p for p in params if p.required and p.name not in args and not p.is_confirmation]
    return Filled(args, missing)


def _priority(p: Param) -> int:
    if p.enum or p.pattern is not None or p.shapes:
        return 0
    if p.is_id and not p.is_number:
        return 1
    if p.is_number or "boolean" in p.types:
        return 2
    return 3 if not p.is_free_text else 4


def _spans(
    toks: list[Token], used: set[int], longest: bool = True
) -> list[tuple[int, int, list[str]]]:
    """(first, last+1, spellings) for runs of up to MAX_SPAN free tokens, in order of position
    and then length: "last 30 days" is also tried as "last-30-days", "inv 1002" as "inv-1002"."""
    out = []
    for i in range(len(toks)):
        sizes = range(1, min(MAX_SPAN, len(toks) - i) + 1)
        for n in reversed(sizes) if longest else sizes:
            idx = range(i, i + n)
            if any(j in used for j in idx):
                continue
            parts = [toks[j].text for j in idx]
            out.append(
                (
                    i,
                    i + n,
                    list(
                        dict.fromkeys(
                            [" ".join(parts), "-".join(parts), "_".join(parts), "".join(parts)]
                        )
                    ),
                )
            )
    return out


def _take(used: set[int], first: int, last: int) -> None:
    used.update(range(first, last))


def _value(p: Param, text: str, toks: list[Token], used: set[int], answering: bool) -> Any:
    if p.enum:
        return _enum(p, toks, used)
    if "boolean" in p.types and not p.types - {"boolean"}:
        return _boolean(p, text, toks, answering)
    if p.pattern is not None or p.shapes:
        if (v := _shaped(p, toks, used)) is not None:
            return v
        if p.pattern is not None:
            return None  # nothing fits the declared pattern: ask rather than send what won't
    if p.is_number:
        return _number(p, toks, used)
    if p.is_id:
        return _id(p, toks, used)
    if m := QUOTED.search(text):
        value = (m.group(1) or m.group(2)).strip()
        if value:
            _take(used, *_token_range(toks, m.start(), m.end()))
            return value
    if p.is_free_text:
        # An optional note is not made up from the leftovers; a required query may be.
        return _free_text(p, toks, used) if p.required or answering else None
    return _short(p, text, toks, used, answering)


def _token_range(toks: list[Token], start: int, end: int) -> tuple[int, int]:
    idx = [i for i, t in enumerate(toks) if t.start >= start and t.end <= end]
    return (idx[0], idx[-1] + 1) if idx else (0, 0)


def _norm(value: str) -> str:
    return " ".join(stem(w) for w in re.split(r"[\s_-]+", value.lower()) if w)


def _enum(p: Param, toks: list[Token], used: set[int]) -> Any:
    choices = {_norm(str(e)): e for e in p.enum if not isinstance(e, bool)}
    for first, last, spellings in _spans(toks, used):
        for s in spellings:
            key = _norm(s)
            if key in choices:
                _take(used, first, last)
                return choices[key]
    return None


def _shaped(p: Param, toks: list[Token], used: set[int]) -> str | None:
    # Shortest first: "PAY-..." takes "pay 12", not "pay 12 please".
    for first, last, spellings in _spans(toks, used, longest=False):
        if last - first == 1 and toks[first].low in STOP:
            continue
        for s in spellings:
            for candidate in (s, s.upper(), s.lower()):
                if _fits(p, candidate):
                    _take(used, first, last)
                    known = [e for e in p.examples + p.hints if _norm(e) == _norm(candidate)]
                    return known[0] if known else candidate
    return None


def _fits(p: Param, value: str) -> bool:
    if p.pattern is not None:
        return p.pattern.fullmatch(value) is not None
    # Examples only say what a value looks like: keep their case ("inv-1002" -> "INV-1002").
    if not any(s.fullmatch(value) for s in p.shapes):
        return False
    cased = [e for e in p.examples + p.hints if any(c.isalpha() for c in e)]
    if cased and all(e == e.upper() for e in cased):
        return value == value.upper()
    if cased and all(e == e.lower() for e in cased):
        return value == value.lower()
    return True


def _numbers(toks: list[Token], used: set[int]) -> list[tuple[int, float, str, bool]]:
    """(token index, value, spelling, is money) for each free number token."""
    out = []
    for i, t in enumerate(toks):
        if i in used or not (m := NUMBER.match(t.text)):
            continue
        whole, frac = m.group(1).replace(",", ""), m.group(2)
        spelled = f"{whole}.{frac}" if frac else whole
        money = t.text[0] in "$€£" or (i + 1 < len(toks) and bool(CURRENCY.match(toks[i + 1].text)))
        out.append((i, float(spelled), spelled, money))
    return out


def _number(p: Param, toks: list[Token], used: set[int]) -> Any:
    found = []
    for i, value, spelled, money in _numbers(toks, used):
        if not p.allows(value):
            continue
        if p.types == {"integer"} and not value.is_integer():
            continue
        near = {stem(t.text) for t in toks[max(0, i - 2) : i + 3]}
        score = len(near & p.vocab) + (2 if money and p.vocab & MONEY_WORDS else 0)
        found.append((-score, i, value, spelled))
    if not found:
        return None
    _, i, value, spelled = min(found)
    used.add(i)
    if "string" in p.types:
        return spelled  # exact as said: "358.40" stays 358.40, not a float
    return int(value) if value.is_integer() else value


def _id(p: Param, toks: list[Token], used: set[int]) -> str | None:
    base = re.sub(r"_?(id|ids|ref|reference|code|number|no)$", "", p.name.lower())
    for i in range(len(toks) - 1):
        # Spoken with a pause: "inv 1003" for an invoice id is INV-1003.
        a, b = toks[i], toks[i + 1]
        if {i, i + 1} & used or not (a.text.isalpha() and b.text.isdigit()):
            continue
        if len(a.text) <= 4 and a.low not in STOP and base.startswith(a.low):
            used.update((i, i + 1))
            return f"{a.text.upper()}-{b.text}"
    best = None
    for i, t in enumerate(toks):
        if i in used or not ID_SHAPE.match(t.text) or not any(c.isdigit() for c in t.text):
            continue
        prefix = re.match(r"[A-Za-z]*", t.text).group().lower()
        score = 2 if prefix and base.startswith(prefix) else 1 if prefix else 0
        if best is None or score > best[0]:
            best = (score, i)
    if best is None:
        return None
    used.add(best[1])
    text = toks[best[1]].text
    return text.upper() if any(c.isalpha() for c in text) else text


def _boolean(p: Param, text: str, toks: list[Token], answering: bool) -> bool | None:
    for i, t in enumerate(toks):
        if stem(t.text) in p.own_words - STOP:
            before = {x.low for x in toks[max(0, i - 3) : i]}
            return not (before & NEGATION)
    if answering:
        if re.match(r"^\s*(yes|yeah|yep|sure|please do|correct)\b", text, re.I):
            return True
        if re.match(r"^\s*(no|nope|not)\b", text, re.I):
            return False
    return None


def _content(p: Param, toks: list[Token], used: set[int]) -> list[int]:
    own = {w for w in re.split(r"[_\W]+", p.name.lower()) if w} | p.tool_words
    return [
        i
        for i, t in enumerate(toks)
        if i not in used and t.low not in STOP and t.low not in ASKING and stem(t.text) not in own
    ]


def _free_text(p: Param, toks: list[Token], used: set[int]) -> str | None:
    """The caller's content words, in order: "what time is checkout" -> "time checkout"."""
    keep = _content(p, toks, used)[:MAX_FREE_WORDS]
    if not keep:
        return None
    used.update(keep)
    return " ".join(toks[i].text for i in keep)


def _short(p: Param, text: str, toks: list[Token], used: set[int], answering: bool) -> str | None:
    """A name-like value: a capitalised phrase ("in Lisbon"), the words after the parameter's
    own name ("the city of porto"), or, answering our question, the few words said."""
    caps = _capitalised(text, toks, used, p.own_words)
    if caps is not None:
        _take(used, *caps)
        return " ".join(t.text for t in toks[caps[0] : caps[1]])
    value = _after_cue(p, toks, used, answering)
    names = [e for e in p.examples if e.replace(" ", "").isalpha()]
    if value and names and all(e == e.title() for e in names):
        return value.title()  # the examples are names: "porto" is Porto
    return value


def _after_cue(p: Param, toks: list[Token], used: set[int], answering: bool) -> str | None:
    vocab = p.own_words - STOP
    for i, t in enumerate(toks):
        if stem(t.text) in vocab:
            j = i + 1
            while j < len(toks) and toks[j].low in CUES | {"the"}:
                j += 1
            run = _run(toks, used, j)
            if run is not None:
                _take(used, *run)
                return " ".join(t.text for t in toks[run[0] : run[1]])
    if answering:
        keep = _content(p, toks, used)
        if 0 < len(keep) <= 3:
            used.update(keep)
            return " ".join(toks[i].text for i in keep)
    return None


def _run(toks: list[Token], used: set[int], j: int) -> tuple[int, int] | None:
    k = j
    while k < len(toks) and k - j < 3 and k not in used and toks[k].low not in STOP:
        k += 1
    return (j, k) if k > j else None


def _capitalised(
    text: str, toks: list[Token], used: set[int], cues: set[str]
) -> tuple[int, int] | None:
    """A run of capitalised words that does not open a sentence: the first one after a place
    word or the parameter's own ("in Lisbon", "city Porto"), else the first one ("my name is
    Alice Reed, what's the weather in Lisbon" is Lisbon for a city)."""
    runs = []
    i = 1
    while i < len(toks):
        t = toks[i]
        sentence_start = re.search(r"[.!?]\s*$", text[: t.start]) is not None
        if i not in used and t.text[:1].isupper() and t.low not in STOP and not sentence_start:
            j = i + 1
            while j < len(toks) and j - i < 4 and j not in used:
                if toks[j].text[:1].isupper():
                    j += 1
                elif (
                    toks[j].low in PARTICLES
                    and j + 1 < len(toks)
                    and toks[j + 1].text[:1].isupper()
                ):
                    j += 2  # "Rio de Janeiro"
                else:
                    break
            if not any(c.isdigit() for c in t.text):
                before = {stem(x.text) for x in toks[max(0, i - 2) : i]}
                runs.append((0 if before & (PLACES | cues) else 1, i, j))
            i = j
            continue
        i += 1
    return min(runs)[1:] if runs else None
