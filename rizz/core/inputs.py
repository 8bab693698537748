"""What a step receives: the observed input with every non-deterministic value as data.

The shell computes these (embedding, judge label, label embedding, the model's answer,
the verifier's verdict, distilled candidate rules, token counts) and logs them; the core
only reads them, so a logged stream refolds to the same state (STYLE.md §1).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

from attrs import field, frozen

from rizz.core.policy import SHAPES
from rizz.core.records import Label, check_time_pair
from rizz.core.vec import to_bytes, vec_repr

__all__ = ["CandidateRule", "StepInput", "Verdict"]


def _vec(v: object) -> bytes:
    return to_bytes(v)  # type: ignore[arg-type]


@frozen
class Verdict:
    """The verifier's verdict ``r = V(ŷ, y*) ∈ [0, 1]`` (spec §1).

    ``parsed`` is False when the answer had no recognisable shape (not a *substantive*
    failure, so it never becomes an anti-pattern).

    ``correction``: the right answer, when whoever gives the verdict also gives it (a user
    correcting an assistant; in a benchmark, the reference in the answer's canonical form).
    Used only under ``write.corrections``: a failed answer with a correction is written as a
    verified example of the *corrected* answer (:func:`rizz.core.decide.write_gate`). ``None``
    (the default) is the binary-verdict setting of the paper.
    """

    reward: float = field()
    verifier: str = "exact_match"
    parsed: bool = True
    correction: str | None = field(default=None, kw_only=True)

    @correction.validator
    def _check_correction(self, _att: object, value: object) -> None:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"correction must be a str or None, got {type(value).__name__}")

    @reward.validator
    def _check(self, _att: object, value: float) -> None:
        if not isinstance(value, numbers.Real):
            raise ValueError(f"reward must be a number in [0, 1], got {value!r} ({type(value).__name__})")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"reward must be in [0, 1], got {value!r}")


@frozen
class CandidateRule:
    """A rule distilled by the model from verified successes; ``embedding`` = φ(rule text)."""

    antecedent: str
    strategy: str
    embedding: bytes = field(converter=_vec, repr=vec_repr)


def _check_shape(_inst: object, _att: object, value: str | None) -> None:
    if value is not None and value not in SHAPES:  # a set-membership test: cheap on a replay
        raise ValueError(f"StepInput.shape: {value!r} is not an output shape; allowed: {', '.join(SHAPES)} or None")


def _str_tuple(xs: Iterable[str]) -> tuple[str, ...]:
    return tuple(xs)


def _rule_tuple(xs: Iterable[CandidateRule]) -> tuple[CandidateRule, ...]:
    return tuple(xs)


@frozen
class StepInput:
    """One stream element as the core sees it.

    Attributes:
      step: index t (0-based) of this element in the run. The caller's counter: the core does
        not check that steps increase or are unique (a live session feeds verdicts late, a
        tenant's sub-state counts its own steps), but step numbers name what a step writes
        (rule ids ``r<step>-<i>``, ``created``/``last_used``), so reusing one makes records
        that cannot be told apart. Give each element of one run its own index, in order.
      item_id: the stream element's ``id``.
      text: the input ``x_t``.
      embedding: ``φ(x_t)``, (d,) float32, L2-normalised. A numpy array (any float dtype) or a
        list is converted to float32 bytes and must be finite, 1-d and of norm 1 (within
        :data:`rizz.core.vec.NORM_TOLERANCE`), else ValueError. ``bytes`` are taken as given
        (float32 values: not ``float64_array.tobytes()``), unchecked, so a replay of logged
        vectors costs nothing here. Every embedding of one state must have the same ``d``: a
        step whose embedding does not match the state's branch anchors raises a ValueError
        naming both dimensions.
      instruction / evidence / scope: from the stream element (spec §1).
      shape: ``metadata.shape``: one of :data:`rizz.core.SHAPES` or None, else ValueError.
      context_only: no answer asked; the input is routed and stored as scoped context.
      label: the judge's label (f̃, ã) before snapping, or None when the judge was not asked.
        A :class:`~rizz.core.Label` must be normalised (:func:`rizz.core.normalise_label`).
        None is the normal case when :func:`rizz.core.needs_label` says False (the nearest
        anchor is confident): the input goes to the nearest compatible branch. The core does
        not ask ``needs_label`` itself: when it would have said True and ``label`` is None,
        the step still goes through; an answered input then routes by anchor cosine alone
        and, with no compatible branch to take it, spawns a branch labelled
        ``unknown/unknown`` (every unlabelled input of a new kind lands there). So label
        the input whenever ``needs_label`` is True: with the judge model, or without any
        model by :func:`rizz.engine.judge.fallback_label` (what ``routing.judge: local``
        does in the engine: ``normalise_label(*fallback_label(text, instruction=...,
        shape=...))``).
      label_embedding: ``ψ(ã)``, (d,) float32 bytes, or b"" when there is no label.
      answer: the extracted answer ``ŷ_t`` (None for context-only input).
      prompt_rule_ids / prompt_episode_keys: what the compiled prompt contained (for counters).
      prompt_tokens / completion_tokens / dropped: token counts and dropped items of the call.
      candidate_rules: rules distilled for the routed branch at this step (may be empty).
      distilled: True when the shell asked for a distillation at this step (resets the batch).
      tenant: ``metadata.tenant``, or None. A hard wall: :mod:`rizz.core.tenants` steps each
        tenant's own sub-state, so no memory crosses tenants (:mod:`rizz.core.tenants`).
      time: ``metadata.time`` as canonical ISO 8601 text, or None; stored with scoped context
        and shown with it.
      instant_us: the instant of ``time``, integer microseconds since 1970-01-01 UTC (orders
        scoped context and restatements), None exactly when ``time`` is. Both are parsed by the
        shell (:func:`rizz.formats.timekeys.time_fields`); the core never reads a calendar.
      prompt_blocks: the memory blocks the compiled prompt showed (for block evidence, :mod:`rizz.core.evidence`).
      declared_label: a caller-declared label (``metadata.label``), used only under
        ``routing.declared_label``; None otherwise.
    """

    step: int
    item_id: str
    text: str
    embedding: bytes = field(converter=_vec, repr=vec_repr)
    instruction: str | None = None
    evidence: str | None = None
    scope: str | None = None
    shape: str | None = field(default=None, validator=_check_shape)
    context_only: bool = False
    label: Label | None = None
    label_embedding: bytes = field(default=b"", repr=vec_repr)
    answer: str | None = None
    prompt_rule_ids: tuple[str, ...] = field(default=(), converter=_str_tuple)
    prompt_episode_keys: tuple[str, ...] = field(default=(), converter=_str_tuple)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dropped: int = 0
    candidate_rules: tuple[CandidateRule, ...] = field(default=(), converter=_rule_tuple)
    distilled: bool = False
    tenant: str | None = field(default=None, metadata={"omit_default": True})
    time: str | None = field(default=None, metadata={"omit_default": True})
    prompt_blocks: tuple[str, ...] = field(default=(), converter=_str_tuple, metadata={"omit_default": True})
    declared_label: Label | None = field(default=None, metadata={"omit_default": True})
    instant_us: int | None = field(default=None, validator=check_time_pair, metadata={"omit_default": True})
