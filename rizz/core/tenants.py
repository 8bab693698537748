"""Tenant walls (specs/step-semantics.md, "Tenant walls"): one sub-state per tenant, so no memory crosses tenants.

Cross-branch reads (examples, active rules, family and global playbooks) are the method's
design *within* one agent (spec §4). Across users they are a data leak. ``metadata.tenant``
(``StepInput.tenant``) names a hard wall: each tenant gets its own
:class:`~rizz.core.records.AdaptiveState` — its own branch bank, episodes, rules and rule
ledger (so family/global promotion), anti-patterns, scoped context, quarantine, working
memory, routing statistics and history — and its own step numbering. Nothing of one tenant
is read or written by another tenant's step.

:func:`walled` wraps a :class:`~rizz.core.transition.Rizz` bundle (the optax ``chain`` shape:
a wrapper of pure functions whose state is keyed by name). Every member goes through the wall:
``plan``, ``step``, ``step_with_events`` and the three rounds of a live session
(``route_round`` at answer time, ``feedback_round`` when the verdict comes, ``distill_round``):

* untenanted input on a plain ``AdaptiveState``: exactly the inner functions (today's state,
  decisions and digest, byte for byte; AREAS.md constraint 1);
* otherwise the state is a :class:`TenantStates`: the input goes to the sub-state of its tenant
  (``None``: the untenanted sub-state) with ``step`` replaced by the tenant's own answer
  counter (:attr:`TenantStates.answers`; the counter of the untenanted sub-state starts at the
  global step where the first tenant appeared), so a tenant's sub-state, rule ids and every
  plan it sees equal those of its own records folded alone, whatever the other tenants did in
  between (the global step index, which would reveal other tenants' traffic, never enters it).
  ``route_round`` returns a :class:`WalledDecision` (the inner decision, the tenant, the local
  step), which the live session keeps with the pending answer and hands back to
  ``feedback_round``; ``branch_id`` of a walled decision is the view key ``"<tenant>/<id>"``,
  and ``distill_round`` takes that key (its ``step`` is the global step of the verdict, mapped
  to the local one through :attr:`TenantStates.fed`).

Pure: no clock, randomness or I/O.
"""

from __future__ import annotations

from typing import overload

import attrs
from attrs import field, frozen
from pyrsistent import PMap, pmap

from rizz.core.inputs import CandidateRule, StepInput, Verdict
from rizz.core.records import AdaptiveState, Branch, empty_state
from rizz.core.routing import RouteDecision
from rizz.core.transition import Plan, Rizz, RouteResult, StepResult

__all__ = [
    "AnyState",
    "TenantStates",
    "WalledDecision",
    "answers_after",
    "branch_key",
    "decision_tenant",
    "follow_merge",
    "fed_branch",
    "localise",
    "locate",
    "sub_state",
    "unwall",
    "walled",
    "with_sub_state",
]


@frozen
class TenantStates:
    """Per-tenant sub-states.

    Attributes:
      untenanted: the state of the elements without ``metadata.tenant``.
      tenants: tenant name → its :class:`AdaptiveState` (a tenant's state is created empty on
        its first element).
      answers: tenant name (``""``: untenanted) → answers routed so far, the next local step.
      fed: tenant name (``""``: untenanted) → ``(global step, local step)`` of the last verdict
        folded, so a ``distill_round`` naming the global step finds the local one.

    ``branches``, ``branch_ids()`` and ``active_branches()`` are read-only views for reports (``rizz inspect``,
    ``summary.json``), keyed ``"<tenant>/<branch id>"`` (untenanted branches keep their id).
    """

    untenanted: AdaptiveState = field(factory=empty_state)
    tenants: PMap[str, AdaptiveState] = field(factory=pmap)
    answers: PMap[str, int] = field(factory=pmap)
    fed: PMap[str, tuple[int, int]] = field(factory=pmap)

    @property
    def branches(self) -> PMap[str, Branch]:
        out = dict(self.untenanted.branches)
        for t in sorted(self.tenants):
            out.update({f"{t}/{bid}": b for bid, b in self.tenants[t].branches.items()})
        return pmap(out)

    def branch_ids(self) -> list[str]:
        """View keys in creation order: untenanted branches, then each tenant's (sorted by name)."""
        out = self.untenanted.branch_ids()
        for t in sorted(self.tenants):
            out += [f"{t}/{bid}" for bid in self.tenants[t].branch_ids()]
        return out

    def active_branches(self) -> list[Branch]:
        out = list(self.untenanted.active_branches())
        for t in sorted(self.tenants):
            out += self.tenants[t].active_branches()
        return out

    @property
    def steps(self) -> int:
        """Steps folded over every tenant."""
        return self.untenanted.steps + sum(s.steps for s in self.tenants.values())


