"""Wording of user-facing messages: counts (``1 branch``, ``2 branches``) and a "did you mean"
for a misspelt key."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["FALLBACK_LABEL", "did_you_mean", "fallback_label_wording", "ordinal", "plural"]

#: How ``rizz diff`` and ``rizz view`` name a label the judge's deterministic fallback made
#: (:func:`rizz.engine.judge.fallback_label`) with no model reply to read, when they know neither
#: the words it read nor the run's ``routing.judge`` (:func:`fallback_label_wording` when they do).
FALLBACK_LABEL = "made deterministically from the input's words: no model reply (routing.judge local asks none; else the reply was empty)"

#: What the fallback reads under each ``routing.fallback_application``.
_FALLBACK_SOURCES = {
    "content_words": "the content words of the instruction and the whole input",
    "first_line": "the input's task line (its instruction, else its first line)",
}


def fallback_label_wording(fallback_application: str | None, judge: str | None = None) -> str:
    """How ``rizz diff`` and ``rizz view`` say where a label came from when the judge's
    deterministic fallback made it with no model reply to read (``label F/A`` and this), by
    what happened under the run's ``routing.judge``: under ``local`` no model is asked (the
    deterministic label is the chosen path, not a fallback); under ``always`` or
    ``when_uncertain`` the model was asked and its reply was empty. The words the fallback read
    are named by the run's ``routing.fallback_application``. None or an unknown value of
    either: the general wording (:data:`FALLBACK_LABEL`, or its words).

    Example:
        >>> fallback_label_wording("first_line", "local")
        "made from the input's task line (its instruction, else its first line) with no model call (routing.judge: local)"
        >>> fallback_label_wording("content_words", "when_uncertain")
        "made by the judge's fallback from the content words of the instruction and the whole input: the model's reply was empty"
    """
    source = _FALLBACK_SOURCES.get(fallback_application or "", "the input's words")
    if judge == "local":
        return f"made from {source} with no model call (routing.judge: local)"
    if judge in ("always", "when_uncertain"):
        return f"made by the judge's fallback from {source}: the model's reply was empty"
    return FALLBACK_LABEL.replace("the input's words", source, 1)


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"{n} {word}"`` when ``n == 1``, else ``"{n} {words}"`` (default ``word + "s"``).

    Example:
        >>> plural(1, "branch", "branches"), plural(3, "step"), plural(0, "policy", "policies")
        ('1 branch', '3 steps', '0 policies')
    """
    return f"{n} {word}" if n == 1 else f"{n} {words if words is not None else word + 's'}"


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``, ... (English ordinal of ``n ≥ 0``).

    Example:
        >>> [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 102, 111)]
        ['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '102nd', '111th']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def did_you_mean(key: str, allowed: Iterable[str], cutoff: float = 0.6) -> str:
    """``"; did you mean `x`?"`` for the closest of ``allowed`` to a misspelt ``key``
    (:func:`difflib.get_close_matches`, its default ``cutoff`` 0.6: the similarity ratio in
    [0, 1] a match needs), else ``""``.

    Example:
        >>> did_you_mean("snap_treshold", ["snap_threshold", "top_k"]), did_you_mean("zzz", ["top_k"])
        ('; did you mean `snap_threshold`?', '')
    """
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=cutoff)
    return f"; did you mean `{close[0]}`?" if close else ""
