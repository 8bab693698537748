"""Answer extraction by expected output shape (§1: "an extractor takes the final
answer ŷ_t from its raw text").

A verbose model is scored on its answer, not on its preamble: ``"In 2019 there were 3 ...
The answer is 42"`` with shape ``number`` gives ``"42"``; ``"The stance is B. hawkish"`` with
shape ``letter`` gives ``"B"``.

When nothing of the expected shape is found, ``parsed`` is False and ``answer`` falls back to
the ``span`` reading of the text (first non-empty line with any ``Answer:`` or ``The answer
is`` prefix removed), so
a verifier can still score it (e.g. NumGLUE-cm has non-numeric references such as ``"June"``;
for such an item, whose reference is not of its shape either, ``verify`` calls a non-empty
reading parsed).
A wrong answer with ``parsed=True`` is a *substantive* failure (§6).

Two rules hold for every shape:

* reasoning is never the answer: ``<think>…</think>`` / ``<thinking>…</thinking>`` blocks
  (also unclosed, or with only the closing tag) are removed first
  (:func:`rizz.adapters.models.reasoning.strip_reasoning`);
* a clear leading answer wins over later mentions: a reply that *begins* with a choice
  letter and punctuation (``B. …``, ``(B)``, ``Answer: B.``), with a first line that is a
  bare number (``42``, ``$12.``, ``Answer: 12``), with an ``Answer:`` line (span), or with a
  JSON value (json) is read from that beginning, whatever the rest says. ``label`` reads
  the first line anyway; ``code`` keeps "the first block that defines something" (a leading
  block that defines nothing is not an answer to a coding task).
"""

from __future__ import annotations

import json
import re

import attrs

from rizz.adapters.models.reasoning import strip_reasoning
from rizz.formats.streams import SHAPES as STREAM_SHAPES

__all__ = ["SHAPES", "Extraction", "extract_answer"]

#: The output shapes of the stream format (one definition: ``rizz.formats.streams.SHAPES``).
SHAPES: tuple[str, ...] = STREAM_SHAPES


@attrs.frozen
class Extraction:
    """The final answer taken from a model's raw text.

    Attributes:
      answer: the extracted answer (str; ``""`` only when the text is empty).
      parsed: False when nothing of the expected shape was found.
    """

    answer: str
    parsed: bool


# "Answer: B", "Final answer - (B)", "The answer is **B**", "Stance: B", "态度：B"
# (C-STANCE prompts end in 态度 = stance; 答案 = answer, 选项 = option, 立场 = position)
_KEYWORDS = r"(?i:final\s+answer|answer|choice|option|stance|label|prediction|答案|态度|选项|立场)"
_LETTER_AFTER_KEYWORD = re.compile(
    _KEYWORDS + r"\s*(?i:is|was|would\s+be|should\s+be)?\s*[:：=\-]?\s*[\*\"'`]*\(?([A-E])\)?[\*\"'`]*"
    r"(?![A-Za-z0-9])"
)
# "B", "B.", "(B)", "B)", "B: hawkish", "B - hawkish", "B\nBecause ..." at the start of the text;
# not an abbreviation that starts with a letter and a dot ("E.g., ... the answer is C", "A.M.")
_LEADING_LETTER = re.compile(r"^[\*\"'`]*\(?([A-E])\)?[\*\"'`]*(?=$|\.(?![A-Za-z])|[):：,\n]|\s+[-–—:])")
# "The stance is B." / "is (C)," (a letter followed by punctuation or the end)
# "Answer: B.", "**Final answer:** (C)", "The answer is B." at the very start of the reply
_LEADING_KEYWORD_LETTER = re.compile(
    r"^[\*#>\s]*(?i:the\s+)?(?i:correct\s+|final\s+|right\s+|best\s+)?" + _KEYWORDS
    + r"[\*\s]*(?i:is|was|would\s+be|should\s+be)?\s*[:：=\-]?\s*[\*\"'`]*\(?([A-E])\)?[\*\"'`]*"
    r"(?=$|[.):：,;!\n]|\s+[-–—:])"
)
_IS_LETTER = re.compile(r"(?i:\bis)\s+[\*\"'`]*\(?([A-E])\)?[\*\"'`]*(?=$|[.,;:)\n])")
_PAREN_LETTER = re.compile(r"\(([A-E])\)")
_LONE_LETTER_LINE = re.compile(r"^\s*[\*\"'`]*\(?([A-E])\)?[\*\"'`]*[.)]?\s*$", re.M)