AnyState = AdaptiveState | TenantStates


def _key(tenant: str | None) -> str:
    return "" if tenant is None else tenant


def branch_key(tenant: str | None, branch_id: str) -> str:
    """The view key of ``branch_id`` of ``tenant``'s sub-state: ``"<tenant>/<id>"`` (untenanted: the id)."""
    return branch_id if tenant is None else f"{tenant}/{branch_id}"


@frozen
class WalledDecision:
    """A route decision made behind the wall: ``decision`` (of the tenant's sub-state), the
    ``tenant`` and the ``step`` the input had inside it. Reads like a
    :class:`~rizz.core.routing.RouteDecision`; ``branch_id`` is the view key (:func:`branch_key`)."""

    decision: RouteDecision
    tenant: str | None
    step: int

    @property
    def branch_id(self) -> str:
        return branch_key(self.tenant, self.decision.branch_id)

    @property
    def label(self):  # type: ignore[no-untyped-def]
        return self.decision.label

    @property
    def score(self) -> float:
        return self.decision.score

    @property
    def spawn(self):  # type: ignore[no-untyped-def]
        return self.decision.spawn

    @property
    def snapped(self):  # type: ignore[no-untyped-def]
        return self.decision.snapped

    @property
    def features(self) -> tuple[float, ...]:
        """The chosen arm's bandit features (``routing.router: linucb``; () otherwise), as the
        inner decision saw them in the tenant's sub-state: the verdict's ``BanditUpdated`` uses
        them (through :func:`unwall`), so the bandit learns behind a wall as without one."""
        return self.decision.features


def sub_state(state: AnyState, tenant: str | None) -> AdaptiveState:
    """The sub-state of ``tenant`` (None: untenanted); an empty state for a tenant not seen yet."""
    if isinstance(state, AdaptiveState):
        return state if tenant is None else empty_state()
    if tenant is None:
        return state.untenanted
    return state.tenants.get(tenant) or empty_state()


def _walls(state: AnyState, first_step: int) -> TenantStates:
    """``state`` as a TenantStates; a plain state becomes the untenanted sub-state, whose own
    step counter continues from ``first_step`` (the global step where the first tenant came)."""
    if isinstance(state, TenantStates):
        return state
    return TenantStates(untenanted=state, answers=pmap({"": first_step}))


@overload
def with_sub_state(state: TenantStates, tenant: str | None, sub: AdaptiveState) -> TenantStates: ...
@overload
def with_sub_state(state: AnyState, tenant: str | None, sub: AdaptiveState) -> AnyState: ...
def with_sub_state(state: AnyState, tenant: str | None, sub: AdaptiveState) -> AnyState:
    """``state`` with the sub-state of ``tenant`` replaced by ``sub`` (every other sub-state
    stays the same object). A plain state stays plain while no tenant has been seen."""
    if tenant is None:
        return sub if isinstance(state, AdaptiveState) else attrs.evolve(state, untenanted=sub)
    ts = _walls(state, state.steps)
    return attrs.evolve(ts, tenants=ts.tenants.set(tenant, sub))


