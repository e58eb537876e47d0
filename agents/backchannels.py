"""Backchannels: what a caller says to mean "go on" ("mm-hm", "uh-huh", "okay"), and the fillers
an STT may write for a voiced sound ("uh", "hmm"). Said alone they are not an interruption.

The list is a setting (``FRONTDESK_BACKCHANNELS``, comma-separated), else the profile's
``[voice] backchannels``, else ``DEFAULT``; docs/deploy.md. Matching ignores case, punctuation
and hyphens ("Mm-hmm." is "mm hmm"), and a transcript is a backchannel when every word of it
belongs to a listed phrase ("okay okay", "yeah sure").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

DEFAULT = (
    "mm-hm", "mm-hmm", "mhm", "mm", "hmm", "uh-huh", "uh huh", "yeah", "yep", "yes",
    "okay", "ok", "right", "sure", "alright", "all right", "got it", "i see",
    "uh", "um", "er", "ah", "oh",
)  # fmt: skip

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def words_of(text: str) -> list[str]:
    """Lower-case words; hyphens and punctuation split ("Mm-hmm." -> ["mm", "hmm"])."""
    return _WORD.findall(text.lower())


class Backchannels:
    def __init__(self, phrases: Iterable[str] = DEFAULT) -> None:
        self.phrases = tuple(p for p in phrases if words_of(p))
        self._shapes = {tuple(words_of(p)) for p in self.phrases}
        self._longest = max((len(s) for s in self._shapes), default=0)

    def words(self, text: str) -> int:
        """How many words of ``text`` are not part of a backchannel phrase."""
        words = words_of(text)
        # fewest words left over, covering the rest with listed phrases (a small DP)
        best = [0] * (len(words) + 1)
        for i in range(len(words) - 1, -1, -1):
            best[i] = best[i + 1] + 1
            for n in range(1, min(self._longest, len(words) - i) + 1):
                if tuple(words[i : i + n]) in self._shapes:
                    best[i] = min(best[i], best[i + n])
        return best[0]

    def only(self, text: str) -> bool:
        """``text`` has words, and all of them are backchannels."""
        return bool(words_of(text)) and self.words(text) == 0


def configured(settings: Any, profile: Any) -> Backchannels:
    """The setting, else the profile's ``[voice] backchannels``, else ``DEFAULT`` (the
    environment beats the profile, as for every setting)."""
    raw = getattr(settings, "backchannels", None)
    if raw is not None:
        return Backchannels(p.strip() for p in raw.split(",") if p.strip())
    listed = getattr(getattr(profile, "voice", None), "backchannels", None)
    return Backchannels(listed if listed is not None else DEFAULT)


__all__ = ["DEFAULT", "Backchannels", "configured", "words_of"]
