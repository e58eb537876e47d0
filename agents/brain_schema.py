"""What the offline brain reads from a tool's JSON schema: its parameters (type, enum,
pattern, examples, description) and the caller's words as tokens. ``brain_args`` fills
arguments from them."""

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
