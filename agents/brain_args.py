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
from dataclasses import dataclass, field
from typing import Any

STOP = frozenset(
    "a an the i me my mine to of for is are was were be been it its this that these those please "
    "can could you your would will shall should like want wanna what whats what's how do does did "
    "in on at and or with about need tell get give show let lets let's is there here when where "
    "who whom which why until till some any just also so then now them they their we our us "
    "hi hello hey ok okay thanks thank yes yeah no not am have has had know it's i'm i'd i'll "
    "that's there's here's we're you're they're".split()
)
# Words a caller uses to ask, not to say what they want looked up.
ASKING = frozenset("search look lookup find question ask asking wondering curious".split())
# A parameter whose name or description has one of these holds free text: the caller's content
# words. Any other string is a short value found in the words (a name, a place, an id).
FREE_TEXT = frozenset(
    "query question text message note topic subject search about detail details description "
    "request comment reason feedback keyword keywords term terms phrase words".split()
)
ID_WORDS = frozenset("id ids reference ref code number no".split())
MONEY_WORDS = frozenset("amount price cost total sum pay payment money fee charge".split())
CURRENCY = re.compile(r"^(?:dollars?|euros?|pounds?|usd|eur|gbp|bucks)$", re.I)
CUES = frozenset("in for at from to near about of called named is".split())
PLACES = frozenset("in for at from to near of around called named".split())
NEGATION = frozenset("no not without don't dont never skip".split())
CONFIRM_NAMES = frozenset({"confirmed", "confirm", "confirmation"})
LABEL_STOP = frozenset("the that which who to for as by from in on at you they we is are".split())
PARTICLES = frozenset("de da do del della di du la le van von der den al el y".split())

TOKEN = re.compile(r"[\w$€£][\w$€£.,'’/:-]*")
NUMBER = re.compile(r"^[$€£]?(\d{1,3}(?:,\d{3})+|\d+)(?:[.,](\d{1,2}|\d+))?$")
QUOTED = re.compile(r"[\"“]([^\"”]{1,80})[\"”]|(?<!\w)'([^']{1,80})'(?!\w)")
# In a description: "PAY-..." (an id prefix) or a token with a digit shaped like an id.
DESC_PREFIX = re.compile(r"\b([A-Z]{2,})-(?:\.\.\.|…)")
DESC_IDLIKE = re.compile(r"(?<![\w\"“])([A-Za-z]*\d[\w]*(?:-[\w]+)+|[A-Za-z]+-\d[\w-]*)(?![\w\"”])")
ID_SHAPE = re.compile(r"^(?:[A-Za-z]{1,8}-?\d[\w-]*|\d{3,})$")
MAX_SPAN = 4
MAX_FREE_WORDS = 8


