"""One typed log record: building and parsing a line of ``RUN_DIR/log.jsonl``.

A record holds every non-deterministic value a refold needs (embedding keys, judge label,
answer, verdict, token counts, distilled rules, wall time) and, for reports, the route it took
and the model calls it made. Nothing else: the state is the fold of the records, in log order.

Versions:
  1. (no ``v`` field; written before live sessions) one record per finished step; distilled
     rules ride in the step (``distill``). Parsed as ``kind="step"``, ``v=1``; refolded with the
     step semantics of that time (rules folded in the memory round).
  2. ``v: 2`` and a ``kind``:
     - ``step``: an element answered and verified at once (``rizz run``): the ``answer`` and
       ``verdict`` records of one element in one line.
     - ``answer``: a live session answered an element (route round folded, decision kept).
     - ``verdict``: the verdict of a pending answer (memory + lifecycle rounds).
     - ``expire``: a pending answer that will never be folded (``reason``).
     - ``distill``: rules the model distilled for ``branch`` after step ``step``.

  A ``step`` or ``answer`` record of a tool-using episode also has ``episode``
  (:class:`EpisodePart`: every user turn, reply, call and tool result), so a refold calls no
  model and no tool. Records without it parse as before.

Optional fields added within version 2 (older lines parse without them): ``prompt.blocks``
(the memory blocks the prompt showed, read by block evidence) and ``declared_label`` (a
``metadata.label`` used under ``routing.declared_label``).

:func:`parse` reads a JSON object into a :class:`LogRecord` (cattrs, unknown keys refused, errors
name the field); :func:`unstructure` writes it back, leaving out parts that are None, so a
version-2 ``step`` record has the keys of a version-1 record plus ``v`` and ``kind``.
:func:`parse_fast` is the refold's shortcut for a record :func:`parse` would accept as it is
(msgspec, when installed): a read-only record with the same values, or None to say "call
:func:`parse`", which then returns the record or raises its error.
"""

from __future__ import annotations

import functools
import json
import operator
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import cattrs
from attrs import field, frozen

try:  # a base dependency; an environment installed before it was one reads every record through cattrs
    import msgspec as _msgspec
except ImportError:  # pragma: no cover
    _msgspec = None  # type: ignore[assignment]

from rizz.errors import RizzError

# attrs.Factory's class: attrs's stubs type attrs.Factory as a function, which isinstance() does not take
_FACTORY: Any = type(attrs.Factory(list))

__all__ = [
    "KINDS",
    "LOG_VERSION",
    "AnswerPart",
    "CallPart",
    "DistillPart",
    "EpisodePart",
    "InputPart",
    "JudgePart",
    "LabelPart",
    "LogRecord",
    "LogRecordError",
    "PromptPart",
    "RoutePart",
    "VerdictPart",
    "load_line",
    "opens_step",
    "steps_in",
    "parse",
    "parse_fast",
    "unstructure",
]

#: Version written by this code.
LOG_VERSION = 2
KINDS = ("step", "answer", "verdict", "expire", "distill")


class LogRecordError(ValueError, RizzError):
    """A log line that is not a valid record (the message names the field)."""


@frozen
class InputPart:
    """The element as the core saw it; ``embedding`` is the key of φ(x) in the RUN_DIR's store
    (``store.sqlite``, or ``embeddings/`` in a RUN_DIR of the older file-per-element layout).

    ``tenant`` (``metadata.tenant``) and ``time`` (``metadata.time``, canonical ISO 8601) are
    written only when given, so older lines parse and untenanted, untimed
    lines stay as they were; a refold steps the record behind its tenant's wall."""

    text: str
    embedding: str
    instruction: str | None = None
    evidence: str | None = None
    scope: str | None = None
    shape: str | None = None
    tenant: str | None = None
    time: str | None = None


@frozen
class JudgePart:
    """The judge's label (before snapping) and how it was read; ``label_embedding`` = key of ψ(ã)."""

    function: str
    application: str
    raw: str | None = None
    repaired: bool = False
    fallback: bool = False
    label_embedding: str | None = None


@frozen
class RoutePart:
    """Where the element went (for reports; the fold recomputes the decision)."""

    branch: str
    score: float
    spawned: bool


