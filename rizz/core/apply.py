"""``apply(event, state) -> state``: fold one past-tense event into the state.

One ``singledispatch`` case per event (the eventsourcing shape, STYLE.md). Each case
replaces only what the event names, so every other branch stays the same object.

The derived bank-level episodic index (``AdaptiveState.episode_index``) is kept here too:
``EpisodeWritten`` appends one row; ``BranchesMerged`` and ``BranchPruned`` (of a branch
holding episodes) rebuild it from the branches; deactivation leaves it alone (retrieval
masks inactive branches).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import singledispatch
from typing import Any

import attrs
import numpy as np
from pyrsistent import pset, pvector

from rizz.core import events as ev
from rizz.core.bandit import bandit_update
from rizz.core.episode_index import EpisodeIndex
from rizz.core.evidence import moved
from rizz.core.records import AdaptiveState, Branch, BranchStats, Evidence, QuarantinedItem, RuleCounters
from rizz.core.sketch import merge_sketches
from rizz.core.vec import as_vector

__all__ = ["apply", "fold"]

_RECENT = 32  # rewards kept in BranchStats.recent_rewards


def _put(state: AdaptiveState, branch: Branch) -> AdaptiveState:
    return attrs.evolve(state, branches=state.branches.set(branch.id, branch))


def _stats(branch: Branch, **changes: Any) -> Branch:
    return attrs.evolve(branch, stats=attrs.evolve(branch.stats, **changes))


def _counters(state: AdaptiveState, rule_id: str) -> RuleCounters:
    return state.rule_ledger.get(rule_id, RuleCounters())


def _ledger(state: AdaptiveState, rule_id: str, **changes: Any) -> AdaptiveState:
    c = attrs.evolve(_counters(state, rule_id), **changes)
    return attrs.evolve(state, rule_ledger=state.rule_ledger.set(rule_id, c))


@singledispatch
def apply(event: object, state: AdaptiveState) -> AdaptiveState:
    """Fold ``event`` into ``state``. Raises TypeError for an unknown event type."""
    raise TypeError(f"no apply() case for {type(event).__name__}")


def fold(state: AdaptiveState, events: Iterable[object]) -> AdaptiveState:
    """Apply ``events`` in order."""
    for e in events:
        state = apply(e, state)
    return state


@apply.register
def _(e: ev.BranchSpawned, s: AdaptiveState) -> AdaptiveState:
    b = Branch(e.branch_id, e.label, e.anchor, e.label_embedding, e.shape, stats=BranchStats(created=e.step, last_used=e.step))
    return attrs.evolve(s, branches=s.branches.set(b.id, b), next_branch=s.next_branch + 1)


@apply.register
def _(e: ev.LabelSnapped, s: AdaptiveState) -> AdaptiveState:
    return s  # recorded for audits; the snapped label is already in the routing decision


@apply.register
def _(e: ev.Routed, s: AdaptiveState) -> AdaptiveState:
    b = s.branches[e.branch_id]
    st = b.stats
    shapes = st.shapes.set(e.shape, st.shapes.get(e.shape, 0) + 1) if e.shape else st.shapes
    changes: dict[str, object] = {"traffic": st.traffic + 1, "last_used": e.step, "shapes": shapes}
    if e.answered and e.reward is not None:
        recent = st.recent_rewards.append(e.reward)
        changes.update(
            answered=st.answered + 1,
            reward_sum=st.reward_sum + e.reward,
            recent_rewards=recent[-_RECENT:] if len(recent) > _RECENT else recent,
        )
    return attrs.evolve(_put(s, _stats(b, **changes)), steps=s.steps + 1)


@apply.register
def _(e: ev.EpisodeWritten, s: AdaptiveState) -> AdaptiveState:
    old = s.branches[e.branch_id]
    v = as_vector(e.embedding)
    csum = v if not old.stats.centroid_sum else np.frombuffer(old.stats.centroid_sum, np.float32) + v
    b = attrs.evolve(old, episodes=old.episodes.add(e.episode, e.embedding))
    b = _stats(b, successes_since_distill=b.stats.successes_since_distill + 1, centroid_sum=csum.astype(np.float32).tobytes())
    branches = s.branches.set(b.id, b)
    index = s.episode_index.with_write(branches, b.id, old.episodes, e.embedding)
    return attrs.evolve(s, branches=branches, episode_index=index)


@apply.register
def _(e: ev.EpisodeDeduplicated, s: AdaptiveState) -> AdaptiveState:
    return s


@apply.register
def _(e: ev.AntiPatternWritten, s: AdaptiveState) -> AdaptiveState:
    b = s.branches[e.branch_id]
    return _put(s, attrs.evolve(b, anti_patterns=b.anti_patterns.add(e.anti_pattern, e.embedding)))


@apply.register
def _(e: ev.Quarantined, s: AdaptiveState) -> AdaptiveState:
    b = s.branches[e.branch_id]
    return _put(s, attrs.evolve(b, quarantine=b.quarantine.append(e.item)))


@apply.register
def _(e: ev.InteractionDiscarded, s: AdaptiveState) -> AdaptiveState:
    return s


@apply.register
def _(e: ev.VerdictDropped, s: AdaptiveState) -> AdaptiveState:
    return s


@apply.register
def _(e: ev.ContextStored, s: AdaptiveState) -> AdaptiveState:
    b = s.branches[e.branch_id]
    return _put(s, attrs.evolve(b, context=b.context.add(e.item, e.embedding)))


@apply.register
def _(e: ev.RuleAdded, s: AdaptiveState) -> AdaptiveState:
    b = s.branches[e.branch_id]
    s = _put(s, attrs.evolve(b, rules=b.rules.append(e.rule)))
    return attrs.evolve(s, rule_ledger=s.rule_ledger.set(e.rule.id, RuleCounters()))


@apply.register
def _(e: ev.DistillationRecorded, s: AdaptiveState) -> AdaptiveState:
    return _put(s, _stats(s.branches[e.branch_id], successes_since_distill=0, distill_due=e.next_due, distill_answered=e.answered))


@apply.register
def _(e: ev.RuleCountersMoved, s: AdaptiveState) -> AdaptiveState:
    c = _counters(s, e.rule_id)
    hb = c.helpful_branches.add(e.branch_id) if e.helpful and e.branch_id not in c.helpful_branches else c.helpful_branches
    c = RuleCounters(c.helpful + e.helpful, c.harmful + e.harmful, c.status, hb, c.tier)
    return attrs.evolve(s, rule_ledger=s.rule_ledger.set(e.rule_id, c))


@apply.register
def _(e: ev.RuleActivated, s: AdaptiveState) -> AdaptiveState:
    return _ledger(s, e.rule_id, status="active")


@apply.register
def _(e: ev.RuleRetired, s: AdaptiveState) -> AdaptiveState:
    return _ledger(s, e.rule_id, status="retired")


@apply.register
def _(e: ev.RulePromoted, s: AdaptiveState) -> AdaptiveState:
    s = _ledger(s, e.rule_id, tier=e.tier)
    if e.tier == "global":
        return attrs.evolve(s, global_rules=s.global_rules.append(e.rule_id))
    fam = s.family_rules.get(e.function)
    fam = fam.append(e.rule_id) if fam is not None else pvector([e.rule_id])
    return attrs.evolve(s, family_rules=s.family_rules.set(e.function, fam))


@apply.register
def _(e: ev.BranchesMerged, s: AdaptiveState) -> AdaptiveState:
    kept, gone = s.branches[e.kept], s.branches[e.absorbed]
    ks, gs = kept.stats, gone.stats
    csum = b""
    if ks.centroid_sum or gs.centroid_sum:
        parts = [np.frombuffer(x, np.float32) for x in (ks.centroid_sum, gs.centroid_sum) if x]
        csum = np.sum(parts, axis=0).astype(np.float32).tobytes()
    shapes = ks.shapes
    for k, v in gs.shapes.items():
        shapes = shapes.set(k, shapes.get(k, 0) + v)
    known = pset(r.id for r in kept.rules)
    stats = attrs.evolve(
        ks,
        traffic=ks.traffic + gs.traffic,
        answered=ks.answered + gs.answered,
        reward_sum=ks.reward_sum + gs.reward_sum,
        last_used=max(ks.last_used, gs.last_used),
        shapes=shapes,
        successes_since_distill=ks.successes_since_distill + gs.successes_since_distill,
        distill_answered=ks.distill_answered + gs.distill_answered,
        centroid_sum=csum,
    )
    merged = attrs.evolve(
        kept,
        sketch=merge_sketches(kept.sketch, gone.sketch),
        episodes=kept.episodes.merged(gone.episodes),
        rules=kept.rules.extend(r for r in gone.rules if r.id not in known),
        anti_patterns=kept.anti_patterns.merged(gone.anti_patterns),
        context=kept.context.merged(gone.context),
        quarantine=kept.quarantine.extend(gone.quarantine),
        stats=stats,
    )
    branches = s.branches.set(kept.id, merged).remove(gone.id)
    return attrs.evolve(s, branches=branches, episode_index=EpisodeIndex.build(branches.values()))


@apply.register
def _(e: ev.BranchDeactivated, s: AdaptiveState) -> AdaptiveState:
    return _put(s, attrs.evolve(s.branches[e.branch_id], active=False))


@apply.register
def _(e: ev.BranchPruned, s: AdaptiveState) -> AdaptiveState:
    branches = s.branches.remove(e.branch_id)
    if e.branch_id not in s.episode_index.stores:  # no rows of it in the index
        return attrs.evolve(s, branches=branches)
    return attrs.evolve(s, branches=branches, episode_index=EpisodeIndex.build(branches.values()))


@apply.register
def _(e: ev.TurnRemembered, s: AdaptiveState) -> AdaptiveState:
    wm = s.working_memory.append(e.turn)
    return attrs.evolve(s, working_memory=wm[-e.capacity :] if len(wm) > e.capacity else wm)


@apply.register
def _(e: ev.StepRecorded, s: AdaptiveState) -> AdaptiveState:
    return attrs.evolve(s, history=attrs.evolve(s.history, records=s.history.records.append(e.record)))


@apply.register
def _(e: ev.MemoryRetired, s: AdaptiveState) -> AdaptiveState:
    if e.store == "rules":
        return _retire_rule(e, s)
    if e.store == "working_memory":
        return _retire_turn(e, s)
    b = s.branches[e.branch_id]
    store = getattr(b, e.store)
    rec = next(r for r in store.records if r.key == e.key)
    i = next(i for i, r in enumerate(store.records) if r.key == e.key)
    text: str = getattr(rec, "input", "") or getattr(rec, "text", "")
    item = QuarantinedItem(e.key, text, getattr(rec, "answer", ""), getattr(rec, "reward", 0.0), e.reason, e.step)
    b = attrs.evolve(b, **{e.store: store.without(e.key)}, quarantine=b.quarantine.append(item))
    if e.store != "episodes":
        return _put(s, b)
    # the centroid is the sum of the episodic embeddings: take the retired row out of it
    csum = np.frombuffer(b.stats.centroid_sum, np.float32) - store.matrix.rows()[i]
    b = _stats(b, centroid_sum=csum.astype(np.float32).tobytes() if len(b.episodes) else b"")
    branches = s.branches.set(b.id, b)
    return attrs.evolve(s, branches=branches, episode_index=EpisodeIndex.build(branches.values()))


def _retire_rule(e: ev.MemoryRetired, s: AdaptiveState) -> AdaptiveState:
    """A rule distilled from a superseded episode: out of the branch's rules, into its
    quarantine (``input`` = the rule's text), its counters retired (so no tier shows it)."""
    b = s.branches[e.branch_id]
    rule = next(r for r in b.rules if r.id == e.key)
    item = QuarantinedItem(rule.id, rule.text(), "", 0.0, e.reason, e.step)
    s = _put(s, attrs.evolve(b, rules=pvector(r for r in b.rules if r.id != e.key), quarantine=b.quarantine.append(item)))
    return _ledger(s, e.key, status="retired")


def _retire_turn(e: ev.MemoryRetired, s: AdaptiveState) -> AdaptiveState:
    """A working-memory turn (``key`` = ``turn-<step>``) carrying a contradicted answer: out of
    ``W``, into its branch's quarantine when the branch still exists."""
    turn = next(t for t in s.working_memory if f"turn-{t.step}" == e.key)
    s = attrs.evolve(s, working_memory=pvector(t for t in s.working_memory if t is not turn))
    b = s.branches.get(e.branch_id)
    if b is None:
        return s
    return _put(s, attrs.evolve(b, quarantine=b.quarantine.append(QuarantinedItem(e.key, turn.input, turn.answer, turn.reward, e.reason, e.step))))


@apply.register
def _(e: ev.BlockEvidenceMoved, s: AdaptiveState) -> AdaptiveState:
    b = s.branches[e.branch_id]
    be = b.stats.block_evidence
    return _put(s, _stats(b, block_evidence=be.set(e.block, moved(be.get(e.block, Evidence()), e.shown, e.reward, e.helpful, e.harmful))))


@apply.register
def _(e: ev.ZoneEvidenceMoved, s: AdaptiveState) -> AdaptiveState:
    key = (e.source, e.reader)
    old = s.zone_evidence.get(key, Evidence())
    return attrs.evolve(s, zone_evidence=s.zone_evidence.set(key, moved(old, True, e.reward, e.helpful, e.harmful)))


@apply.register
def _(e: ev.SketchUpdated, s: AdaptiveState) -> AdaptiveState:
    return _put(s, attrs.evolve(s.branches[e.branch_id], sketch=e.sketch))


@apply.register
def _(e: ev.BanditUpdated, s: AdaptiveState) -> AdaptiveState:
    return attrs.evolve(s, router=bandit_update(s.router, e.features, e.reward))
