"""Rule distillation: verified successes -> candidate IF-THEN procedural rules.

RIZZ section 6, rule promotion: "successful batches are distilled (by the LLM) into
candidate IF-THEN rules; a rule becomes active only after repeated verified usefulness".
This module only proposes candidates; promotion and counters live in the core.

The model is asked for lines ``IF <condition> THEN <strategy>``. :func:`parse_rules` reads
them robustly: bullets, numbering, ``Rule 1:`` prefixes, markdown emphasis, quotes, a comma
or colon before THEN, and an IF and its THEN split over two lines are all accepted.
Garbage gives ``()``; model output never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from rizz.adapters.models.base import Generation, Message, ModelBackend
from rizz.adapters.models.reasoning import strip_reasoning

__all__ = ["CandidateRule", "DistillResult", "distill_rules", "parse_rules", "distill_messages"]

_MIN_PART_CHARS = 3
_MAX_PART_CHARS = 300
_MAX_EXAMPLE_CHARS = 600  # per input / per answer shown to the model
_MAX_EXAMPLES = 8
_TOKENS_PER_RULE = 60  # answer budget per requested rule, tokens
# One worked example (a different task kind), so small models see the expected form.
_SHOT_USER = (
    "Task kind: solve-math / unit-conversion.\nThese answers were verified correct:\n\n"
    "Example 1:\nInput: How many centimetres are in 3.5 metres?\nCorrect answer: 350\n\nRules:"
)
_SHOT_ASSISTANT = (
    "IF the question converts metres to centimetres THEN multiply by 100\n"
    "IF the answer must be a number THEN give only the number, without units"
)


def _non_empty(_inst: object, attribute: attrs.Attribute, value: str) -> None:
    if not value.strip():
        raise ValueError(f"{attribute.name} must be non-empty")


@attrs.frozen
class CandidateRule:
    """One proposed procedural rule ``IF antecedent THEN strategy`` (not yet active)."""

    antecedent: str = attrs.field(validator=_non_empty)
    strategy: str = attrs.field(validator=_non_empty)


@attrs.frozen
class DistillResult:
    """Parsed rules (at most ``max_rules``, deduplicated) and the call that produced them.

    ``generation`` is ``None`` when no call was made (no examples).
    """

    rules: tuple[CandidateRule, ...]
    generation: Generation | None


_PREFIX = re.compile(
    r"^\s*(?:[-*\u2022>#]+\s*|\(?\d+[.):]\s*|\(?[a-z][.)]\s+)*"  # bullets, numbering
    r"(?:rule\s*\d*\s*[:.)-]\s*)?"  # "Rule 2:"
    r"[\"'\u201c\u2018]*",  # opening quotes
    re.IGNORECASE,
)
_RULE = re.compile(
    r"^IF\b[\s:,]*(?P<ante>.+?)[\s,;:]*\bTHEN\b[\s:,]*(?P<strat>.+)$",
    re.IGNORECASE | re.DOTALL,
)


def _tidy(part: str) -> str:
    part = re.sub(r"[*_`]+", "", part)
    part = re.sub(r"\s+", " ", part).strip()
    part = part.strip("\"'\u201c\u201d\u2018\u2019 ")
    return part.rstrip(" .;,")


def parse_rules(raw: str, max_rules: int | None = None) -> tuple[CandidateRule, ...]:
    """All well-formed ``IF ... THEN ...`` rules in ``raw``, in order, deduplicated.

    Parts shorter than 3 or longer than 300 characters are dropped.
    """
    lines = [_PREFIX.sub("", re.sub(r"[*_`]+", "", ln)) for ln in raw.splitlines()]
    # Join an IF line with a following THEN line ("IF x\nTHEN y").
    merged: list[str] = []
    for line in lines:
        if (
            merged
            and re.match(r"^\s*THEN\b", line, re.IGNORECASE)
            and re.match(r"^\s*IF\b", merged[-1], re.IGNORECASE)
            and not re.search(r"\bTHEN\b", merged[-1], re.IGNORECASE)
        ):
            merged[-1] = merged[-1] + " " + line
        else:
            merged.append(line)
    rules: list[CandidateRule] = []
    seen: set[tuple[str, str]] = set()
    for line in merged:
        m = _RULE.match(line.strip())
        if not m:
            continue
        ante, strat = _tidy(m.group("ante")), _tidy(m.group("strat"))
        if not (_MIN_PART_CHARS <= len(ante) <= _MAX_PART_CHARS):
            continue
        if not (_MIN_PART_CHARS <= len(strat) <= _MAX_PART_CHARS):
            continue
        key = (ante.lower(), strat.lower())
        if key in seen:
            continue
        seen.add(key)
        rules.append(CandidateRule(ante, strat))
        if max_rules is not None and len(rules) >= max_rules:
            break
    return tuple(rules)


def _clip(text: str, limit: int = _MAX_EXAMPLE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def distill_messages(
    examples: Sequence[tuple[str, str]], *, function: str, application: str, max_rules: int
) -> list[Message]:
    """The distillation prompt for up to 8 ``(input, verified answer)`` pairs, one-shot."""
    shown = "\n\n".join(
        f"Example {i}:\nInput: {_clip(x)}\nCorrect answer: {_clip(y)}"
        for i, (x, y) in enumerate(examples[:_MAX_EXAMPLES], 1)
    )
    system = (
        "You write short, general IF-THEN rules that help solve future tasks of the same kind. "
        f"Write at most {max_rules} rules, one per line, each exactly in the form: "
        "IF <when the rule applies> THEN <what to do>. No other text."
    )
    user = (
        f"Task kind: {function} / {application}.\n"
        f"These answers were verified correct:\n\n{shown}\n\nRules:"
    )
    return [
        Message("system", system),
        Message("user", _SHOT_USER),
        Message("assistant", _SHOT_ASSISTANT),
        Message("user", user),
    ]


def distill_rules(
    model: ModelBackend,
    examples: Sequence[tuple[str, str]],
    *,
    function: str,
    application: str,
    max_rules: int = 3,
) -> DistillResult:
    """Ask ``model`` for up to ``max_rules`` IF-THEN rules from verified successes.

    Args:
        model: any :class:`~rizz.adapters.models.base.ModelBackend`.
        examples: ``(input, verified answer)`` pairs; the first 8 are shown, each part
            clipped to 600 characters.
        function, application: the branch label (section 2), named in the prompt.
        max_rules: at most this many rules are returned (>= 1).

    Returns:
        :class:`DistillResult`; ``rules == ()`` when the model wrote nothing parseable, and
        no call is made for empty ``examples``.

    Raises:
        ValueError: ``max_rules < 1``. Backend errors (network, context) propagate.
    """
    if max_rules < 1:
        raise ValueError(f"max_rules must be >= 1, got {max_rules}")
    if not examples:
        return DistillResult((), None)
    gen = model.generate(
        distill_messages(examples, function=function, application=application,
                         max_rules=max_rules),
        max_tokens=_TOKENS_PER_RULE * max_rules,
    )
    return DistillResult(parse_rules(strip_reasoning(gen.text), max_rules), gen)