# 1,234 | 1234 | -3.5 | .5 | 1e-3 (thousands separators only in groups of three)
_NUMBER = r"[-−]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER_RE = re.compile(r"(?<![\w.])" + _NUMBER)
_NUMBER_AFTER_KEYWORD = re.compile(
    r"(?i:answer|result|total|solution)\s*(?i:is|was|would\s+be|should\s+be|equals|=|:)\s*"
    r"[^\d\n.−-]{0,12}?(" + _NUMBER + r")"
)
_BOXED = re.compile(r"\\boxed\{\s*[^\d\-−.]*?(" + _NUMBER + r")")
# a first line that is only a number: "42", "**42**", "$12.", "Answer: 12", "12 dollars"
_LEADING_NUMBER = re.compile(
    r"^[\*#>\s]*(?:(?i:final\s+answer|answer|result|total)\s*[\*]*\s*[:：=]\s*)?[\*\s]*"
    r"[$€£¥]?\s*(" + _NUMBER + r")\s*(?:%|[A-Za-z]+)?[\*\s]*[.!]?\s*$"
)
_HASHES = re.compile(r"####\s*[^\d\-−.]*?(" + _NUMBER + r")")

# "Answer: Paris", "**Final answer:** Paris", "The answer is Paris", "The short answer is: Paris"
_ANSWER_IS = r"(?i:the\s+)?(?i:final\s+|short\s+|correct\s+)?(?i:answer)\s+(?i:is|was)\b\s*[\*]*\s*[:：]?"
_PREFIX = re.compile(
    r"^\s*[\*#>\s]*(?:(?i:final\s+answer|short\s+answer|answer|label|output|response)\s*[\*]*\s*[:：]|"
    + _ANSWER_IS + r")\s*[\*]*\s*"
)
_ANSWER_LINE = re.compile(r"^\s*[\*#>\s]*(?:(?i:final\s+answer|answer)\s*[\*]*\s*[:：]|" + _ANSWER_IS + ")", re.M)
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line, count=1).strip().strip("*").strip()


def _span(text: str) -> str:
    """Last ``Answer:`` / ``The answer is`` line if any, else the first non-empty line; prefix removed."""
    answer_lines = [m.start() for m in _ANSWER_LINE.finditer(text)]
    first = _first_line(text)
    if answer_lines and _ANSWER_LINE.match(first) and _strip_prefix(first):
        return _strip_prefix(first)  # a leading "Answer: X" line is the answer (§6)
    if answer_lines:
        rest = text[answer_lines[-1]:].lstrip()  # the match may start on an earlier blank line
        head, _, tail = rest.partition("\n")
        found = _strip_prefix(head)
        # "Answer:\nParis" puts the answer on the next line
        return found if found else _first_line(tail)
    return _strip_prefix(_first_line(text))


def _letter(text: str) -> str | None:
    stripped = text.strip()
    for leading in (_LEADING_LETTER, _LEADING_KEYWORD_LETTER):  # a clear leading answer wins
        m = leading.match(stripped)
        if m:
            return m.group(1)
    matches = list(_LETTER_AFTER_KEYWORD.finditer(stripped))
    if matches:
        return matches[-1].group(1)
    lead = _LEADING_LETTER.match(stripped)
    if lead:
        return lead.group(1)
    for pattern in (_IS_LETTER, _PAREN_LETTER, _LONE_LETTER_LINE):
        matches = list(pattern.finditer(stripped))
        if matches:
            return matches[-1].group(1)
    return None


