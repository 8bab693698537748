"""Retrieval (spec §4): read locality decoupled from write locality.

* Episodic examples: top-k by cosine over every active, shape-compatible branch (or only
  the selected branch when ``examples_cross_branch`` is off).
* Procedural rules: the selected branch's candidate and active rules, active rules of other
  branches, and the family and global playbooks; score
  ``cos(u_j, φ(x)) · clip(1 + α(H_j − A_j), m_min, m_max)`` (α 0.30, m_min 0.30, m_max 3.00).
* Anti-patterns: the selected branch only — failures never leave their branch.
* Scoped context: items whose scope equals the input's scope key, from any branch (a scope
  key names one conversation/session, so this cannot mix task families — the project's
  reading of spec §4, see ``specs/step-semantics.md``); when none match, all of the selected
  branch's context. Score ``w_sim·cos + w_rec·2^(−Δt / half_life)``.
"""

from __future__ import annotations

import numpy as np
from attrs import frozen

from rizz.core.inputs import StepInput
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, Branch, Rule, RuleCounters, Turn
from rizz.core.routing import CONTEXT_FUNCTION, RouteDecision
from rizz.core.vec import as_vector, row_dots

__all__ = ["Retrieved", "Scored", "retrieve", "rule_score"]


@frozen
class Scored:
    """A retrieved item with its score and the branch it came from."""

    item: object
    score: float
    branch_id: str


@frozen
class Retrieved:
    """The retrieved material ``R_t`` (spec §4), each block sorted by score, best first."""

    examples: tuple[Scored, ...] = ()
    rules: tuple[Scored, ...] = ()
    failures: tuple[Scored, ...] = ()
    context: tuple[Scored, ...] = ()
    working: tuple[Turn, ...] = ()


_NO_COUNTS = RuleCounters()  # counters of a rule missing from the ledger (frozen, shared)


def rule_score(cos: float, counters: RuleCounters, policy: Policy) -> float:
    """``cos · clip(1 + α(H − A), m_min, m_max)`` (spec §4)."""
    p = policy.retrieval
    mult = min(max(1.0 + p.rule_alpha * (counters.helpful - counters.harmful), p.rule_m_min), p.rule_m_max)
    return cos * mult


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first; ties by index (deterministic)."""
    if k <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(scores) > k:
        part = np.argpartition(-scores, k - 1)[:k]
    else:
        part = np.arange(len(scores))
    return part[np.lexsort((part, -scores[part]))]


def _examples(state: AdaptiveState, policy: Policy, inp: StepInput, selected: str) -> tuple[Scored, ...]:
    p = policy.retrieval
    q = as_vector(inp.embedding)
    pool: list[tuple[float, int, int, Branch]] = []
    order = 0
    for b in state.active_branches():
        if not len(b.episodes) or b.label.function == CONTEXT_FUNCTION:
            continue
        own = b.id == selected
        if not own:
            if not p.examples_cross_branch:
                continue
            if policy.routing.shape_guard and inp.shape is not None and b.shape not in (None, inp.shape):
                continue
        scores = b.episodes.matrix.dots(q)
        for i in _top(scores, p.examples_k):
            s = float(scores[i])
            if own or s >= p.examples_min_similarity:
                pool.append((s, order, int(i), b))
        order += 1
    pool.sort(key=lambda t: (-t[0], t[1], t[2]))
    return tuple(Scored(b.episodes.records[i], round(s, 6), b.id) for s, _, i, b in pool[: p.examples_k])


def _rules(state: AdaptiveState, policy: Policy, inp: StepInput, selected: str, function: str) -> tuple[Scored, ...]:
    if not policy.rules.enabled or policy.retrieval.rules_k <= 0:
        return ()
    tier_ids = set(state.global_rules) | set(state.family_rules.get(function, ()))
    cross = policy.retrieval.rules_cross_branch
    ledger = state.rule_ledger
    seen: set[str] = set()
    found: list[tuple[Rule, RuleCounters, str]] = []
    for b in state.active_branches():
        own = b.id == selected
        for rule in b.rules:
            c = ledger.get(rule.id, _NO_COUNTS)
            if c.status == "retired" or rule.id in seen:
                continue
            if own or rule.id in tier_ids or (cross and c.status == "active"):
                seen.add(rule.id)
                found.append((rule, c, b.id))
    if not found:
        return ()
    embs = np.frombuffer(b"".join(rule.embedding for rule, _, _ in found), dtype=np.float32).reshape(len(found), -1)
    cos = row_dots(embs, as_vector(inp.embedding)).tolist()
    out = [(rule_score(c_j, c, policy), rule.id, rule, bid) for c_j, (rule, c, bid) in zip(cos, found)]
    out.sort(key=lambda t: (-t[0], t[1]))
    return tuple(Scored(r, round(s, 6), bid) for s, _, r, bid in out[: policy.retrieval.rules_k])


def _failures(branch: Branch | None, policy: Policy, inp: StepInput) -> tuple[Scored, ...]:
    if branch is None or not len(branch.failures):
        return ()
    scores = branch.failures.matrix.dots(as_vector(inp.embedding))
    return tuple(Scored(branch.failures.records[i], round(float(scores[i]), 6), branch.id) for i in _top(scores, policy.retrieval.failures_k))


def _context(state: AdaptiveState, policy: Policy, inp: StepInput, branch: Branch | None) -> tuple[Scored, ...]:
    p = policy.retrieval
    if p.context_k <= 0:
        return ()
    q = as_vector(inp.embedding)
    sources: list[tuple[Branch, list[int]]] = []
    if inp.scope is not None:
        for b in state.active_branches():
            idx = [i for i, it in enumerate(b.context.records) if it.scope == inp.scope]
            if idx:
                sources.append((b, idx))
    if not sources and branch is not None and len(branch.context):
        sources.append((branch, list(range(len(branch.context)))))
    pool: list[tuple[float, int, str, object]] = []
    for b, idx in sources:
        sims = row_dots(b.context.matrix.rows()[idx], q)
        for j, i in enumerate(idx):
            it = b.context.records[i]
            rec = 2.0 ** (-(max(inp.step - it.step, 0)) / p.context_half_life)
            pool.append((p.context_w_similarity * float(sims[j]) + p.context_w_recency * rec, it.step, b.id, it))
    pool.sort(key=lambda t: (-t[0], t[1], t[2]))
    return tuple(Scored(it, round(s, 6), bid) for s, _, bid, it in pool[: p.context_k])


def retrieve(state: AdaptiveState, policy: Policy, inp: StepInput, decision: RouteDecision) -> Retrieved:
    """Gather ``R_t`` for ``inp`` routed by ``decision`` (spec §4). Pure; (d,) query = ``inp.embedding``."""
    branch = state.branches.get(decision.branch_id)
    k = policy.retrieval.working_memory_k
    working = tuple(t for t in state.working_memory if t.branch_id == decision.branch_id)[-k:] if k else ()
    return Retrieved(
        examples=_examples(state, policy, inp, decision.branch_id),
        rules=_rules(state, policy, inp, decision.branch_id, decision.label.function),
        failures=_failures(branch, policy, inp),
        context=_context(state, policy, inp, branch),
        working=working,
    )
