"""The public transition ``step(state, input, verdict) -> state`` and the read-side ``plan``.

:func:`rizz` closes over a :class:`Policy` and returns a :class:`Rizz` — a named bundle of
pure functions in the optax style (``init``, ``plan``, ``step``, ``step_with_events``). Between
steps, behaviour changes only through the state value.

A step is three decide/apply rounds: route (spawn, snap) → memory (stats, writes, quarantine,
rule counters, new rules, working memory, diagnostics) → lifecycle (merge, deactivate,
prune). Each round decides past-tense events against the state the previous round left and
folds them with :func:`rizz.core.apply.apply`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from rizz.core import events as ev
from rizz.core.apply import fold
from rizz.core.decide import decide_memory
from rizz.core.inputs import StepInput, Verdict
from rizz.core.lifecycle import decide_lifecycle
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, empty_state
from rizz.core.retrieval import Retrieved, retrieve
from rizz.core.routing import RouteDecision, route
from rizz.core.supersede import decide_supersede

__all__ = ["Plan", "Rizz", "StepResult", "rizz"]


class Plan(NamedTuple):
    """What the shell needs before calling the model: where the input goes and what it reads."""

    decision: RouteDecision
    retrieved: Retrieved


class StepResult(NamedTuple):
    state: AdaptiveState
    events: tuple[object, ...]


def _route_events(decision: RouteDecision) -> list[object]:
    out: list[object] = []
    if decision.snapped is not None:
        out.append(decision.snapped)
    if decision.spawn is not None:
        out.append(decision.spawn)
    return out


def _step_with_events(policy: Policy, state: AdaptiveState, inp: StepInput, verdict: Verdict | None) -> StepResult:
    if not inp.context_only and verdict is None:
        raise ValueError(f"step {inp.step} ({inp.item_id}): an answered input needs a verdict")
    decision = route(state, policy, inp)
    events = _route_events(decision)
    s1 = fold(state, events)
    sup = decide_supersede(s1, policy, inp, verdict)  # issue #12 §5; [] unless write.supersede
    s1 = fold(s1, sup)
    mem = decide_memory(s1, policy, inp, verdict, decision)
    s2 = fold(s1, mem)
    life = decide_lifecycle(s2, policy, inp.step, decision.branch_id)
    s3 = fold(s2, life)
    return StepResult(s3, tuple(events + sup + mem + life))


class Rizz(NamedTuple):
    """RIZZ bound to one policy. All members are pure functions.

    Attributes:
      policy: the bound policy.
      init: ``() -> AdaptiveState``, the empty state.
      plan: ``(state, input) -> Plan``: routing decision and retrieved material (spec §3–4).
      step: ``(state, input, verdict | None) -> state`` (verdict None only for context-only input).
      step_with_events: like ``step`` but also returns the past-tense events it folded.

    Example:
      >>> from rizz.core import rizz, Policy, StepInput, Verdict, Label
      >>> import numpy as np
      >>> r = rizz(Policy())
      >>> x = StepInput(0, "q0", "2+2?", np.eye(4, dtype=np.float32)[0], shape="number",
      ...               label=Label("solve-math", "arithmetic"), answer="4")
      >>> s = r.step(r.init(), x, Verdict(1.0, "exact_match"))
      >>> [b.label.application for b in s.branches.values()], len(s.branches["b0"].episodes)
      (['arithmetic'], 1)
    """

    policy: Policy
    init: Callable[[], AdaptiveState]
    plan: Callable[[AdaptiveState, StepInput], Plan]
    step: Callable[[AdaptiveState, StepInput, Verdict | None], AdaptiveState]
    step_with_events: Callable[[AdaptiveState, StepInput, Verdict | None], StepResult]


def rizz(policy: Policy) -> Rizz:
    """Bind ``policy`` and return the pure functions of RIZZ (see :class:`Rizz`)."""

    def plan(state: AdaptiveState, inp: StepInput) -> Plan:
        decision = route(state, policy, inp)
        return Plan(decision, retrieve(state, policy, inp, decision))

    def step_with_events(state: AdaptiveState, inp: StepInput, verdict: Verdict | None) -> StepResult:
        return _step_with_events(policy, state, inp, verdict)

    def step(state: AdaptiveState, inp: StepInput, verdict: Verdict | None) -> AdaptiveState:
        return _step_with_events(policy, state, inp, verdict).state

    return Rizz(policy, empty_state, plan, step, step_with_events)


_ = ev
