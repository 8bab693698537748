"""LLM-judge labelling: propose the hierarchical label (function, application) of an input.

RIZZ section 3 step 1: "the LLM judge proposes a label (f, a) for an input that asks
something". Labels are lowercase, hyphen-delimited ASCII tokens (the router's Jaccard
overlap splits on hyphens), e.g. function ``classify`` / application
``stance-detection-chinese``.

Small local models often answer malformed. :func:`label_input` therefore

1. asks for one line of JSON ``{"function": ..., "application": ...}``;
2. repairs what comes back: the first ``{...}`` (closing a missing brace, single quotes),
   else ``function: x`` / ``application: y`` lines; then strips junk, hyphenates, drops
   repeated words (small models loop: ``business-business-...``), keeps at most 3 function
   and 5 application words, and maps synonyms of functions (``classification`` ->
   ``classify``);
3. falls back, per missing part, to :func:`fallback_label`, a deterministic label from the
   text (function from keywords and the expected output shape, application from the top
   content words of the instruction/input, or under the policy's
   ``routing.fallback_application: first_line`` of the instruction, else the input's first
   line). The result is never an empty label.

:func:`read_label` is steps 2–3 on a reply already in hand: a logged ``judge.raw`` relabels
without a model call (``benchmarks/judge_probe.py --from-run``).
"""

from __future__ import annotations

import collections
import json
import re
import unicodedata

import attrs

from rizz.adapters.models.base import Generation, Message, ModelBackend
from rizz.adapters.models.reasoning import strip_reasoning

__all__ = [
    "FALLBACK_APPLICATIONS",
    "FUNCTIONS",
    "JudgeLabel",
    "label_input",
    "parse_label",
    "read_label",
    "fallback_label",
    "hyphenate",
    "judge_messages",
]

# Canonical functions named in RIZZ section 2 and this project's benchmarks.
FUNCTIONS = (
    "classify", "summarize", "answer-question", "write-code", "complete-code", "solve-math",
    "simplify-text", "translate", "extract-information", "generate-text",
)
_SYNONYMS = {
    "classification": "classify", "categorize": "classify", "categorization": "classify",
    "label": "classify", "labeling": "classify", "sentiment-analysis": "classify",
    "stance-detection": "classify", "text-classification": "classify",
    "summarization": "summarize", "summarise": "summarize", "summary": "summarize",
    "question-answering": "answer-question", "qa": "answer-question", "answer": "answer-question",
    "answering": "answer-question", "answer-questions": "answer-question",
    "code-generation": "write-code", "coding": "write-code", "code": "write-code",
    "programming": "write-code", "generate-code": "write-code",
    "code-completion": "complete-code", "math": "solve-math", "calculate": "solve-math",
    "arithmetic": "solve-math", "math-problem": "solve-math", "solve": "solve-math",
    "simplify": "simplify-text", "simplification": "simplify-text",
    "text-simplification": "simplify-text", "translation": "translate",
    "extract": "extract-information", "extraction": "extract-information",
    "information-extraction": "extract-information", "generate": "generate-text",
    "generation": "generate-text", "text-generation": "generate-text", "write": "generate-text",
}
_PLACEHOLDERS = {
    "f", "a", "x", "y", "function", "application", "label", "none", "null", "unknown", "n-a",
    "na", "string", "str", "value", "task", "domain", "example", "the", "your-label",
}
_MAX_FUNCTION_TOKENS = 3
_MAX_APPLICATION_TOKENS = 5
_FALLBACK_APPLICATION_WORDS = 3
#: Sources of the fallback application (``routing.fallback_application``, rizz.core.policy).
FALLBACK_APPLICATIONS = ("content_words", "first_line")
_MAX_PROMPT_CHARS = 1200  # of the input shown to the judge (keeps a 135M model's call ~2 s)
_JUDGE_MAX_TOKENS = 40

_SYSTEM = (
    "You label tasks. Reply with one line of JSON and nothing else: "
    '{"function": "<F>", "application": "<A>"}. '
    "F says what the task asks for, one of: " + ", ".join(FUNCTIONS) + ". "
    "A names the domain and task in 2 to 4 lowercase words joined by hyphens, "
    "e.g. monetary-policy-stance, stance-detection-chinese, python-list-functions."
)
_SHOT_USER = "Instruction: Summarize the article in one sentence.\nInput: The city council voted"\
    " on Tuesday to expand the bus network..."
