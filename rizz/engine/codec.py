"""The one codec between a step's inputs and its log record, used by the live path and by replay.

* :func:`encode_step`: a :class:`~rizz.engine.pending.Pending` (the element as answered: its
  :class:`~rizz.core.StepInput`, prompt, route, calls) and its verdict → the ``step`` or
  ``answer`` :class:`~rizz.formats.logrecord.LogRecord` a Session appends (``rizz run`` and a
  live session);
* :func:`decode_step`: that record → the core's ``StepInput`` and ``Verdict`` again, the
  vectors read back from the RUN_DIR's store by key (``rizz replay``, a resume, ``rizz diff``
  and ``rizz view``: :class:`~rizz.engine.logfold.LogFold`);
* :func:`encode_verdict` / :func:`decode_verdict`: a ``Verdict`` ⇄ the record's
  :class:`~rizz.formats.logrecord.VerdictPart` (a ``step`` record's and a ``verdict`` record's).

Every field a refold needs goes through this pair, so what a session folded live and what a
refold of its log folds are the same input (specs/step-semantics.md, "Live sessions"). The
live path folds the ``StepInput`` it already holds (no vector is read back); replay decodes.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from rizz.core import CandidateRule, Label, StepInput, Verdict
from rizz.engine.pending import Pending
from rizz.errors import RizzError
from rizz.formats import logrecord as lr
from rizz.formats.timekeys import time_fields

__all__ = ["LogFoldError", "decode_step", "decode_verdict", "encode_step", "encode_verdict"]


class LogFoldError(ValueError, RizzError):
    """A record that cannot follow the ones before it (e.g. a verdict for no pending answer),
    or a record with no input where one is folded."""


def encode_verdict(v: Verdict) -> lr.VerdictPart:
    """The log record's part for verdict ``v`` (inverse of :func:`decode_verdict`)."""
    return lr.VerdictPart(v.reward, v.verifier, v.parsed, v.correction)


def decode_verdict(v: lr.VerdictPart | None) -> Verdict | None:
    """The verdict a record's part holds (None for none)."""
    return Verdict(v.reward, v.verifier, v.parsed, correction=v.correction) if v is not None else None


def encode_step(p: Pending, kind: str, verdict: Verdict | None, wall_s: float) -> lr.LogRecord:
    """The ``step`` or ``answer`` log record of ``p`` and its ``verdict`` (None: not yet, or
    context-only input); ``wall_s``: seconds the answer took. The prompt's text is not in the
    record, only its sha256 (``record.prompt.sha256``): the Session keeps the text in the RUN_DIR."""
    el, inp = p.element, p.step_input
    prompt = None
    if p.prompt is not None:
        sha = hashlib.sha256(p.prompt.text.encode("utf-8")).hexdigest()
        prompt = lr.PromptPart(sha, p.prompt.token_count, p.prompt.budget, p.rendering,
                               [[d.block, d.id, d.tokens, d.reason] for d in p.prompt.dropped],
                               list(inp.prompt_rule_ids), list(inp.prompt_episode_keys), list(inp.prompt_blocks))
    d = p.routed.decision if p.routed is not None else None
    return lr.LogRecord(
        step=inp.step, id=el.id, v=lr.LOG_VERSION, kind=kind, task=el.task, context_only=el.context_only,
        input=lr.InputPart(inp.text, p.keys[0], inp.instruction, inp.evidence, inp.scope, inp.shape, inp.tenant, inp.time),
        route=lr.RoutePart(d.branch_id, d.score, d.spawn is not None) if d is not None else None,
        calls=list(p.calls), overflow=p.overflow, wall_s=round(wall_s, 4),
        judge=lr.JudgePart(**p.judge, label_embedding=p.keys[1]) if p.judge is not None else None,
        prompt=prompt,
        answer=lr.AnswerPart(p.raw_output, p.answer, p.parsed, p.reasoning or None) if not el.context_only else None,
        verdict=encode_verdict(verdict) if verdict is not None else None,
        time=p.time if kind == "answer" else None,
        episode=lr.EpisodePart(**p.episode.to_json(), wrong_call=p.wrong_call) if p.episode is not None else None,
        declared_label=lr.LabelPart(inp.declared_label.function, inp.declared_label.application) if inp.declared_label is not None else None,
    )


def decode_step(rec: lr.LogRecord, store: Any) -> tuple[StepInput, Verdict | None]:
    """The core's input and verdict of a ``step`` or ``answer`` record, no model call: the
    vectors its keys name are read from ``store`` (``get(key) -> (d,) float32``). A version-1
    record's distilled rules (``distill``) ride in the input, as that format folded them.

    Raises LogFoldError for a record without an input."""
    x = rec.input
    if x is None:
        raise LogFoldError(f"record {rec.kind} {rec.id!r} at step {rec.step} has no input")
    get = store.get

    def vec(key: str | None) -> bytes:
        return np.asarray(get(key), dtype=np.float32).tobytes() if key else b""

    j, p, d, a, dl = rec.judge, rec.prompt, rec.distill, rec.answer, rec.declared_label
    rules = tuple([CandidateRule(a_, s_, vec(k)) for a_, s_, k in d.rules]) if d is not None else ()
    completion = 0
    for c in rec.calls:
        if c.kind == "answer":
            completion += c.completion_tokens
    # positionally, in _STEP_FIELDS' order: a replay decodes every record, and matching 24 keywords
    # cost more than the rest of this function (each argument is computed in the order it was before)
    inp = StepInput(
        rec.step, rec.id, x.text, vec(x.embedding), x.instruction, x.evidence, x.scope, x.shape, rec.context_only,
        Label(j.function, j.application) if j else None, vec(j.label_embedding) if j else b"",
        a.extracted if a else None, tuple(p.rule_ids) if p else (), tuple(p.episode_keys) if p else (),
        p.tokens if p else 0, completion, len(p.dropped) if p else 0, rules, bool(d and d.asked), x.tenant,
        (when := time_fields(x.time) if x.time is not None else _NO_TIME)["time"], tuple(p.blocks) if p else (),
        Label(dl.function, dl.application) if dl else None, when["instant_us"],
    )
    return inp, decode_verdict(rec.verdict)


#: StepInput's fields in the order :func:`decode_step` passes them (tests/shell/test_logrecord_fast.py checks it).
_STEP_FIELDS = ("step", "item_id", "text", "embedding", "instruction", "evidence", "scope", "shape", "context_only", "label",
                "label_embedding", "answer", "prompt_rule_ids", "prompt_episode_keys", "prompt_tokens", "completion_tokens",
                "dropped", "candidate_rules", "distilled", "tenant", "time", "prompt_blocks", "declared_label", "instant_us")
_NO_TIME: dict[str, Any] = {"time": None, "instant_us": None}
