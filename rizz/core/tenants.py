"""Tenant walls (issue #12 §2): one sub-state per tenant, so no memory crosses tenants.

Cross-branch reads (examples, active rules, family and global playbooks) are the method's
design *within* one agent (spec §4). Across users they are a data leak. ``metadata.tenant``
(``StepInput.tenant``) names a hard wall: each tenant gets its own
:class:`~rizz.core.records.AdaptiveState` — its own branch bank, episodes, rules and rule
ledger (so family/global promotion), anti-patterns, scoped context, quarantine, working
memory, routing statistics and diagnostics — and its own step counter. Nothing of one tenant
is read or written by another tenant's step.

:func:`walled` wraps a :class:`~rizz.core.transition.Rizz` bundle (the optax ``chain`` shape:
a wrapper of pure functions whose state is keyed by name). The wrapped step:

* untenanted input on a plain ``AdaptiveState``: exactly the inner step (today's state and
  digest, byte for byte; AREAS.md constraint 1);
* otherwise the state is a :class:`TenantStates`: the input goes to the sub-state of its tenant
  (``None``: the untenanted sub-state) with ``step`` replaced by that sub-state's own step
  counter (``AdaptiveState.steps``), so a tenant's sub-state, rule ids and every plan it sees
  equal those of its stream run alone, whatever the other tenants did in between (and the
  global step index, which would reveal other tenants' traffic, never enters it).

Pure: no clock, randomness or I/O.
"""

from __future__ import annotations

from typing import Union

import attrs
from attrs import field, frozen
from pyrsistent import PMap, pmap

from rizz.core.inputs import StepInput, Verdict
from rizz.core.records import AdaptiveState, Branch, empty_state
from rizz.core.transition import Plan, Rizz, StepResult

__all__ = ["AnyState", "TenantStates", "localise", "sub_state", "walled", "with_sub_state"]


@frozen
class TenantStates:
    """Per-tenant sub-states.

    Attributes:
      untenanted: the state of the elements without ``metadata.tenant``.
      tenants: tenant name → its :class:`AdaptiveState` (a tenant's state is created empty on
        its first element).

    ``branches``, ``branch_ids()`` and ``active_branches()`` are read-only views for reports (``rizz inspect``,
    ``summary.json``), keyed ``"<tenant>/<branch id>"`` (untenanted branches keep their id).
    """

    untenanted: AdaptiveState = field(factory=empty_state)
    tenants: PMap = field(factory=pmap)

    @property
    def branches(self) -> PMap:
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


AnyState = Union[AdaptiveState, TenantStates]


def sub_state(state: AnyState, tenant: str | None) -> AdaptiveState:
    """The sub-state of ``tenant`` (None: untenanted); an empty state for a tenant not seen yet."""
    if isinstance(state, AdaptiveState):
        return state if tenant is None else empty_state()
    if tenant is None:
        return state.untenanted
    return state.tenants.get(tenant) or empty_state()


def with_sub_state(state: AnyState, tenant: str | None, sub: AdaptiveState) -> AnyState:
    """``state`` with the sub-state of ``tenant`` replaced by ``sub`` (every other sub-state
    stays the same object). A plain state stays plain while no tenant has been seen."""
    if tenant is None:
        return sub if isinstance(state, AdaptiveState) else attrs.evolve(state, untenanted=sub)
    ts = TenantStates(untenanted=state) if isinstance(state, AdaptiveState) else state
    return attrs.evolve(ts, tenants=ts.tenants.set(tenant, sub))


def localise(state: AnyState, inp: StepInput) -> tuple[AdaptiveState, StepInput]:
    """(sub-state, input) for the inner step: the input's step becomes the sub-state's own
    counter, except for untenanted input on a plain state (today's behaviour, unchanged)."""
    sub = sub_state(state, inp.tenant)
    if isinstance(state, AdaptiveState) and inp.tenant is None:
        return sub, inp
    return sub, attrs.evolve(inp, step=sub.steps) if inp.step != sub.steps else inp


def walled(inner: Rizz) -> Rizz:
    """Wrap ``inner`` so that each tenant steps its own sub-state (see the module docstring).

    Returns:
      A :class:`Rizz` with the same policy whose ``plan``/``step``/``step_with_events`` take an
      ``AdaptiveState`` or a :class:`TenantStates` and return the same kind (a plain state
      becomes a ``TenantStates`` at the first tenanted input). Events name branch ids of the
      input's own sub-state.

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

    def plan(state: AnyState, inp: StepInput) -> Plan:
        sub, local = localise(state, inp)
        return inner.plan(sub, local)

    def step_with_events(state: AnyState, inp: StepInput, verdict: Verdict | None) -> StepResult:
        sub, local = localise(state, inp)
        res = inner.step_with_events(sub, local, verdict)
        return StepResult(with_sub_state(state, inp.tenant, res.state), res.events)  # type: ignore[arg-type]

    def step(state: AnyState, inp: StepInput, verdict: Verdict | None) -> AnyState:
        return step_with_events(state, inp, verdict).state

    return Rizz(inner.policy, inner.init, plan, step, step_with_events)  # type: ignore[arg-type]
