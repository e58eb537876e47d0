"""The offline brain's reasoning: from the history and the offered tools' schemas to what to
say and which tools to call (see ``frontdesk.agents.brain``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from frontdesk.agents.brain_args import fill
from frontdesk.agents.brain_schema import Param, params_of, words
from frontdesk.agents.triage import TRIAGE

YES = re.compile(
    r"^\s*(yes|yeah|yep|yup|sure|ok(ay)?|confirm(ed)?|go ahead|please do|do it|correct|right)\b",
    re.I,
)
NO = re.compile(r"^\s*(no|nope|don'?t|do not|cancel|stop|never ?mind|wait)\b", re.I)
BYE = re.compile(r"\b(bye|goodbye|that's all|that is all|hang up)\b", re.I)
GREET = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening))\b", re.I)
STATUS = re.compile(
    r"\b(what happened|status|ready yet|done yet|is it ready|how is (it|my)|progress)\b", re.I
)
TRANSFER = re.compile(
    r"^Transfer the caller to the \w+ desk, which (.*?)\.(?: Topics: (.*)\.)?$", re.S
)
APOLOGY = "Sorry, that didn't work. Is there anything else I can help with?"
RAW_ERROR = re.compile(
    r"traceback|exception|internal error|error:|errno|\.py\b|[{}<>=\[\]]|\bat 0x|^\s*error\b", re.I
)
MAX_DEPTH = 6


@dataclass
class Decision:
    say: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ask: tuple[str, dict[str, Any], str] | None = None  # (tool, arguments so far, missing)
    confirm: tuple[str, dict[str, Any]] | None = None  # (tool, arguments) awaiting a yes


class Mind:
    def __init__(self, schemas: list[dict[str, Any]], critical: frozenset[str]) -> None:
        self.schemas = {s["name"]: s for s in schemas if s.get("name")}
        self.critical = critical
        self._params: dict[str, list[Param]] = {}
        self._answers: dict[tuple[int, str, bool], Decision] = {}
        self._vocabs: dict[bool, tuple[dict[str, Any], dict[str, int]]] = {}

    def params(self, tool: str) -> list[Param]:
        if tool not in self._params:
            self._params[tool] = params_of(self.schemas[tool])
        return self._params[tool]

    def decide(self, all_items: list[Any]) -> Decision:
        items = [
            i for i in all_items if i.type in ("message", "function_call", "function_call_output")
        ]
        if not items:
            return Decision("How can I help?")
        last = items[-1]
        if last.type == "function_call_output":
            return Decision(read_back(items))
        if last.type == "message" and last.role in ("system", "developer"):
            return self.instructed(last.text_content or "", items)
        if last.type == "message" and last.role == "user":
            return self.answer(last.text_content or "", items)
        return Decision()

    # -- what the session asks of us ----------------------------------------------------------

    def instructed(self, text: str, items: list[Any]) -> Decision:
        if text.startswith("Tell the caller"):
            # "Tell the caller, ... that their X (reference N) is done: RESULT"
            m = re.search(
                r"their (.+?) \(reference (\d+)\) (is done|did not complete)[^:]*:?\s*(.*)",
                text,
                re.S,
            )
            if not m:  # not our follow-up wording: never read instructions out
                return Decision("I have an update on one of your requests.")
            what, ref, state, rest = m.groups()
            if state == "is done":
                return Decision(
                    f"An update: your {what} (reference {ref}) is ready. {rest.strip()}"
                )
            reason = rest.split("\n", 1)[0].strip() if rest.strip() else ""
            because = f" {reason.rstrip('.')}." if reason else ""
            return Decision(
                f"An update: your {what} (reference {ref}) did not complete.{because} "
                "Sorry about that; I can try again."
            )
        m = re.search(r"You are the (\w+) desk and just took over", text)
        if not m:
            return Decision()
        # The caller's request came with them: act on it here if it belongs to this desk.
        users = [n for n, i in enumerate(items) if i.type == "message" and i.role == "user"]
        if users:
            said = self.answer(
                items[users[-1]].text_content or "", items[: users[-1] + 1], transfers=False
            )
            if said.calls or said.ask or said.confirm:
                return said
        desk = m.group(1)
        if desk == TRIAGE:
            return Decision("You're back at the front desk. How can I help?")
        return Decision(f"You're through to the {desk} desk. How can I help?")

    def answer(
        self, text: str, items: list[Any], transfers: bool = True, depth: int = 0
    ) -> Decision:
        key = (len(items), text, transfers)  # items are always a prefix of one history
        if key not in self._answers:
            self._answers[key] = self._answer(text, items, transfers, depth)
        return self._answers[key]

    def _answer(self, text: str, items: list[Any], transfers: bool, depth: int) -> Decision:
        pending = self.pending(items, depth)
        if pending is not None and pending.confirm is not None:
            if YES.match(text):
                return Decision(calls=[pending.confirm])
            if NO.match(text):
                return Decision("Okay, I won't go ahead with that. What else can I do for you?")
        readback = self.read_back_pending(items)
        if readback is not None:
            name, args, flag = readback
            if YES.match(text):
                return Decision(calls=[(name, {**args, flag: True})])
            if NO.match(text):
                return Decision("Okay, I won't go ahead with that. What else can I do for you?")
        if pending is not None and pending.ask is not None:
            more = self.continue_ask(pending.ask, text)
            if more is not None:
                return more
        best = self.route(text, transfers)
        if best is None and not transfers:
            best = self.only_fit(text)
        if best is None:
            if pending is not None and pending.ask is not None:
                return self.ask(*pending.ask, again=True)
            return self.not_understood(text)
        if best.startswith("transfer_to_"):
            desk = best[len("transfer_to_") :]
            where = "the front desk" if desk == TRIAGE else desk
            return Decision(f"Let me transfer you to {where}.", calls=[(best, {})])
        filled = fill(text, self.params(best))
        if filled.missing:
            return self.ask(best, filled.args, filled.missing[0].name)
        return self.ready(best, filled.args)

    def not_understood(self, text: str) -> Decision:
        desks = sorted(
            "the front desk" if n == f"transfer_to_{TRIAGE}" else n[len("transfer_to_") :]
            for n in self.schemas
            if n.startswith("transfer_to_")
        )
        offer = f" I can connect you with {', '.join(desks)}." if desks else ""
        if BYE.search(text):
            return Decision("Thank you for calling. Goodbye!")
        if GREET.match(text):
            return Decision(f"Hello! How can I help?{offer}")
        return Decision(f"Sorry, I didn't understand that.{offer}")

    # -- routing --------------------------------------------------------------------------

    def route(self, text: str, transfers: bool) -> str | None:
        """The tool whose name, description (or desk topics) best match the caller's words; on
        a tie the desk's own tool, which does the work, beats a transfer."""
        said = set(words(text))
        if BYE.search(text):
            said.add("goodbye")
        if STATUS.search(text):
            said.add("status")
        lower = " ".join(re.findall(r"[a-z0-9']+", text.lower()))
        vocabs, df = self.vocabs(transfers)
        best: tuple[tuple[float, int], str] | None = None
        for order, (name, (weights, phrases)) in enumerate(vocabs.items()):
            score = sum(weights[w] / df[w] ** 0.5 for w in said if w in weights)
            score += sum(v for p, v in phrases.items() if re.search(rf"\b{re.escape(p)}\b", lower))
            if score <= 0:
                continue
            if name.startswith("transfer_to_"):
                score -= 0.25  # doing beats transferring on a near tie
            if best is None or (score, -order) > best[0]:
                best = ((score, -order), name)
        return best[1] if best else None

    def vocabs(self, transfers: bool) -> tuple[dict[str, Any], dict[str, int]]:
        """Each candidate's vocabulary, and in how many candidates each word is (a word every
        tool has tells little)."""
        if transfers not in self._vocabs:
            vocabs = {
                name: _vocab(schema, self.params(name))
                for name, schema in self.schemas.items()
                if transfers or not name.startswith("transfer_to_")
            }
            df: dict[str, int] = {}
            for weights, _ in vocabs.values():
                for w in weights:
                    df[w] = df.get(w, 0) + 1
            self._vocabs[transfers] = (vocabs, df)
        return self._vocabs[transfers]

    def only_fit(self, text: str) -> str | None:
        """Just transferred here for these words, none of which name a tool: the one tool
        whose required arguments the words fill, if exactly one does ("rain in Rio")."""
        fits = []
        for name in self.schemas:
            if name.startswith("transfer_to_"):
                continue
            params = self.params(name)
            filled = fill(text, params)
            if not filled.missing and any(p.required and p.name in filled.args for p in params):
                fits.append(name)
        return fits[0] if len(fits) == 1 else None

    # -- arguments, questions and confirmations ---------------------------------------------

    def ask(self, tool: str, args: dict[str, Any], missing: str, again: bool = False) -> Decision:
        param = next(p for p in self.params(tool) if p.name == missing)
        described = param.description.strip().rstrip(".?")
        if "boolean" in param.types and len(param.types) == 1:
            question = f"Do you want {param.label}?"
        elif described.lower().startswith("how "):
            question = f"{described[0].upper()}{described[1:]}?"
        elif param.enum and len(param.enum) <= 5:
            choices = [str(e) for e in param.enum]
            listed = (
                f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
            )
            question = f"Which {param.label} do you mean: {listed}?"
        else:
            question = f"Which {param.label} do you mean?"
        if again:
            question = f"Sorry, I didn't catch that. {question}"
        return Decision(question, ask=(tool, args, missing))

    def continue_ask(self, asked: tuple[str, dict[str, Any], str], text: str) -> Decision | None:
        """The caller answering "Which ... do you mean?": fill what is still missing."""
        tool, args, missing = asked
        if tool not in self.schemas:
            return None
        rest = [p for p in self.params(tool) if p.name not in args]
        new = fill(text, rest, reply_to=missing).args
        if not new:
            return None
        merged = {**args, **new}
        still = [
            p
            for p in self.params(tool)
            if p.required and p.name not in merged and not p.is_confirmation
        ]
        if still:
            return self.ask(tool, merged, still[0].name)
        return self.ready(tool, merged)

    def ready(self, tool: str, args: dict[str, Any]) -> Decision:
        """Every required argument is known: call it, unless it must be confirmed first."""
        flag = next((p.name for p in self.params(tool) if p.is_confirmation), None)
        if flag is not None:
            # The tool reads back what it would do and does nothing until confirmed=true.
            return Decision(calls=[(tool, {**args, flag: False})])
        if tool in self.critical:
            return Decision(self.confirm_question(tool, args), confirm=(tool, args))
        return Decision(calls=[(tool, args)])

    def confirm_question(self, tool: str, args: dict[str, Any]) -> str:
        what = re.split(
            r"(?<=[.!?])\s|:\s|\n", (self.schemas[tool].get("description") or "").strip()
        )[0]
        what = what.rstrip(".!? ") or tool.replace("_", " ")
        what = re.sub(r"\bthe caller's\b", "your", what, flags=re.I)
        what = re.sub(r"\bthe caller\b", "you", what, flags=re.I)
        labels = {p.name: p.label for p in self.params(tool)}
        details = "".join(f", {labels.get(k, k)} {v}" for k, v in args.items())
        return f"Just to confirm: {what[0].lower()}{what[1:]}{details}. Shall I go ahead?"

    def pending(self, items: list[Any], depth: int) -> Decision | None:
        """What we asked in our last words, if the caller is now answering it: the question
        is worked out again from the caller's words before it and must be word for word the
        one we said."""
        if depth >= MAX_DEPTH or len(items) < 3:
            return None
        j = len(items) - 2
        ours = items[j]
        if ours.type != "message" or ours.role != "assistant" or not ours.text_content:
            return None
        users = [n for n in range(j) if items[n].type == "message" and items[n].role == "user"]
        if not users:
            return None
        k = users[-1]
        prior = items[k].text_content or ""
        for transfers in (True, False):
            d = self.answer(prior, items[: k + 1], transfers, depth + 1)
            if (d.ask or d.confirm) and _same(d.say, ours.text_content):
                return d
        return None

    def read_back_pending(self, items: list[Any]) -> tuple[str, dict[str, Any], str] | None:
        """The tool called unconfirmed since the caller last spoke, whose read-back the caller
        is answering now: (tool, arguments, name of its confirmation flag)."""
        failed: set[str] = set()
        for item in reversed(items[:-1]):
            if item.type == "message" and item.role == "user":
                return None
            if item.type == "function_call_output":
                if item.is_error:
                    failed.add(item.call_id)
            elif item.type == "function_call":
                if item.name not in self.schemas or item.call_id in failed:
                    return None
                flag = next((p.name for p in self.params(item.name) if p.is_confirmation), None)
                try:
                    args = json.loads(item.arguments or "{}")
                except ValueError:
                    return None
                if flag is None or not isinstance(args, dict) or args.get(flag):
                    return None
                return item.name, {k: v for k, v in args.items() if k != flag}, flag
        return None


