"""Retrieval (spec §4): read locality decoupled from write locality.

* Episodic examples: top-k by cosine over every active, shape-compatible branch (or only
  the selected branch when ``examples_cross_branch`` is off), scored with one product over
  the bank's episodic index (:mod:`rizz.core.episode_index`). With ``examples_cross_scope``
  off, an episode written from a scoped element is shown only to inputs of the same scope.
* Procedural rules: the selected branch's candidate and active rules, active rules of other
  branches, and the family and global playbooks; score
  ``cos(u_j, φ(x)) · clip(1 + α(H_j − A_j), m_min, m_max)`` (α 0.30, m_min 0.30, m_max 3.00).
* Anti-patterns: the selected branch only — they never leave their branch.
* Scoped context: items whose scope equals the input's scope key, from any branch (a scope
  key names one conversation/session, so this cannot mix task families — the project's
  reading of spec §4, see ``specs/step-semantics.md``); when none match, all of the selected
  branch's context. Score ``w_sim·cos + w_rec·2^(−Δt / half_life)``.
* Read zones (``retrieval.zone``; results/2026-12-01-interference-prefix.md): cross-branch examples and rules from any branch
  (``global``, the paper's), only from branches of the routed branch's function (``family``),
  or the routed branch's own first with the rest filled from others (``own_first``); with
  ``zone_gate`` another branch is read only while its (source, reader) evidence holds
  (:mod:`rizz.core.evidence`). Tier playbook rules are read in every zone.
* Block evidence (``evidence.enabled``): a block kind whose presence has not helped the routed
  branch is left out (:func:`rizz.core.evidence.block_shown`).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

import numpy as np
from attrs import frozen

from rizz.core.episode_index import branch_number, index_of
from rizz.core.evidence import admitted, block_shown
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

    episodes: tuple[Scored, ...] = ()  # the prompt's "examples" block
    rules: tuple[Scored, ...] = ()
    anti_patterns: tuple[Scored, ...] = ()  # the prompt's "mistakes" block
    context: tuple[Scored, ...] = ()
    working: tuple[Turn, ...] = ()


_NO_COUNTS = RuleCounters()  # counters of a rule missing from the ledger (frozen, shared)


def _penalty(drop: np.ndarray) -> np.ndarray:
    """(n,) float32: -inf where the (n,) bool ``drop`` is set, else -0.0 (adding -0.0 leaves
    every float32 unchanged, signed zeros included). Built with integer arithmetic on the
    IEEE-754 bits (0x80000000 is -0.0, 0xFF800000 is -inf): branch-free, ~5x faster than a
    masked store of an irregular mask on 10^5 rows."""
    return (drop.astype(np.uint32) * np.uint32(0x7F800000) + np.uint32(0x80000000)).view(np.float32)


def rule_score(cos: float, counters: RuleCounters, policy: Policy) -> float:
    """``cos · clip(1 + α(H − A), m_min, m_max)`` (spec §4)."""
    p = policy.retrieval
    mult = min(max(1.0 + p.rule_alpha * (counters.helpful - counters.harmful), p.rule_m_min), p.rule_m_max)
    return cos * mult


def _top(scores: np.ndarray, k: int, *ties: np.ndarray) -> np.ndarray:
    """Indices of the k largest ``(n,)`` scores, best first; equal scores ordered by the ``ties``
    arrays (each ``(n,)``, first one most significant), then by index — exactly, also at the
    k-th place (every row tied with the k-th score is a candidate). ``-inf`` marks a row out."""
    n = len(scores)
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if n > k:
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]  # the k-th largest score
        cand = np.flatnonzero(scores >= kth) if kth > -np.inf else np.flatnonzero(scores > -np.inf)
    else:
        cand = np.flatnonzero(scores > -np.inf)
    keys = (cand,) + tuple(t[cand] for t in reversed(ties)) + (-scores[cand],)
    return cand[np.lexsort(keys)[:k]]


def _foreign_scope(branch: Branch, scope: str | None) -> np.ndarray:
    """(n,) bool over ``branch``'s episodes: True where the episode was written from a scoped
    element of a scope other than ``scope`` (``retrieval.examples_cross_scope: false``)."""
    mask = np.zeros(len(branch.episodes), dtype=bool)
    for s, rows in branch.episodes.scopes.items():
        if s != scope:
            mask[list(rows)] = True
    return mask


def _zone_ok(state: AdaptiveState, policy: Policy, b: Branch, selected: str, function: str) -> bool:
    """Whether another branch ``b`` is in the routed branch's read zone (``retrieval.zone``,
    ``retrieval.zone_gate``)."""
    if policy.retrieval.zone == "family" and b.label.function != function:
        return False
    return admitted(state, policy, b.id, selected)


def _episodes_zoned(state: AdaptiveState, policy: Policy, inp: StepInput, selected: str, function: str) -> tuple[Scored, ...]:
    """``_episodes`` under the read zone: ``own_first`` takes the routed branch's top-k, then
    fills the rest from the other eligible branches."""
    p = policy.retrieval
    if p.zone == "global" and not p.zone_gate:
        return _episodes(state, policy, inp, selected)
    if p.zone != "own_first":
        return _episodes(state, policy, inp, selected, function)
    own = _episodes(state, policy, inp, selected, function, with_others=False)
    if len(own) >= p.examples_k:
        return own
    rest = [s for s in _episodes(state, policy, inp, selected, function, own_rows=False) if s.branch_id != selected]
    return _per_answer(list(own) + rest, p.examples_k, p.examples_per_answer)


def _episodes(
    state: AdaptiveState, policy: Policy, inp: StepInput, selected: str, function: str | None = None,
    *, with_others: bool = True, own_rows: bool = True,
) -> tuple[Scored, ...]:
    """Top ``examples_k`` episodes over the eligible branches, ordered by (score desc, branch
    creation order, row within the branch); other branches' rows need ``examples_min_similarity``,
    the routed branch's own rows ``examples_own_min_similarity`` (-1: none).

    With other branches eligible, one product over the bank's episodic index scores every
    stored episode; rows of ineligible branches (inactive, context function, shape-excluded)
    and other-branch rows under the threshold are set to ``-inf`` before the top-k.
    """
    p = policy.retrieval
    k = p.examples_k
    cap = p.examples_per_answer
    guard = policy.routing.shape_guard and inp.shape is not None
    own: Branch | None = None
    others: list[Branch] = []
    for b in state.active_branches():
        if not len(b.episodes) or b.label.function == CONTEXT_FUNCTION:
            continue
        if b.id == selected:
            if own_rows:
                own = b
        elif with_others and p.examples_cross_branch and not (guard and b.shape not in (None, inp.shape)):
            if function is None or _zone_ok(state, policy, b, selected, function):
                others.append(b)
    if k <= 0 or (own is None and not others):
        return ()
    q = as_vector(inp.embedding)
    walled = not p.examples_cross_scope
    if not others and own is not None:  # only the routed branch: its own rows
        scores = own.episodes.matrix.dots(q)
        if walled:
            scores += _penalty(_foreign_scope(own, inp.scope))
        if p.examples_own_min_similarity > -1.0:
            scores += _penalty(scores < p.examples_own_min_similarity)
        rows = _top(scores, _candidates(k, cap, len(scores))).tolist()
        return _per_answer((Scored(own.episodes.records[i], round(float(scores[i]), 6), own.id) for i in rows), k, cap)
    index = index_of(state)
    nums, local = index.where()
    by_num = {branch_number(b.id): b for b in others}
    own_num = -1
    if own is not None:
        own_num = branch_number(own.id)
        by_num[own_num] = own
    scores = index.scores(q)  # a fresh (n,) array: masked in place
    thr, own_thr = p.examples_min_similarity, p.examples_own_min_similarity
    if len(by_num) == len(index.stores):  # every indexed branch is eligible: only the thresholds
        drop = scores < thr
        if own_num >= 0:
            mine = nums == own_num
            drop &= ~mine
            if own_thr > -1.0:
                drop |= mine & (scores < own_thr)
    else:
        code = np.zeros(1 + max(branch_number(bid) for bid in state.branches), dtype=np.int8)  # 0 out, 1 other, 2 routed
        code[list(by_num)] = 1
        if own_num >= 0:
            code[own_num] = 2
        c = code[nums]
        drop = (c == 0) | ((c == 1) & (scores < thr))
        if own_thr > -1.0:
            drop |= (c == 2) & (scores < own_thr)
    if walled:
        for num, b in by_num.items():
            foreign = _foreign_scope(b, inp.scope)
            if foreign.any():
                sel = nums == num
                drop[sel] |= foreign[local[sel]]
    scores += _penalty(drop)
    ranked = _top(scores, _candidates(k, cap, len(scores)), nums, local).tolist()
    return _per_answer((Scored(by_num[int(nums[j])].episodes.records[int(local[j])], round(float(scores[j]), 6),
                               by_num[int(nums[j])].id) for j in ranked), k, cap)


def _candidates(k: int, cap: int, n: int) -> int:
    """How many of ``n`` scored rows to rank: the top ``k``, or with a cap per answer
    (``retrieval.examples_per_answer`` > 0) all of them, for :func:`_per_answer` to skip through."""
    return k if cap == 0 else n


def _answer_key(s: Scored) -> str:
    return str(s.item.answer).strip()  # type: ignore[attr-defined]


def _per_answer(ranked: Iterable[Scored], k: int, cap: int) -> tuple[Scored, ...]:
    """The first ``k`` of ``ranked`` (best first, built lazily) keeping at most ``cap`` items of
    one answer (``retrieval.examples_per_answer``; 0: no cap, the first ``k``)."""
    if cap == 0:
        return tuple(islice(ranked, k))
    used: dict[str, int] = {}
    out: list[Scored] = []
    for s in ranked:
        a = _answer_key(s)
        if used.get(a, 0) < cap:
            used[a] = used.get(a, 0) + 1
            out.append(s)
            if len(out) == k:
                break
    return tuple(out)


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
            if own or rule.id in tier_ids or (cross and c.status == "active" and _zone_ok(state, policy, b, selected, function)):
                seen.add(rule.id)
                found.append((rule, c, b.id))
    if not found:
        return ()
    embs = np.frombuffer(b"".join(rule.embedding for rule, _, _ in found), dtype=np.float32).reshape(len(found), -1)
    cos = row_dots(embs, as_vector(inp.embedding)).tolist()
    out = [(rule_score(c_j, c, policy), rule.id, rule, bid) for c_j, (rule, c, bid) in zip(cos, found)]
    if policy.retrieval.zone == "own_first":
        out.sort(key=lambda t: (t[3] != selected, -t[0], t[1]))
    else:
        out.sort(key=lambda t: (-t[0], t[1]))
    return tuple(Scored(r, round(s, 6), bid) for s, _, r, bid in out[: policy.retrieval.rules_k])


def _anti_patterns(branch: Branch | None, policy: Policy, inp: StepInput) -> tuple[Scored, ...]:
    if branch is None or not len(branch.anti_patterns):
        return ()
    scores = branch.anti_patterns.matrix.dots(as_vector(inp.embedding))
    thr = policy.retrieval.failures_min_similarity
    if thr > -1.0:  # below the threshold a failure is out (-inf), so it never fills a place
        scores = np.where(scores >= thr, scores, -np.inf)
    return tuple(Scored(branch.anti_patterns.records[i], round(float(scores[i]), 6), branch.id) for i in _top(scores, policy.retrieval.failures_k))


def _context(state: AdaptiveState, policy: Policy, inp: StepInput, branch: Branch | None) -> tuple[Scored, ...]:
    p = policy.retrieval
    if p.context_k <= 0:
        return ()
    q = as_vector(inp.embedding)
    sources: list[tuple[Branch, list[int]]] = []
    if inp.scope is not None:
        for b in state.active_branches():
            idx = list(b.context.scopes.get(inp.scope, ()))
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


def _distinct(scored: tuple[Scored, ...]) -> int:
    """Distinct answers (stripped) among retrieved episodes or anti-patterns."""
    return len({_answer_key(s) for s in scored})


def retrieve(state: AdaptiveState, policy: Policy, inp: StepInput, decision: RouteDecision) -> Retrieved:
    """Gather ``R_t`` for ``inp`` routed by ``decision`` (spec §4). Pure; (d,) query = ``inp.embedding``."""
    branch = state.branches.get(decision.branch_id)
    k = policy.retrieval.working_memory_k
    working = tuple(t for t in state.working_memory if t.branch_id == decision.branch_id)[-k:] if k else ()
    def shown(block: str) -> bool:
        return block_shown(branch, block, policy)

    p = policy.retrieval
    episodes = _episodes_zoned(state, policy, inp, decision.branch_id, decision.label.function) if shown("examples") else ()
    anti = _anti_patterns(branch, policy, inp) if shown("mistakes") else ()
    return Retrieved(
        episodes=episodes if _distinct(episodes) >= p.examples_min_distinct else (),
        rules=_rules(state, policy, inp, decision.branch_id, decision.label.function) if shown("rules") else (),
        anti_patterns=anti if _distinct(anti) >= p.mistakes_min_distinct else (),
        context=_context(state, policy, inp, branch) if shown("scoped_context") else (),
        working=working if shown("working_memory") else (),
    )