def _local_step(state: AnyState, inp: StepInput) -> int:
    if isinstance(state, AdaptiveState):
        return inp.step if inp.tenant is None else 0
    default = state.untenanted.steps if inp.tenant is None else 0
    return state.answers.get(_key(inp.tenant), default)


def localise(state: AnyState, inp: StepInput) -> tuple[AdaptiveState, StepInput]:
    """(sub-state, input) for the inner functions: the input's step becomes the tenant's own
    next step, except for untenanted input on a plain state (today's behaviour, unchanged)."""
    sub = sub_state(state, inp.tenant)
    t = _local_step(state, inp)
    return sub, (attrs.evolve(inp, step=t) if inp.step != t else inp)


def unwall(state: AnyState, inp: StepInput, decision: RouteDecision | WalledDecision) -> tuple[AdaptiveState, StepInput, RouteDecision]:
    """(sub-state, input as the sub-state saw it, inner decision) of an answer routed by a
    walled ``route_round`` (a plain decision: untenanted input routed on a plain state)."""
    if isinstance(decision, WalledDecision):
        local = attrs.evolve(inp, step=decision.step) if inp.step != decision.step else inp
        return sub_state(state, decision.tenant), local, decision.decision
    return sub_state(state, inp.tenant), inp, decision


def locate(state: AnyState, key: str) -> tuple[str | None, AdaptiveState, str]:
    """(tenant, its sub-state, branch id inside it) of a branch view key (:func:`branch_key`)."""
    if isinstance(state, AdaptiveState) or "/" not in key:
        return None, sub_state(state, None), key
    tenant, bid = key.rsplit("/", 1)
    return tenant, sub_state(state, tenant), bid


def decision_tenant(decision: RouteDecision | WalledDecision, inp: StepInput) -> str | None:
    """The tenant whose sub-state ``decision`` (for input ``inp``) was made in."""
    return decision.tenant if isinstance(decision, WalledDecision) else inp.tenant


def follow_merge(decision: RouteDecision | WalledDecision, inp: StepInput, tenant: str | None,
                 merged: dict[str, str]) -> RouteDecision | WalledDecision:
    """``decision`` pointing at the branch that kept its branch, when ``tenant``'s sub-state
    merged it away (``merged``: absorbed id → kept id, ids of that sub-state); the same object
    when it is another tenant's decision or its branch was not merged."""
    if decision_tenant(decision, inp) != tenant:
        return decision
    inner = decision.decision if isinstance(decision, WalledDecision) else decision
    b = inner.branch_id
    while b in merged:
        b = merged[b]
    if b == inner.branch_id:
        return decision
    moved = attrs.evolve(inner, branch_id=b)
    return attrs.evolve(decision, decision=moved) if isinstance(decision, WalledDecision) else moved


def answers_after(state: AnyState, decision: RouteDecision | WalledDecision, inp: StepInput, answers: int) -> int:
    """Answers issued after the pending answer ``inp`` in its own tenant's numbering
    (``answers``: answers issued over all tenants), so other tenants' traffic never expires it."""
    if isinstance(decision, WalledDecision) and isinstance(state, TenantStates):
        return state.answers.get(_key(decision.tenant), 0) - decision.step - 1
    if isinstance(state, TenantStates):  # untenanted, answered before the first tenant came
        return state.answers.get("", answers) - inp.step - 1
    return answers - inp.step - 1


def fed_branch(state: AnyState, step: int) -> str | None:
    """The branch (view key) whose verdict for global step ``step`` was the last one folded in
    its sub-state, or None (used to finish a distillation cut off by a crash)."""
    pairs: list[tuple[str | None, AdaptiveState, int]]
    if isinstance(state, AdaptiveState):
        pairs = [(None, state, step)]
    else:
        pairs = []
        for k, (g, local) in state.fed.items():
            if g == step:
                t = k or None
                pairs.append((t, sub_state(state, t), local))
    for t, sub, local in pairs:
        for rec in reversed(sub.history.records):
            if rec.step == local:
                return branch_key(t, rec.branch_id)
    return None


