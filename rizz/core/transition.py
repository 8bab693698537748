"""The public transition ``step(state, input, verdict) -> state`` and the read-side ``plan``.

:func:`rizz` closes over a :class:`Policy` and returns a :class:`Rizz` — a named bundle of
pure functions in the optax style (``init``, ``plan``, ``step``, ``step_with_events``,
``route_round``, ``feedback_round``, ``distill_round``). Between steps, behaviour changes only
through the state value.

A step is three decide/apply rounds: route (spawn, snap) → memory (superseded memories
retired (:mod:`rizz.core.supersede`), stats, writes, quarantine, rule counters,
new rules, working memory, history) → lifecycle (merge, deactivate, prune). Each round decides past-tense events against the state the previous round
left and
folds them with :func:`rizz.core.apply.apply`.

A live session (many pending answers, verdicts late) folds the same rounds as separate
transitions, in log order: ``route_round`` when the element is answered (its decision travels
with the pending answer), ``feedback_round`` (memory + lifecycle, using that decision) when
its verdict arrives, and ``distill_round`` for rules the model distilled afterwards.
``step = feedback_round ∘ route_round`` (specs/step-semantics.md, "Live sessions").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from rizz.core import events as ev
from rizz.core.apply import fold
from rizz.core.decide import batch_keys, decide_distilled, decide_memory
from rizz.core.inputs import CandidateRule, StepInput, Verdict
from rizz.core.lifecycle import decide_lifecycle
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, empty_state
from rizz.core.retrieval import Retrieved, retrieve
from rizz.core.routing import RouteDecision, route
from rizz.core.supersede import decide_supersede

__all__ = ["Plan", "Rizz", "RouteResult", "StepResult", "rizz"]


class Plan(NamedTuple):
    """What the shell needs before calling the model: where the input goes and what it reads."""

    decision: RouteDecision
    retrieved: Retrieved


class StepResult(NamedTuple):
    state: AdaptiveState
    events: tuple[object, ...]


class RouteResult(NamedTuple):
    """The route round's outcome: the state with any spawned branch, the decision, the events."""

    state: AdaptiveState
    decision: RouteDecision
    events: tuple[object, ...]

    def __repr__(self) -> str:  # the state is the whole memory: its size only
        n = len(self.state.branches)
        return (f"RouteResult(state=<AdaptiveState, {n} branch{'es' if n != 1 else ''}>, "
                f"decision={self.decision!r}, events={self.events!r})")


def _route_events(decision: RouteDecision) -> list[object]:
    out: list[object] = []
    if decision.snapped is not None:
        out.append(decision.snapped)
    if decision.spawn is not None:
        out.append(decision.spawn)
    return out


def _route_round(policy: Policy, state: AdaptiveState, inp: StepInput) -> RouteResult:
    decision = route(state, policy, inp)
    events = _route_events(decision)
    return RouteResult(fold(state, events), decision, tuple(events))


def _feedback_round(policy: Policy, state: AdaptiveState, inp: StepInput, verdict: Verdict | None, decision: RouteDecision) -> StepResult:
    if not inp.context_only and verdict is None:
        raise ValueError(f"step {inp.step} ({inp.item_id}): an answered input needs a verdict")
    if decision.branch_id not in state.branches:  # merged or pruned while the answer was pending
        return StepResult(state, (ev.VerdictDropped(inp.item_id, decision.branch_id, inp.step, "branch-gone"),))
    sup = decide_supersede(state, policy, inp, verdict)  # rizz.core.supersede; [] unless write.supersede
    s1 = fold(state, sup)
    mem = decide_memory(s1, policy, inp, verdict, decision)
    s2 = fold(s1, mem)
    life = decide_lifecycle(s2, policy, inp.step, decision.branch_id)
    return StepResult(fold(s2, life), tuple(sup + mem + life))


def _distill_round(policy: Policy, state: AdaptiveState, branch_id: str, step: int, rules: tuple[CandidateRule, ...]) -> StepResult:
    branch = state.branches.get(branch_id)
    if branch is None:
        return StepResult(state, ())
    batch = batch_keys(policy, tuple(e.key for e in branch.episodes.records[-policy.rules.distill_every :]))
    events = decide_distilled(branch, policy, step, tuple(rules), True, batch)
    return StepResult(fold(state, events), tuple(events))


def _step_with_events(policy: Policy, state: AdaptiveState, inp: StepInput, verdict: Verdict | None) -> StepResult:
    if not inp.context_only and verdict is None:
        raise ValueError(f"step {inp.step} ({inp.item_id}): an answered input needs a verdict")
    s1, decision, events = _route_round(policy, state, inp)
    s3, rest = _feedback_round(policy, s1, inp, verdict, decision)
    return StepResult(s3, events + rest)


class Rizz(NamedTuple):
    """RIZZ bound to one policy. All members are pure functions.

    Attributes:
      policy: the bound policy.
      init: ``() -> AdaptiveState``, the empty state.
      plan: ``(state, input) -> Plan``: routing decision and retrieved material (spec §3–4).
      step: ``(state, input, verdict | None) -> state`` (verdict None only for context-only input).
        An input with ``label=None`` is routed by anchor cosine alone; it spawns an
        ``unknown/unknown`` branch when no compatible branch exists (label it when
        :func:`rizz.core.needs_label` says so: :attr:`StepInput.label`).
      step_with_events: like ``step`` but also returns the past-tense events it folded.
      route_round: ``(state, input) -> RouteResult``: the route round alone (spawn, snap), at
        answer time in a live session.
      feedback_round: ``(state, input, verdict | None, decision) -> StepResult``: memory and
        lifecycle rounds with a decision ``route_round`` made earlier; a decision whose branch
        no longer exists yields only ``VerdictDropped`` (nothing written).
      distill_round: ``(state, branch_id, step, rules) -> StepResult``: ``RuleAdded`` for each
        new candidate rule (ids ``r<step>-<i>``) and ``DistillationRecorded``; no events for a
        branch that no longer exists.

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
    route_round: Callable[[AdaptiveState, StepInput], RouteResult]
    feedback_round: Callable[[AdaptiveState, StepInput, Verdict | None, RouteDecision], StepResult]
    distill_round: Callable[[AdaptiveState, str, int, tuple[CandidateRule, ...]], StepResult]


def rizz(policy: Policy) -> Rizz:
    """Bind ``policy`` and return the pure functions of RIZZ (see :class:`Rizz`)."""

    def plan(state: AdaptiveState, inp: StepInput) -> Plan:
        decision = route(state, policy, inp)
        return Plan(decision, retrieve(state, policy, inp, decision))

    def step_with_events(state: AdaptiveState, inp: StepInput, verdict: Verdict | None) -> StepResult:
        return _step_with_events(policy, state, inp, verdict)

    def step(state: AdaptiveState, inp: StepInput, verdict: Verdict | None) -> AdaptiveState:
        return _step_with_events(policy, state, inp, verdict).state

    def route_round(state: AdaptiveState, inp: StepInput) -> RouteResult:
        return _route_round(policy, state, inp)

    def feedback_round(state: AdaptiveState, inp: StepInput, verdict: Verdict | None, decision: RouteDecision) -> StepResult:
        return _feedback_round(policy, state, inp, verdict, decision)

    def distill_round(state: AdaptiveState, branch_id: str, step: int, rules: tuple[CandidateRule, ...]) -> StepResult:
        return _distill_round(policy, state, branch_id, step, rules)

    return Rizz(policy, empty_state, plan, step, step_with_events, route_round, feedback_round, distill_round)


_ = ev