_SHOT_ASSISTANT = '{"function": "summarize", "application": "news-summarization"}'


@attrs.frozen
class JudgeLabel:
    """A proposed label and how it was obtained.

    Attributes:
        function: e.g. ``"classify"``; non-empty, ``[a-z0-9]+(-[a-z0-9]+)*``.
        application: e.g. ``"monetary-policy-stance"``; same form.
        raw: the model's raw text ("" when no model call was made).
        repaired: the raw text needed repair (not clean JSON with clean labels).
        fallback: at least one part came from :func:`fallback_label`.
        generation: the judge call, for token/cost accounting (``None``: no call).
    """

    function: str
    application: str
    raw: str
    repaired: bool
    fallback: bool
    generation: Generation | None = None


def hyphenate(text: str, max_tokens: int | None = None) -> str:
    """Lowercase ASCII hyphen-delimited label from free text ("" if nothing usable).

    >>> hyphenate("  Monetary Policy_Stance!! ")
    'monetary-policy-stance'
    """
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    tokens = re.findall(r"[a-z0-9]+", norm.lower())
    if max_tokens is not None:
        tokens = tokens[:max_tokens]
    return "-".join(tokens)


def _clean_function(value: str) -> str:
    label = hyphenate(value, _MAX_FUNCTION_TOKENS + 2)
    label = _SYNONYMS.get(label, label)
    if label in FUNCTIONS:
        return label
    for canon in FUNCTIONS:  # "classify-the-text" -> "classify"
        if label.startswith(canon + "-"):
            return canon
    first = label.split("-")[0] if label else ""
    if first in _SYNONYMS:
        return _SYNONYMS[first]
    label = "-".join(label.split("-")[:_MAX_FUNCTION_TOKENS])
    return "" if label in _PLACEHOLDERS or len(label) < 3 else label


def _clean_application(value: str) -> str:
    tokens = list(dict.fromkeys(hyphenate(value).split("-")))  # small models loop: a-a-a-...
    label = "-".join(tokens[:_MAX_APPLICATION_TOKENS])
    return "" if label in _PLACEHOLDERS or len(label) < 3 else label


_KV = r"""["']?{key}["']?\s*[:=]\s*["']?([^"'\n,{{}}]+)"""


def parse_label(raw: str) -> tuple[str, str, bool]:
    """Repair a judge answer into ``(function, application, repaired)``.

    Either part is ``""`` when it cannot be recovered. ``repaired`` is False only for a
    clean JSON object whose values were already canonical labels.
    """
    values: dict[str, str] = {}
    clean_json = False
    start = raw.find("{")
    if start >= 0:
        end = raw.find("}", start)
        blob = raw[start : end + 1] if end >= 0 else raw[start:].rstrip().rstrip(",") + "}"
        for candidate, strict in ((blob, True), (blob.replace("'", '"'), False)):
            try:
                obj = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(obj, dict):
                values = {str(k).lower(): str(v) for k, v in obj.items() if v is not None}
                clean_json = strict and end >= 0 and raw.strip() == blob
                break
    for key in ("function", "application"):
        if not values.get(key, "").strip():
            m = re.search(_KV.format(key=key), raw, flags=re.IGNORECASE)
            if m:
                values[key] = m.group(1)
    function = _clean_function(values.get("function", ""))
    application = _clean_application(values.get("application", ""))
    repaired = not (
        clean_json
        and function == values.get("function")
        and application == values.get("application")
    )
    return function, application, repaired


_STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto about as is
    are was were be been being am do does did doing have has had having it its this that these
    those there here which who whom whose what when where why how not no yes nor so than too
    very can could should would will shall may might must i me my we our you your he him his she
    her they them their one two also just only any all each every some such more most other
    own same both few many much over under again further once out up down off above below
    between through during before after while because until against among per via please
    following given text input output answer question questions task sentence sentences
    passage paragraph article document provided above below based using use write return
    response respond choose select option options correct best following one answer-question
    classify summarize summarise summary translate simplify solve calculate compute explain
    describe determine identify find give make tell say read consider let like well new detect
    complete finish implement fill def return self none true false import print elif lambda
    class pass toward towards within without upon whether""".split()
)
_FUNCTION_RULES: tuple[tuple[str, str], ...] = (
    ("complete-code", r"\b(complete|finish|fill in)\b.{0,30}\b(code|function|program|method)"),
    ("write-code", r"\b(write|implement|create|code)\b.{0,40}\b(function|program|script|class"
                   r"|method|code)\b|```|\bdef \w+\(|\bpython\b"),
    ("translate", r"\btranslat"),
    ("simplify-text", r"\bsimplif|\bplain (language|english)\b|easier to (read|understand)"),
    ("summarize", r"\bsummar|\btl;?dr\b|\bheadline\b"),
    ("classify", r"\bclassif|\bcategor|\bsentiment\b|\bstance\b|\bhawkish\b|\bdovish\b"
                 r"|\bpositive or negative\b|\bwhich (label|class|category)\b"),
    ("solve-math", r"\b(solve|calculate|compute|evaluate)\b|\bhow (many|much)\b"
                   r"|\d\s*[-+*/\u00d7\u00f7^]\s*\d"),
    ("extract-information", r"\bextract\b|\blist (all|the)\b"),
)
_SHAPE_FUNCTION = {
    "code": "write-code", "number": "solve-math", "label": "classify", "letter": "answer-question",
    "span": "answer-question", "json": "extract-information", "text": "generate-text",
}
_SCRIPTS = (
    ("chinese", r"[\u4e00-\u9fff]"), ("japanese", r"[\u3040-\u30ff]"),
    ("korean", r"[\uac00-\ud7af]"), ("russian", r"[\u0400-\u04ff]"), ("arabic", r"[\u0600-\u06ff]"),
)


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")


def fallback_label(text: str, *, instruction: str | None, shape: str | None,
                   fallback_application: str = "content_words") -> tuple[str, str]:
    """Deterministic ``(function, application)`` from the text alone; both non-empty.

    Function: the first keyword rule (code, translate, simplify, summarize, classify, math,
    extract) that matches the instruction + input (``"content_words"``) or the task line alone
    (``"first_line"``, below: a question that mentions translating is not a translation
    task), else the expected ``shape``
    (code -> write-code, number -> solve-math, label -> classify, letter/span ->
    answer-question, json -> extract-information, text -> generate-text), else
    ``answer-question``. Application: the 3 most frequent content words, ties by first
    appearance, of

    * ``fallback_application="content_words"`` (the argument's and ``rizz.core.Policy``'s
      default): the instruction (its words count double) and the whole input — on a
      question-answering task, the question's topic;
    * ``"first_line"``: the instruction if it has any text (the whole of it, where
      :func:`rizz.engine.answering.embedding_text` embeds only a long instruction's first line:
      of τ-bench's agent policies the first lines, "# Retail agent policy" and "# Airline
      agent policy", give labels whose embeddings snap the airline episodes into the retail
      branch, while the whole policies' most frequent words, ``user-order-status`` and
      ``user-agent-flight``, keep them apart; ``benchmarks/tau_routes.py``), else the input's
      first non-blank line, where TRACE and StreamBench-style elements state their task ("Choose an answer
      for the following question and give your reasons.": one application for every
      ScienceQA question; results/2026-12-01-label-quality-train.md). The shipped
      ``policies/default.yaml`` sets it (results/2026-12-04-first-line-default.md);

    plus the script name when a third or more of the whole input's letters are non-Latin
    (``chinese``, ``japanese``, ...); ``"general"`` if no word is left.

    Raises:
        ValueError: ``fallback_application`` is not one of :data:`FALLBACK_APPLICATIONS`.
    """
    if fallback_application not in FALLBACK_APPLICATIONS:
        raise ValueError(f"fallback_application: expected one of {', '.join(FALLBACK_APPLICATIONS)}, "
                         f"got {fallback_application!r}")
    instr = instruction or ""
    task_line = instr if instr.strip() else _first_line(text[:4000])
    probe = (task_line if fallback_application == "first_line" else instr + "\n" + text[:4000]).lower()
    function = next((f for f, pat in _FUNCTION_RULES if re.search(pat, probe)), None)
    if function is None:
        function = _SHAPE_FUNCTION.get(shape or "", "answer-question")
    counts: collections.Counter[str] = collections.Counter()
    first_seen: dict[str, int] = {}
    if fallback_application == "first_line":
        sources: tuple[tuple[int, str], ...] = ((1, task_line),)
    else:
        sources = ((2, instr), (1, text[:4000]))
    for weight, source in sources:
        for word in re.findall(r"[a-z][a-z0-9]{2,}", source.lower()):
            if word in _STOPWORDS or word in FUNCTIONS:
                continue
            counts[word] += weight
            first_seen.setdefault(word, len(first_seen))
    words = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))[:_FALLBACK_APPLICATION_WORDS]
    letters = [c for c in text[:4000] if c.isalpha()]
    for script, pat in _SCRIPTS:
        n = sum(1 for c in letters if re.match(pat, c))
        if letters and n * 3 >= len(letters):
            if script not in words:
                words.append(script)
            break
    application = hyphenate(" ".join(words)) or "general"
    return function, application


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = int(limit * 0.75)
    return text[:head] + " ... " + text[-(limit - head) :]


def judge_messages(text: str, *, instruction: str | None) -> list[Message]:
    """The judge prompt: system rules, one worked example, then the element to label.

    The element's expected output shape is not shown: with it ("Expected output: letter") the
    Qwen2.5-Coder 1.5B labelled FOMC and C-STANCE alike as ``classify/letter`` and the 0.5B both
    as ``classify/language-classification``; without it they named the domains
    (``benchmarks/judge_probe.py --variant shipped`` vs ``no-shape``, 4 train elements per task,
    results/2026-12-02-judge-shape.md). Routing still keeps shapes apart (``shape_guard``).
    """
    parts = []
    if instruction:
        parts.append(f"Instruction: {_shorten(instruction, _MAX_PROMPT_CHARS // 2)}")
    parts.append(f"Input: {_shorten(text, _MAX_PROMPT_CHARS)}")
    return [
        Message("system", _SYSTEM),
        Message("user", _SHOT_USER),
        Message("assistant", _SHOT_ASSISTANT),
        Message("user", "\n".join(parts)),
    ]


def read_label(raw: str, text: str, *, instruction: str | None, shape: str | None,
               fallback_application: str = "content_words") -> JudgeLabel:
    """The label in a judge reply ``raw`` (reasoning stripped, repaired, each missing part from
    :func:`fallback_label` of the element ``text``/``instruction``/``shape``); no model call,
    ``generation`` None. :func:`label_input` is this after its call, so a logged ``judge.raw``
    reads back to the logged label under the same ``fallback_application``.

    Raises:
        ValueError: unknown ``fallback_application`` (only when the fallback is needed).
    """
    function, application, repaired = parse_label(strip_reasoning(raw))
    fallback = not (function and application)
    if fallback:
        fb_function, fb_application = fallback_label(text, instruction=instruction, shape=shape,
                                                     fallback_application=fallback_application)
        function = function or fb_function
        application = application or fb_application
    return JudgeLabel(function, application, raw, repaired, fallback)


def label_input(
    model: ModelBackend,
    text: str,
    *,
    instruction: str | None = None,
    shape: str | None = None,
    max_tokens: int = _JUDGE_MAX_TOKENS,
    fallback_application: str = "content_words",
) -> JudgeLabel:
    """Ask ``model`` for the label of one stream element; repair or fall back as needed.

    Args:
        model: any :class:`~rizz.adapters.models.base.ModelBackend` (chat rendering is used).
        text: the element's input.
        instruction: its instruction, if any.
        shape: expected output shape (``metadata.shape``, specs/stream-format.md), if any.
        max_tokens: judge answer budget, tokens.
        fallback_application: the policy's ``routing.fallback_application``
            (``content_words`` | ``first_line``, see :func:`fallback_label`); it shapes only
            the label read from the reply, never the prompt (a cached call is reused).

    Returns:
        a :class:`JudgeLabel` whose ``function`` and ``application`` are never empty.
        Malformed model output never raises; backend errors (network, context) propagate.
    """
    gen = model.generate(
        judge_messages(text, instruction=instruction),
        max_tokens=max_tokens,
        # the answer is one flat object; the parser restores the brace. Not for a reasoning
        # model (``?reasoning=N``): a "}" in its thinking would cut the reply (rizz.adapters.models.reasoning).
        stop=() if getattr(model, "reasoning_tokens", 0) else ("}",),
    )
    label = read_label(gen.text, text, instruction=instruction, shape=shape, fallback_application=fallback_application)
    return attrs.evolve(label, generation=gen)