def _clean_number(token: str) -> str:
    token = token.replace(",", "").replace("−", "-")
    if token.startswith("-."):
        token = "-0" + token[1:]
    elif token.startswith("."):
        token = "0" + token
    return token


def _number(text: str) -> str | None:
    lead = _LEADING_NUMBER.match(_first_line(text))
    if lead:
        return _clean_number(lead.group(1))
    for pattern in (_BOXED, _HASHES, _NUMBER_AFTER_KEYWORD):
        matches = list(pattern.finditer(text))
        if matches:
            return _clean_number(matches[-1].group(1))
    matches = list(_NUMBER_RE.finditer(text))
    if matches:
        return _clean_number(matches[-1].group(0))
    return None


def _code(text: str) -> str:
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    if not blocks:
        return text.strip("\n")
    for lang, body in blocks:  # the first block that defines something
        if lang in ("", "python", "py", "python3") and re.search(r"^\s*(def|class)\s", body, re.M):
            return body.strip("\n")
    return blocks[0][1].strip("\n")


def _json(text: str) -> str | None:
    decoder = json.JSONDecoder()
    fenced = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("json", "")]
    head = text.lstrip()
    if head[:1] in ("{", "["):  # a reply that begins with JSON is answered by it
        try:
            value, _ = decoder.raw_decode(head)
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except json.JSONDecodeError:
            pass
    for candidate in [*fenced, text]:
        for match in re.finditer(r"[\[{]", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except json.JSONDecodeError:
                continue
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return None


def extract_answer(raw: str, shape: str | None) -> Extraction:
    """Take the final answer of the expected shape from a model's raw text.

    Args:
      raw: the model's raw output text (reasoning blocks are removed first).
      shape: one of ``SHAPES`` or None (None reads the whole text, like ``text``):
        - ``letter``: a choice letter A–E ("B", "(B)", "B.", "Answer: B", "The stance is B.").
        - ``number``: ``\\boxed{x}``, ``#### x``, "the answer is x", else the last number;
          thousands commas removed, units/currency dropped ("$1,200.50" → "1200.50").
        - ``label``: the first non-empty line, trimmed (an "Answer:" prefix removed).
        - ``span``: the last "Answer:" / "The answer is" line if any (the answer may be on the
          next line), else the first non-empty line, prefix removed.
        - ``text``: the whole text, trimmed.
        - ``code``: the first fenced block that defines a function/class (else the first fenced
          block; an unclosed fence runs to the end), or the whole text.
        - ``json``: the first valid JSON object/array (fenced ``json`` blocks first),
          re-serialised canonically (sorted keys, no spaces, UTF-8 kept).

    Returns:
      ``Extraction(answer, parsed)``; when the shape is not found, ``parsed`` is False and
      ``answer`` is the ``span`` reading of the text.

    Raises:
      ValueError: unknown shape (the message names the allowed ones).

    Examples:
      >>> extract_answer("In 2019 there were 3 cats. The answer is 42.", "number")
      Extraction(answer='42', parsed=True)
      >>> extract_answer("The stance is B. hawkish", "letter")
      Extraction(answer='B', parsed=True)
    """
    if shape is not None and shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; allowed: {', '.join(SHAPES)} or None")
    text = strip_reasoning(raw if isinstance(raw, str) else str(raw))
    if shape in (None, "text"):
        answer = text.strip()
        return Extraction(answer, bool(answer))
    if shape in ("label", "span"):
        answer = _span(text) if shape == "span" else _strip_prefix(_first_line(text))
        return Extraction(answer, bool(answer))
    if shape == "code":
        answer = _code(text)
        return Extraction(answer, bool(answer.strip()))
    found = {"letter": _letter, "number": _number, "json": _json}[shape](text)
    if found is None:
        return Extraction(_span(text), False)
    return Extraction(found, True)