@frozen
class PromptPart:
    """The compiled prompt (text in the RUN_DIR's store under ``sha256``: ``RunDir.prompt_text``;
    ``prompts/<sha256>.txt`` in the older layout); tokens, budget, drops."""

    sha256: str
    tokens: int
    budget: int
    rendering: str
    dropped: list[list[Any]] = field(factory=list)  # [block, id, tokens, reason]
    rule_ids: list[str] = field(factory=list)
    episode_keys: list[str] = field(factory=list)
    blocks: list[str] = field(factory=list)  # memory blocks the prompt showed (block evidence)


@frozen
class LabelPart:
    """A caller-declared label (``metadata.label``), logged when ``routing.declared_label`` used it."""

    function: str
    application: str


@frozen
class AnswerPart:
    """``raw``: the reply without reasoning; ``reasoning``: the model's reasoning, kept raw (rizz.adapters.models.reasoning)."""

    raw: str | None
    extracted: str | None
    parsed: bool
    reasoning: str | None = None


@frozen
class VerdictPart:
    """``reward`` in [0, 1] from ``verifier``; ``parsed`` False: the answer had no shape;
    ``correction``: the right answer given with the verdict (written only when there is one,
    under the ``write.corrections`` policy setting)."""

    reward: float
    verifier: str
    parsed: bool = True
    correction: str | None = None


@frozen
class CallPart:
    """One model call, as the shell keeps it and the log writes it (``rizz.engine.pending.Call``
    is this class): ``kind`` judge / answer / distill / verify (an ``llm_judge`` verdict) / user
    (τ-bench's simulated customer); tokens; seconds (rounded to 0.1 ms); USD (None: unknown);
    ``cached``: served by the response cache; ``usage_estimated``: the backend reported no
    usage, tokens counted by the tokenizer; ``attempts``: HTTP requests the
    call took, the API client's retries included (written only when above 1, so a log of
    calls that needed no retry is byte for byte what it was before the field existed);
    ``evaluated_tokens``: of ``prompt_tokens``, those the backend evaluated when it read the
    rest from a prompt cache or reused them from its KV cache (written only when
    fewer than ``prompt_tokens`` on a call the response cache did not answer: absent, the backend
    evaluated all of them, or none for a cached call), :meth:`evaluated`; ``refused``: the
    server refused the request as too long for its context window, so no reply came (an agent
    episode's last request, which ends it as ``overflow``: ``prompt_tokens`` is rizz's count of
    the prompt, no completion tokens, ``usage_estimated``; written only when true, so a log
    without such a call reads and writes as before the field existed)."""

    kind: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float | None
    cached: bool
    usage_estimated: bool = False
    attempts: int = 1
    evaluated_tokens: int | None = None
    refused: bool = False

    @classmethod
    def of(cls, kind: str, g: Any, *, refused: bool = False) -> CallPart:
        """The call that produced ``g`` (a ``rizz.adapters.models.Generation``); ``refused``:
        ``g`` stands for a request the server refused (no reply)."""
        ev = getattr(g, "evaluated_prompt_tokens", None)
        ev = ev if ev is not None and ev < g.prompt_tokens and not g.cached else None
        return cls(kind, g.prompt_tokens, g.completion_tokens, round(g.latency_s, 4), g.cost_usd, g.cached, g.usage_estimated,
                   getattr(g, "attempts", 1), ev, refused)

    @property
    def evaluated(self) -> int:
        """Prompt tokens the backend evaluated for this call: 0 for a response-cache hit, else
        ``evaluated_tokens`` when written, else all of ``prompt_tokens``."""
        return 0 if self.cached else self.prompt_tokens if self.evaluated_tokens is None else self.evaluated_tokens


@frozen
class DistillPart:
    """Version 1 only: the rules distilled at a step, ``[antecedent, strategy, embedding key]``."""

    asked: bool = False
    rules: list[list[str]] = field(factory=list)


@frozen
class EpisodePart:
    """What a tool-using episode did (:class:`rizz.adapters.agents.episode.ToolEpisode`).

    ``transcript``: the events in order, ``{"role": "user", "text"}``, ``{"role":
    "assistant", "text", "calls": [[name, {args}], ...]}``, ``{"role": "tool", "name",
    "arguments", "result", "error"}``; ``env_digest``: ``sha256:…`` of the environment at the
    end; ``turn_calls``: per user turn, per model step, the calls as text; ``model_calls`` /
    ``user_calls``: agent and simulated-user model calls (an agent prompt that never reached the
    model, over the budget, is none; a request a server refused as too long is one); ``tool_errors``; ``stop``: ``done``,
    ``user_stop``, ``transfer``, ``repeat``, ``max_steps`` or ``overflow``; ``prompt_tokens_max``: the largest agent
    prompt. ``wrong_call``: the first wrong call, the answer the memory round folds when the
    verdict is below the write threshold (the branch-local anti-pattern); the record's
    ``answer.extracted`` is the compact trajectory a verified episode writes.
    """

    transcript: list[dict[str, Any]]
    env_digest: str
    turn_calls: list[list[list[str]]] = field(factory=list)
    model_calls: int = 0
    user_calls: int = 0
    tool_errors: int = 0
    stop: str = "done"
    prompt_tokens_max: int = 0
    wrong_call: str | None = None