def _vocab(
    schema: dict[str, Any], params: list[Param]
) -> tuple[dict[str, float], dict[str, float]]:
    """(word -> weight, phrase -> weight) a tool is known by."""
    name, description = schema["name"], schema.get("description") or ""
    weights: dict[str, float] = {}
    phrases: dict[str, float] = {}

    def add(text: str, weight: float) -> None:
        for w in words(text):
            weights[w] = max(weights.get(w, 0.0), weight)

    if name.startswith("transfer_to_"):
        m = TRANSFER.match(description)
        about, topics = (m.group(1), m.group(2) or "") if m else (description, "")
        add(name[len("transfer_to_") :].replace("_", " "), 3)
        for keyword in (k.strip().lower() for k in topics.split(",")):
            if " " in keyword or "-" in keyword:
                phrases[" ".join(re.findall(r"[a-z0-9']+", keyword))] = 2
            add(keyword, 2)
        add(about, 1)
    else:
        add(name.replace("_", " "), 2)
        add(description, 1)
        # What a parameter can be is what the tool is about: "oil change" books a service.
        for p in params:
            add(" ".join(str(e) for e in p.enum), 1.5)
            add(p.description, 0.5)
    return weights, phrases


def _same(a: str | None, b: str | None) -> bool:
    def norm(s: str | None) -> str:
        return " ".join((s or "").lower().split())

    return norm(a) == norm(b)