def stem(word: str) -> str:
    word = word.lower().strip("'’")
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if word.endswith("ies") and len(word) > 5:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 4:
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Content words, stemmed, in order."""
    return [
        stem(w) for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP and len(w) > 2
    ]


@dataclass
class Token:
    text: str
    start: int
    end: int

    @property
    def low(self) -> str:
        return self.text.lower()


def tokens(text: str) -> list[Token]:
    out = []
    for m in TOKEN.finditer(text):
        raw = m.group().rstrip(".,:'’")
        if raw:
            out.append(Token(raw, m.start(), m.start() + len(raw)))
    return out


@dataclass
class Param:
    """One property of a tool's schema, with what the brain may match it against."""

    name: str
    types: set[str]
    required: bool
    description: str = ""
    enum: list[Any] = field(default_factory=list)
    pattern: re.Pattern[str] | None = None
    examples: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)  # quoted values in the tool description
    shapes: list[re.Pattern[str]] = field(default_factory=list)
    tool_words: set[str] = field(default_factory=set)  # the tool's own name: "search", "web"
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # exclusiveMinimum
    below: float | None = None  # exclusiveMaximum

    def allows(self, value: float) -> bool:
        return not (
            (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
            or (self.above is not None and value <= self.above)
            or (self.below is not None and value >= self.below)
        )

    @property
    def vocab(self) -> set[str]:
        return {stem(w) for w in re.split(r"[_\W]+", self.name.lower()) if w} | set(
            words(self.description)
        )

    @property
    def own_words(self) -> set[str]:
        """Its name's words and the noun its description names it by ("the town" -> town)."""
        label = self.label.split()
        return {stem(w) for w in re.split(r"[_\W]+", self.name.lower()) if w} | (
            {stem(label[-1])} if label else set()
        )

    @property
    def is_confirmation(self) -> bool:
        return "boolean" in self.types and (
            self.name.lower() in CONFIRM_NAMES or "confirm" in self.description.lower()
        )

    @property
    def is_number(self) -> bool:
        return bool(self.types & {"number", "integer"})

    @property
    def is_free_text(self) -> bool:
        if any(" " in e and e == e.lower() for e in self.examples):
            return True
        return bool(self.vocab & FREE_TEXT)

    @property
    def is_id(self) -> bool:
        parts = set(re.split(r"[_\W]+", self.name.lower()))
        return bool(parts & ID_WORDS) or self.name.lower().endswith("id")

    @property
    def label(self) -> str:
        """How to name it to a caller: its description's first clause, or its name."""
        text = re.split(r"[.,;:(]", self.description.strip(), maxsplit=1)[0].strip()
        text = re.sub(r"^(the|a|an|your|their)\s+", "", text, flags=re.I)
        # The noun, not the clause after it: "city the caller asks about" -> "city".
        head = text.split()[:1]
        for w in text.split()[1:]:
            if w.lower() in LABEL_STOP:
                break
            head.append(w)
        text = " ".join(head)
        if text and len(head) <= 4:
            return text[0].lower() + text[1:]
        return self.name.replace("_", " ")


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {
            **defs.get(ref.split("/")[-1], {}),
            **{k: v for k, v in prop.items() if k != "$ref"},
        }
    if len(prop.get("allOf", [])) == 1:
        return {
            **_resolve(prop["allOf"][0], defs),
            **{k: v for k, v in prop.items() if k != "allOf"},
        }
    return prop


def params_of(schema: dict[str, Any]) -> list[Param]:
    """The parameters of a tool schema ({"name", "description", "parameters"})."""
    parameters = schema.get("parameters") or {}
    defs = parameters.get("$defs", {})
    required = set(parameters.get("required", []))
    out = []
    for name, raw in (parameters.get("properties") or {}).items():
        prop = _resolve(raw, defs)
        branches = [_resolve(b, defs) for b in prop.get("anyOf", prop.get("oneOf", []))] or [prop]
        types: set[str] = set()
        enum: list[Any] = []
        pattern = None
        for b in branches:
            kind = b.get("type")
            types.update(kind if isinstance(kind, list) else [kind] if kind else [])
            enum += b.get("enum", []) + ([b["const"]] if "const" in b else [])
            pattern = pattern or b.get("pattern")
        if enum and not types:
            types = {"string"}
        types.discard("null")
        param = Param(
            name=name,
            types=types or {"string"},
            required=name in required,
            description=str(prop.get("description") or ""),
            enum=[e for e in enum if e is not None],
            examples=[str(e) for e in prop.get("examples", []) if isinstance(e, str | int | float)],
            minimum=prop.get("minimum"),
            maximum=prop.get("maximum"),
            above=prop.get("exclusiveMinimum"),
            below=prop.get("exclusiveMaximum"),
        )
        if pattern:
            try:
                param.pattern = re.compile(pattern)
            except re.error:
                pass
        out.append(param)
    _hints_from_description(schema.get("description") or "", out)
    own = {w for w in str(schema.get("name", "")).lower().split("_") if w}
    for p in out:
        p.tool_words = own
        p.shapes = [_shape(e) for e in p.examples + p.hints + _id_hints(p.description)]
    return out


def _hints_from_description(text: str, params: list[Param]) -> None:
    """Values the tool's description gives right after a parameter's name, up to the next
    parameter's name: 'kind "statement" ... or "activity". period is a month like 2026-03'."""
    marks = []
    for p in params:
        names = {p.name, p.name.replace("_", " ")}
        base = re.sub(r"_(id|ids|ref|code|number)$", "", p.name)
        names.add(base.replace("_", " "))
        for n in names:
            for m in re.finditer(rf"\b{re.escape(n)}s?\b", text, re.I):
                marks.append((m.start(), p))
    marks.sort(key=lambda m: m[0])
    for i, (start, p) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        segment = text[start:end]
        p.hints += [a or b for a, b in QUOTED.findall(segment)]
        p.hints += _id_hints(segment)


def _id_hints(text: str) -> list[str]:
    found = [f"{m}-..." for m in DESC_PREFIX.findall(text)]
    return found + [m for m in DESC_IDLIKE.findall(QUOTED.sub(" ", text)) if "..." not in m]


def _shape(example: str) -> re.Pattern[str]:
    """A regex for values shaped like ``example``: its letters kept, digit runs any digits,
    a trailing "..." anything ("INV-1002" -> INV-\\d+, "PAY-..." -> PAY-\\w+)."""
    out = []
    for run in re.findall(r"\.\.\.|…|\d+|[A-Za-z]+|\s+|.", example):
        if run in ("...", "…"):
            out.append(r"[\w-]+")
        elif run.isdigit():
            out.append(r"\d+")
        elif run.isspace():
            out.append(r"[\s_-]?")
        else:
            out.append(re.escape(run))
    return re.compile("".join(out), re.I)


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