@frozen
class LogRecord:
    """One line of ``log.jsonl`` (see the module docstring for kinds and versions).

    ``step``: for step/answer records the element's index in the session (the answer order);
    for verdict/expire records the step of the answer they close; for distill records the
    step whose verdict made the batch due. ``time``: Unix seconds when answered (live
    sessions; expiry by age reads it after a restart). ``rules``: distilled rules,
    ``[antecedent, strategy, embedding key]``.
    """

    step: int
    id: str
    v: int = 1
    kind: str = "step"
    task: str | None = None
    context_only: bool = False
    input: InputPart | None = None
    route: RoutePart | None = None
    calls: list[CallPart] = field(factory=list)
    overflow: bool = False
    wall_s: float = 0.0
    judge: JudgePart | None = None
    prompt: PromptPart | None = None
    answer: AnswerPart | None = None
    verdict: VerdictPart | None = None
    distill: DistillPart | None = None
    branch: str | None = None
    rules: list[list[str]] | None = None
    reason: str | None = None
    time: float | None = None
    episode: EpisodePart | None = None
    declared_label: LabelPart | None = None


_conv = cattrs.Converter(forbid_extra_keys=True)
_REQUIRED = {"step": ("input",), "answer": ("input",), "verdict": ("verdict",), "expire": ("reason",), "distill": ("branch", "rules")}


def parse(data: dict[str, Any], where: str = "<record>") -> LogRecord:
    """A :class:`LogRecord` from one decoded log line; a line without ``v`` is version 1.

    Raises:
      LogRecordError: unknown keys, wrong types, an unknown kind or version, or a part the
        kind needs missing — the message starts with ``where`` and names the field.
    """
    if not isinstance(data, dict):
        raise LogRecordError(f"{where}: a log record is a JSON object, got {type(data).__name__}")
    try:
        rec = _conv.structure(data, LogRecord)
    except Exception as e:  # cattrs groups every field error; name them
        msgs = cattrs.transform_error(e, path="$") if isinstance(e, cattrs.BaseValidationError) else [str(e)]
        raise LogRecordError(f"{where}: bad log record: " + "; ".join(msgs)) from None
    if rec.v not in (1, LOG_VERSION):
        raise LogRecordError(f"{where}: log version {rec.v} is not known to this rizz (1..{LOG_VERSION})")
    if rec.kind not in KINDS or (rec.v == 1 and rec.kind != "step"):
        raise LogRecordError(f"{where}: $.kind: unknown record kind {rec.kind!r} for version {rec.v}")
    missing = [k for k in _REQUIRED[rec.kind] if getattr(rec, k) is None]
    if missing:
        raise LogRecordError(f"{where}: a {rec.kind} record needs $.{missing[0]}")
    return rec


_JSON: Any = _msgspec.json.Decoder() if _msgspec is not None else None


def opens_step(record: Mapping[str, Any]) -> bool:
    """Whether a log record (as JSON) opens a step: kind ``step`` (a whole step: answer and
    verdict; the default when ``kind`` is absent) or ``answer`` (a live session's answer, whose
    verdict comes later). A log of n such records has steps ``0..n-1``."""
    return record.get("kind", "step") in ("step", "answer")


def steps_in(records: Iterable[Mapping[str, Any]]) -> int:
    """How many steps a log's records (as JSON) hold: those that :func:`opens_step`."""
    return sum(1 for r in records if opens_step(r))