def read_back(items: list[Any]) -> str | None:
    """What to say about the results of the tools just called."""
    outs = []
    for item in reversed(items):
        if item.type == "function_call_output":
            outs.append(item)
        elif item.type != "function_call":
            break
    said = [s for s in (_spoken(o.output or "", o.is_error) for o in reversed(outs)) if s]
    return " ".join(dict.fromkeys(said)) or None


def _spoken(text: str, is_error: bool) -> str | None:
    text = text.strip()
    if not text:
        return None
    if is_error:
        # Our patterns hand the model caller-safe sentences; anything else stays unsaid.
        return text if _safe_sentence(text) else APOLOGY
    try:
        data = json.loads(text)
    except ValueError:
        return APOLOGY if re.match(r"^\s*(error|traceback|exception)\b", text, re.I) else text[:400]
    if isinstance(data, dict):
        if data.get("error"):
            return APOLOGY
        for key in ("summary", "message", "answer", "text"):
            if isinstance(data.get(key), str):
                return data[key][:400]
        return "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in list(data.items())[:6])
    if isinstance(data, list):
        return "; ".join(str(x) for x in data[:5]) or "Nothing to report."
    return str(data)


def _safe_sentence(text: str) -> bool:
    return (
        len(text) <= 300
        and " " in text
        and text[:1].isupper()
        and not RAW_ERROR.search(text)
        and text.rstrip().endswith((".", "?", "!"))
    )
