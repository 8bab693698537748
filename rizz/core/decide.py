"""Decide what a step writes (spec §6): write gates, anti-patterns, quarantine, rules.

Every function returns past-tense events and writes nothing. Writes target the selected
branch only; rule counters live in the state's rule ledger (so evidence about a rule that was
retrieved from another branch never rewrites that branch).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from rizz.core import events as ev
from rizz.core.evidence import decide_evidence
from rizz.core.inputs import CandidateRule, StepInput, Verdict
from rizz.core.policy import Policy
from rizz.core.records import (
    ROUTE_SCORE_DECIMALS,
    AdaptiveState,
    AntiPattern,
    Branch,
    ContextItem,
    Episode,
    QuarantinedItem,
    Rule,
    StepRecord,
    Turn,
    credited,
)
from rizz.core.routing import RouteDecision
from rizz.core.sketch import update_sketch
from rizz.core.vec import as_vector

__all__ = ["batch_keys", "content_key", "decide_distilled", "decide_memory", "decide_rules", "distill_batch", "distill_due", "missed_since_distill",
           "next_distill_due", "write_gate"]


def content_key(*parts: str | None) -> str:
    """sha256 (first 16 hex chars) of the parts joined by NUL: equal content, equal key."""
    h = hashlib.sha256("\x00".join(p or "" for p in parts).encode("utf-8"))
    return h.hexdigest()[:16]


def _centroid_cos(branch: Branch, embedding: bytes) -> float | None:
    if not branch.stats.centroid_sum:
        return None
    c = np.frombuffer(branch.stats.centroid_sum, np.float32)
    n = float(np.sqrt(c.dot(c)))  # what np.linalg.norm computes for a 1-d float vector, without its checks
    return float(np.dot(c, as_vector(embedding)) / n) if n > 0 else None


def write_gate(branch: Branch, policy: Policy, inp: StepInput, verdict: Verdict) -> list[object]:
    """The write gate (spec §6): what the verdict on an answered ``inp`` writes into ``branch``,
    as one event: ``EpisodeWritten`` (reward ≥ the verifier's write threshold; under
    ``write.corrections`` also a lower reward whose verdict carries a correction, written with
    the corrected answer), ``Quarantined``
    (far from the centroid, or a middling reward), ``AntiPatternWritten`` (a parsed answer at
    or below ``write.failure_threshold``), ``EpisodeDeduplicated`` or ``InteractionDiscarded``
    (writes off, unparsed, low reward). Thresholds: :class:`~rizz.core.policy.WritePolicy`,
    :class:`~rizz.core.policy.QuarantinePolicy`."""
    w, q = policy.write, policy.quarantine
    answer = inp.answer or ""
    r = verdict.reward
    bid = branch.id
    if not w.enabled:
        return [ev.InteractionDiscarded(bid, "writes-disabled", inp.step)]
    key = content_key(inp.text, answer)
    if r >= policy.write_threshold(verdict.verifier):
        if q.enabled and len(branch.episodes) >= q.centroid_min_size:
            cos = _centroid_cos(branch, inp.embedding)
            if cos is not None and cos < q.centroid_min_similarity:
                item = QuarantinedItem(key, inp.text, answer, r, "far-from-centroid", inp.step)
                return [ev.Quarantined(bid, item)]
        if w.dedupe and key in branch.episodes.keys:
            return [ev.EpisodeDeduplicated(bid, key)]
        return [ev.EpisodeWritten(bid, Episode(key, inp.text, answer, r, inp.scope, inp.step), inp.embedding)]
    if w.corrections and verdict.correction is not None and verdict.correction.strip():
        # the user's right answer: a verified example of it (reward 1.0: right by the verdict's own word)
        fixed = verdict.correction
        ckey = content_key(inp.text, fixed)
        if w.dedupe and ckey in branch.episodes.keys:
            return [ev.EpisodeDeduplicated(bid, ckey)]
        return [ev.EpisodeWritten(bid, Episode(ckey, inp.text, fixed, 1.0, inp.scope, inp.step), inp.embedding)]
    if not verdict.parsed:
        return [ev.InteractionDiscarded(bid, "unparsed", inp.step)]
    if r <= w.failure_threshold:
        if w.dedupe and key in branch.anti_patterns.keys:
            return [ev.EpisodeDeduplicated(bid, key)]
        scope = inp.scope if w.supersede else None  # kept only when supersede needs it (older digests unchanged)
        return [ev.AntiPatternWritten(bid, AntiPattern(key, inp.text, answer, r, inp.step, scope), inp.embedding)]
    if q.enabled and r >= q.middling_min:
        return [ev.Quarantined(bid, QuarantinedItem(key, inp.text, answer, r, "middling-reward", inp.step))]
    return [ev.InteractionDiscarded(bid, "low-reward", inp.step)]


def _rules_by_id(state: AdaptiveState) -> dict[str, Rule]:
    """Every rule of the bank by id; the first branch holding an id wins, as in ``state.rule``."""
    out: dict[str, Rule] = {}
    for b in state.branches.values():
        for r in b.rules:
            out.setdefault(r.id, r)
    return out


def decide_rules(state: AdaptiveState, policy: Policy, inp: StepInput, verdict: Verdict, branch_id: str) -> list[object]:
    """Counter moves, activation, retirement and tier promotion for the rules in the prompt.

    A rule in the prompt of a step with reward ≥ ``helpful_reward`` gains a helpful count
    (crediting ``branch_id``); reward ≤ ``harmful_reward`` on a parsed answer gains a harmful
    count. Active after ``activation_helpful`` helpful uses with H > A; retired when
    A − H ≥ ``retire_harmful_margin``; promoted to the family tier with helpful evidence from
    ``family_min_branches`` branches, to the global tier with ``global_min_branches`` branches
    of ``global_min_functions`` functions (spec §6).
    """
    rp = policy.rules
    if not rp.enabled:
        return []
    out: list[object] = []
    helpful = int(verdict.reward >= rp.helpful_reward)
    harmful = int(verdict.parsed and verdict.reward <= rp.harmful_reward and not helpful)
    if not (helpful or harmful):
        return out
    by_id: dict[str, Rule] | None = None  # rule id -> rule, built once, on first need
    ledger = state.rule_ledger
    for rid in inp.prompt_rule_ids:
        try:
            c = ledger[rid]  # not Mapping.get: one Python call fewer per rule (a pmap has no get of its own)
        except KeyError:
            continue
        out.append(ev.RuleCountersMoved(rid, helpful, harmful, branch_id))
        # the counters after that move (what apply folds), as plain values
        h, a, status, tier = c.helpful + helpful, c.harmful + harmful, c.status, c.tier
        hb = c.helpful_branches.add(branch_id) if helpful and not credited(c.helpful_branches, branch_id) else c.helpful_branches
        if status != "retired" and a - h >= rp.retire_harmful_margin:
            out.append(ev.RuleRetired(rid))
            continue
        if status == "candidate" and h >= rp.activation_helpful and h > a:
            out.append(ev.RuleActivated(rid))
            status = "active"
        if status != "active":
            continue
        family = tier == "branch" and len(hb) >= rp.family_min_branches
        if not family and not (tier != "global" and len(hb) >= rp.global_min_branches):
            continue  # no promotion can follow: the rule itself is not needed (most steps)
        if by_id is None:
            by_id = _rules_by_id(state)
        rule = by_id.get(rid)
        if rule is None:
            continue
        if family:
            out.append(ev.RulePromoted(rid, "family", rule.function))
            tier = "family"
        if tier != "global" and len(hb) >= rp.global_min_branches:  # the functions only when they can decide
            functions = {state.branches[b].label.function for b in hb if b in state.branches}
            if len(functions) >= rp.global_min_functions:
                out.append(ev.RulePromoted(rid, "global", rule.function))
    return out


def batch_keys(policy: Policy, episode_keys: tuple[str, ...]) -> tuple[str, ...]:
    """The content keys a rule distilled now records as its ``sources``: the last
    ``rules.distill_every`` of the branch's ``episode_keys`` (the batch :func:`distill_batch`
    gives), or () unless ``write.supersede`` and ``write.supersede_derived`` are on."""
    w = policy.write
    return episode_keys[-policy.rules.distill_every :] if w.supersede and w.supersede_derived else ()


def decide_distilled(branch: Branch, policy: Policy, step: int, candidates: tuple[CandidateRule, ...], distilled: bool,
                     sources: tuple[str, ...] = ()) -> list[object]:
    """``RuleAdded`` for each new candidate (not already in ``branch``, room under
    ``max_per_branch``; id ``r<step>-<i>``; ``sources``: the batch's episode keys, see
    :func:`batch_keys`), then ``DistillationRecorded`` when ``distilled``."""
    if not policy.rules.enabled:
        return []
    out: list[object] = []
    known = {(r.antecedent, r.strategy) for r in branch.rules}
    room = policy.rules.max_per_branch - len(branch.rules)
    for i, cand in enumerate(candidates):
        if room <= 0 or (cand.antecedent, cand.strategy) in known:
            continue
        rule = Rule(f"r{step}-{i}", cand.antecedent, cand.strategy, cand.embedding, branch.id, branch.label.function, step, sources)
        out.append(ev.RuleAdded(branch.id, rule))
        known.add((cand.antecedent, cand.strategy))
        room -= 1
    if distilled:
        answered = branch.stats.answered if policy.rules.distill_after_miss else 0
        out.append(ev.DistillationRecorded(branch.id, len(out), next_distill_due(branch, policy), answered))
    return out


def distill_due(branch: Branch, policy: Policy) -> int:
    """Verified successes ``branch`` waits for before its next distillation: ``rules.distill_every``
    until a distillation under ``rules.distill_growth`` > 1 has set it (see :func:`next_distill_due`)."""
    return branch.stats.distill_due or policy.rules.distill_every


def next_distill_due(branch: Branch, policy: Policy) -> int:
    """The successes the distillation after this one waits for: the current wait times
    ``rules.distill_growth``, rounded up, at most ``rules.distill_max_every``; 0 (the fixed
    ``distill_every``, nothing stored) when the growth is 1. With growth 2 a branch distils after
    4, 12, 28, 60, … successes: O(log n) calls for n verified answers instead of n / 4."""
    rp = policy.rules
    if rp.distill_growth <= 1.0:
        return 0
    now = distill_due(branch, policy)
    return max(now, min(rp.distill_max_every, math.ceil(now * rp.distill_growth)))  # never shorter than now


def _derived(policy: Policy) -> bool:
    """``write.supersede_derived`` in effect (it needs ``write.supersede``)."""
    return policy.write.supersede and policy.write.supersede_derived


def _contradicted_turn(policy: Policy, verdict: Verdict) -> bool:
    """Under ``write.supersede_derived`` a substantive failure's turn is not remembered: its
    answer is contradicted by its own verdict (:mod:`rizz.core.supersede`; it is kept as an anti-pattern)."""
    return _derived(policy) and verdict.parsed and verdict.reward <= policy.write.failure_threshold


def _new_rules(branch: Branch, policy: Policy, inp: StepInput, written: list[object]) -> list[object]:
    """Rules handed in with the step (one-step mode): their batch is the branch's episodes
    after this step's write (``written``: the step's write events)."""
    if not inp.candidate_rules and not inp.distilled:
        return []
    keys = tuple(e.key for e in branch.episodes.records[-policy.rules.distill_every :]) + tuple(
        e.episode.key for e in written if isinstance(e, ev.EpisodeWritten))
    return decide_distilled(branch, policy, inp.step, inp.candidate_rules, inp.distilled, batch_keys(policy, keys))


def decide_memory(state: AdaptiveState, policy: Policy, inp: StepInput, verdict: Verdict | None, decision: RouteDecision) -> list[object]:
    """Events for the routed branch after the verdict: stats, writes, rules, working memory, history."""
    branch = state.branches[decision.branch_id]
    answered = not inp.context_only and verdict is not None
    reward = verdict.reward if answered and verdict is not None else None
    out: list[object] = [ev.Routed(branch.id, decision.score, inp.step, inp.shape, answered, reward)]
    if inp.context_only:
        if policy.write.enabled:
            key = content_key(inp.text, inp.scope)
            if policy.write.dedupe and key in branch.context.keys:
                out.append(ev.EpisodeDeduplicated(branch.id, key))
            else:
                item = ContextItem(key, inp.text, inp.scope, inp.step, inp.time, inp.instant_us)
                out.append(ev.ContextStored(branch.id, item, inp.embedding))
    written: list[object] = []
    if verdict is not None and not inp.context_only:
        written = write_gate(branch, policy, inp, verdict)
        out += written
        out += decide_rules(state, policy, inp, verdict, branch.id)
        out += decide_evidence(state, policy, inp, verdict, branch.id)
        if decision.features and policy.routing.router == "linucb":
            out.append(ev.BanditUpdated(decision.features, verdict.reward))
        if policy.sketch.enabled:
            out.append(ev.SketchUpdated(branch.id, update_sketch(branch.sketch, inp.embedding, policy.sketch.rank, policy.sketch.decay)))
        if policy.write.working_memory_size > 0 and inp.answer is not None and not _contradicted_turn(policy, verdict):
            scope = inp.scope if _derived(policy) else None  # kept only when supersede needs it (older digests unchanged)
            out.append(ev.TurnRemembered(Turn(inp.step, branch.id, inp.text, inp.answer, verdict.reward, scope), policy.write.working_memory_size))
    out += _new_rules(branch, policy, inp, written)
    # rounded (ROUTE_SCORE_DECIMALS): BLAS kernels differ in a float32 dot's last bits, so the raw
    # score would make a refold's digest depend on the machine that refolds it
    rec = StepRecord(inp.step, inp.item_id, branch.id, round(decision.score, ROUTE_SCORE_DECIMALS), decision.spawn is not None,
                     reward, inp.prompt_tokens, inp.completion_tokens, inp.dropped)
    out.append(ev.StepRecorded(rec))
    return out


def missed_since_distill(branch: Branch, policy: Policy) -> bool:
    """Whether ``branch`` answered below ``rules.helpful_reward`` since its last distillation
    (before the first: since it spawned). Looks at the branch's last 32 rewards
    (``BranchStats.recent_rewards``), so after more than 32 answers only the newest 32 count."""
    n = branch.stats.answered - branch.stats.distill_answered
    if n <= 0:
        return False
    recent = list(branch.stats.recent_rewards)[-n:]
    return any(r < policy.rules.helpful_reward for r in recent)


def distill_batch(state: AdaptiveState, policy: Policy, branch_id: str) -> tuple[Episode, ...]:
    """The verified episodes to distil into rules for ``branch_id`` now, or () when not due.

    Due once the branch has :func:`distill_due` successes since its last distillation
    (``rules.distill_every``, growing by ``rules.distill_growth``) and, under
    ``rules.distill_after_miss``, :func:`missed_since_distill`; the batch is the newest
    ``rules.distill_every`` verified episodes either way.
    """
    b = state.branches.get(branch_id)
    if b is None or not policy.rules.enabled or b.stats.successes_since_distill < distill_due(b, policy):
        return ()
    if policy.rules.distill_after_miss and not missed_since_distill(b, policy):
        return ()
    return tuple(b.episodes.records[-policy.rules.distill_every :])