def load_line(line: bytes | str) -> Any:
    """One line of ``log.jsonl`` decoded: what ``json.loads(line)`` returns, or its error.

    msgspec decodes the line when it can, a few times faster, into the same objects (ints of
    any size, floats to the same bits, strings, lists, dicts, the last of repeated keys); it
    refuses whatever ``json.loads`` refuses, and a few lines ``json.loads`` reads (``NaN``,
    ``Infinity``, a number too large for a float, a lone surrogate, a byte-order mark, very
    deep nesting): every line it refuses goes to ``json.loads``, which returns or raises as it
    always did.

    Raises:
      json.JSONDecodeError: not JSON. UnicodeDecodeError: bytes that are not UTF-8.
    """
    if _JSON is not None:
        try:
            return _JSON.decode(line)
        except Exception:  # json.loads reads it or says what is wrong, in its own words
            pass
    return json.loads(line)


def _view_type(cls: type, made: dict[type, Any]) -> Any:
    """A frozen msgspec Struct with the fields, types and defaults of the attrs class ``cls`` (its
    record parts mapped to their own Structs), unknown keys refused: what :func:`parse_fast`
    converts into. Built from the attrs fields, so it follows any change to the record classes."""
    if cls not in made:
        hints = typing.get_type_hints(cls)
        specs: list[Any] = []
        for a in attrs.fields(cls):
            t = _view_hint(hints[a.name], made)
            if a.default is attrs.NOTHING:
                specs.append((a.name, t))
            elif isinstance(a.default, _FACTORY):
                specs.append((a.name, t, _msgspec.field(default_factory=a.default.factory)))
            else:
                specs.append((a.name, t, a.default))
        made[cls] = _msgspec.defstruct(f"{cls.__name__}View", specs, frozen=True, forbid_unknown_fields=True,
                                       module=__name__)
    return made[cls]


def _view_hint(t: Any, made: dict[type, Any]) -> Any:
    if isinstance(t, type) and attrs.has(t):
        return _view_type(t, made)
    args = typing.get_args(t)
    if not args:
        return t
    inner = tuple(_view_hint(a, made) for a in args)
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, inner)
    return typing.get_origin(t)[inner if len(inner) > 1 else inner[0]]


_VIEW: Any = _view_type(LogRecord, {}) if _msgspec is not None else None


def parse_fast(data: Any) -> LogRecord | None:
    """The record :func:`parse` makes of ``data``, or None: then call :func:`parse`, which returns
    it or raises its error. For a refold, which reads records and never changes them.

    A record whose every value has the type the field names, as ``json.loads`` gives it (a
    float field may hold an int: it is read as its float, as :func:`parse` does), and with no
    unknown key, converts in one msgspec call into a frozen Struct that has
    :class:`LogRecord`'s fields (its parts likewise: same names, same values, same defaults)
    but none of its methods; anything else — a bad record, a value :func:`parse` would convert
    (a number as text), an unknown kind or version, a missing part, or no msgspec installed —
    gives None. Never raises."""
    if _VIEW is None:
        return None
    try:
        rec = _msgspec.convert(data, _VIEW, strict=True)
    except Exception:  # the record is parse's to read or refuse, with its own message
        return None
    if rec.v not in (1, LOG_VERSION) or rec.kind not in KINDS or (rec.v == 1 and rec.kind != "step"):
        return None
    if any(getattr(rec, k) is None for k in _REQUIRED[rec.kind]):
        return None
    return typing.cast(LogRecord, rec)  # read through LogRecord's fields only (module docstring)


def _drop_none(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None or k in _KEEP_NONE}
    if isinstance(d, list):
        return [_drop_none(x) for x in d]
    return d


# fields written even when None (version-1 lines carry them so)
_KEEP_NONE = {"task", "instruction", "evidence", "scope", "shape", "raw", "extracted", "cost_usd", "label_embedding"}


def unstructure(rec: LogRecord) -> dict[str, Any]:
    """The JSON object of ``rec``: optional parts that are None are left out (inverse of :func:`parse`)."""
    raw = _conv.unstructure(rec)
    episode = raw.pop("episode", None)  # written as it is: tool arguments may hold nulls
    out = _drop_none(raw)
    for call in out.get("calls") or ():
        if call.get("attempts") == 1:
            del call["attempts"]
        if call.get("refused") is False:
            del call["refused"]
    if episode is not None:
        if episode.get("wrong_call") is None:
            episode.pop("wrong_call", None)
        out["episode"] = episode
    if rec.kind != "step":  # live records: leave out what equals its default
        for a in attrs.fields(LogRecord)[4:]:
            default = a.default.factory() if isinstance(a.default, _FACTORY) else a.default
            if getattr(rec, a.name) == default:
                out.pop(a.name, None)
    return out