def walled(inner: Rizz) -> Rizz:
    """Wrap ``inner`` so that each tenant steps its own sub-state (see the module docstring).

    Returns:
      A :class:`Rizz` with the same policy whose members take an ``AdaptiveState`` or a
      :class:`TenantStates` and return the same kind (a plain state becomes a ``TenantStates``
      at the first tenanted input). Events name branch ids of the input's own sub-state.

    Example:
      >>> from rizz.core import rizz, Policy, StepInput, Verdict, Label
      >>> import numpy as np
      >>> r = walled(rizz(Policy()))
      >>> x = StepInput(0, "q0", "2+2?", np.eye(4, dtype=np.float32)[0], shape="number",
      ...               label=Label("solve-math", "arithmetic"), answer="4", tenant="alice")
      >>> s = r.step(r.init(), x, Verdict(1.0, "exact_match"))
      >>> sorted(s.tenants), len(s.untenanted.branches), len(s.tenants["alice"].branches["b0"].episodes)
      (['alice'], 0, 1)
    """

    def plain(state: AnyState, inp: StepInput) -> bool:
        return isinstance(state, AdaptiveState) and inp.tenant is None

    def plan(state: AnyState, inp: StepInput) -> Plan:
        sub, local = localise(state, inp)
        return inner.plan(sub, local)

    def route_round(state: AnyState, inp: StepInput) -> RouteResult:
        if plain(state, inp):
            return inner.route_round(state, inp)  # type: ignore[arg-type]
        sub, local = localise(state, inp)
        rr = inner.route_round(sub, local)
        ts = _walls(state, inp.step)
        ts = attrs.evolve(with_sub_state(ts, inp.tenant, rr.state), answers=ts.answers.set(_key(inp.tenant), local.step + 1))
        return RouteResult(ts, WalledDecision(rr.decision, inp.tenant, local.step), rr.events)  # type: ignore[arg-type]

    def feedback_round(state: AnyState, inp: StepInput, verdict: Verdict | None, decision: RouteDecision) -> StepResult:
        sub, local, d = unwall(state, inp, decision)
        res = inner.feedback_round(sub, local, verdict, d)
        tenant = decision.tenant if isinstance(decision, WalledDecision) else inp.tenant
        out = with_sub_state(state, tenant, res.state)
        if isinstance(out, TenantStates):
            out = attrs.evolve(out, fed=out.fed.set(_key(tenant), (inp.step, local.step)))
        return StepResult(out, res.events)  # type: ignore[arg-type]

    def step_with_events(state: AnyState, inp: StepInput, verdict: Verdict | None) -> StepResult:
        if plain(state, inp):
            return inner.step_with_events(state, inp, verdict)  # type: ignore[arg-type]
        if not inp.context_only and verdict is None:
            raise ValueError(f"step {inp.step} ({inp.item_id}): an answered input needs a verdict")
        rr = route_round(state, inp)
        res = feedback_round(rr.state, inp, verdict, rr.decision)
        return StepResult(res.state, rr.events + res.events)

    def step(state: AnyState, inp: StepInput, verdict: Verdict | None) -> AnyState:
        return step_with_events(state, inp, verdict).state

    def distill_round(state: AnyState, branch: str, step: int, rules: tuple[CandidateRule, ...]) -> StepResult:
        if isinstance(state, AdaptiveState):
            return inner.distill_round(state, branch, step, rules)
        tenant, own, bid = locate(state, branch)
        g, local = state.fed.get(_key(tenant), (None, step))
        res = inner.distill_round(own, bid, local if g == step else step, rules)
        if not res.events:
            return StepResult(state, ())  # type: ignore[arg-type]
        return StepResult(with_sub_state(state, tenant, res.state), res.events)  # type: ignore[arg-type]

    return Rizz(inner.policy, inner.init, plan, step, step_with_events, route_round, feedback_round, distill_round)  # type: ignore[arg-type]
