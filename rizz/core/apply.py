"""``apply(event, state) -> state``: fold one past-tense event into the state.

One ``singledispatch`` case per event (the eventsourcing shape, STYLE.md). Each case
replaces only what the event names, so every other branch stays the same object.

:func:`fold` applies a round's events to a :class:`_Draft` (the state's fields, reassigned
in place) and builds ONE :class:`AdaptiveState` at the end: a step folds ~8 events, and
building a state per event (``attrs.evolve``) was the largest single cost of a replay.
The draft never leaves :func:`fold`, so the fold stays a pure function of its arguments;
every value a case stores in it is a new persistent value, as before.

The derived bank-level episodic index (``AdaptiveState.episode_index``) is kept here too:
``EpisodeWritten`` appends one row; ``BranchesMerged`` and ``BranchPruned`` (of a branch
holding episodes) rebuild it from the branches; deactivation leaves it alone (retrieval
masks inactive branches).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from functools import singledispatch
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs
import numpy as np
from pyrsistent import PMap, PVector, pset, pvector

from rizz.core import events as ev
from rizz.core.bandit import bandit_update
from rizz.core.episode_index import EpisodeIndex
from rizz.core.evidence import moved
from rizz.core.records import (
    AdaptiveState,
    Branch,
    BranchStats,
    Evidence,
    History,
    QuarantinedItem,
    RouterState,
    RuleCounters,
    Turn,
    carry_creation_order,
    credited,
)
from rizz.core.sketch import merge_sketches
from rizz.core.vec import as_vector

if TYPE_CHECKING:
    from pyrsistent.typing import PMapEvolver

__all__ = ["apply", "fold"]

_RECENT = 32  # rewards kept in BranchStats.recent_rewards

#: AdaptiveState's fields, in constructor order (all ``init``; the derived index included).
_FIELDS = tuple(f.name for f in attrs.fields(AdaptiveState))
_VALUES = operator.attrgetter(*_FIELDS)  # obj -> the tuple of those fields' values


class _Draft:
    """An :class:`AdaptiveState`'s fields while one :func:`fold` runs: each case reassigns the
    fields its event changes; :meth:`state` builds the state once. Same names and types as
    the state's fields (``_FIELDS``), except that the rule ledger is read and written through
    :meth:`counters` / :meth:`set_counters` (one pmap evolver for a step's ~4 counter moves;
    ``rule_ledger`` itself is stale while ``_ledger`` is set). ``_replaced``: the branches put
    under ids the state already had (id -> newest value), None once a case added or removed
    an id; it lets :meth:`state` carry the branches' creation order over (see
    :func:`~rizz.core.records.carry_creation_order`)."""

    __slots__ = (*_FIELDS, "_ledger", "_replaced")

    branches: PMap[str, Branch]
    next_branch: int
    working_memory: PVector[Turn]
    history: History
    rule_ledger: PMap[str, RuleCounters]
    family_rules: PMap[str, PVector[str]]
    global_rules: PVector[str]
    steps: int
    zone_evidence: PMap[tuple[str, str], Evidence]
    router: RouterState | None
    episode_index: EpisodeIndex
    _ledger: PMapEvolver[str, RuleCounters] | None
    _replaced: dict[str, Branch] | None

    def __init__(self, state: AdaptiveState) -> None:
        for name, value in zip(_FIELDS, _VALUES(state)):
            setattr(self, name, value)
        self._ledger = None
        self._replaced = {}

    def counters(self, rule_id: str) -> RuleCounters:
        """The counters of ``rule_id`` as folded so far (fresh ones for an id not in the ledger)."""
        ledger = self._ledger if self._ledger is not None else self.rule_ledger
        try:
            return ledger[rule_id]
        except KeyError:
            return RuleCounters()

    def set_counters(self, rule_id: str, counters: RuleCounters) -> None:
        if self._ledger is None:
            self._ledger = self.rule_ledger.evolver()
        self._ledger.set(rule_id, counters)

    def state(self, before: AdaptiveState) -> AdaptiveState:
        """The state these fields make; ``before`` itself when no field was reassigned."""
        if self._ledger is not None:
            self.rule_ledger = self._ledger.persistent()  # the same map when no value changed
        values = _VALUES(self)
        if all(map(operator.is_, values, _VALUES(before))):
            return before
        if self._replaced:
            carry_creation_order(before.branches, self.branches, self._replaced)
        return AdaptiveState(*values)


R = TypeVar("R", bound=attrs.AttrsInstance)
#: record class -> (getter of all its field values, field name -> position); see _evolve
_LAYOUT: dict[type, tuple[operator.attrgetter[Any], dict[str, int]]] = {}


def _evolve(inst: R, **changes: Any) -> R:
    """``attrs.evolve(inst, **changes)`` for the records this module rebuilds every step
    (Branch, BranchStats, RuleCounters): the same constructor call with the same values, but
    positional, from one ``attrgetter`` — half the cost of ``attrs.evolve``, whose per-field
    loop was ~10% of a replay. A class with one field, or a field that is not a plain
    positional ``init`` argument, goes through ``attrs.evolve``. Raises TypeError for a name
    that is not a field."""
    cls = type(inst)
    layout = _LAYOUT.get(cls)
    if layout is None:
        fields = attrs.fields(cls)
        if len(fields) < 2 or not all(f.init and f.alias == f.name and not f.kw_only for f in fields):  # attrgetter of 1 name: no tuple
            return cast(R, attrs.evolve(cast(Any, inst), **changes))
        layout = _LAYOUT[cls] = (operator.attrgetter(*(f.name for f in fields)), {f.name: i for i, f in enumerate(fields)})
    values_of, position = layout
    values = list(values_of(inst))
    for name, value in changes.items():
        i = position.get(name)
        if i is None:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
        values[i] = value
    return cls(*values)


def _put(d: _Draft, branch: Branch) -> None:
    """Put ``branch`` in place of the branch with its id (a new id: see BranchSpawned)."""
    d.branches = d.branches.set(branch.id, branch)
    if d._replaced is not None:
        d._replaced[branch.id] = branch


def _stats(branch: Branch, **changes: Any) -> Branch:
    return _evolve(branch, stats=_evolve(branch.stats, **changes))


def _ledger(d: _Draft, rule_id: str, **changes: Any) -> None:
    d.set_counters(rule_id, _evolve(d.counters(rule_id), **changes))


def apply(event: object, state: AdaptiveState) -> AdaptiveState:
    """Fold ``event`` into ``state``. Raises TypeError for an unknown event type."""
    return fold(state, (event,))


def fold(state: AdaptiveState, events: Iterable[object]) -> AdaptiveState:
    """Apply ``events`` in order. Raises TypeError for an unknown event type."""
    d: _Draft | None = None
    cases = _case.registry  # event type -> its case: events are final classes, so the exact type finds it
    for e in events:
        if d is None:
            d = _Draft(state)
        cases.get(type(e), _case)(e, d)  # _case: a subclass's case, or TypeError
    return state if d is None else d.state(state)


@singledispatch
def _case(event: object, d: _Draft) -> None:
    """Fold ``event`` into the draft ``d`` (one registered case per event type)."""
    raise TypeError(f"no apply() case for {type(event).__name__}")


@_case.register
def _(e: ev.BranchSpawned, d: _Draft) -> None:
    b = Branch(e.branch_id, e.label, e.anchor, e.label_embedding, e.shape, stats=BranchStats(created=e.step, last_used=e.step))
    _put(d, b)
    d._replaced = None  # a new id
    d.next_branch += 1


@_case.register
def _(e: ev.LabelSnapped, d: _Draft) -> None:
    pass  # recorded for audits; the snapped label is already in the routing decision


@_case.register
def _(e: ev.Routed, d: _Draft) -> None:
    b = d.branches[e.branch_id]
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
    _put(d, _stats(b, **changes))
    d.steps += 1


@_case.register
def _(e: ev.EpisodeWritten, d: _Draft) -> None:
    old = d.branches[e.branch_id]
    v = as_vector(e.embedding)
    st = old.stats
    csum = v if not st.centroid_sum else np.frombuffer(st.centroid_sum, np.float32) + v  # float32 + float32: float32
    stats = _evolve(st, successes_since_distill=st.successes_since_distill + 1, centroid_sum=csum.tobytes())
    b = _evolve(old, episodes=old.episodes.add(e.episode, e.embedding), stats=stats)
    _put(d, b)
    d.episode_index = d.episode_index.with_write(d.branches, b.id, old.episodes, e.embedding)


@_case.register
def _(e: ev.EpisodeDeduplicated, d: _Draft) -> None:
    pass


@_case.register
def _(e: ev.AntiPatternWritten, d: _Draft) -> None:
    b = d.branches[e.branch_id]
    _put(d, _evolve(b, anti_patterns=b.anti_patterns.add(e.anti_pattern, e.embedding)))


@_case.register
def _(e: ev.Quarantined, d: _Draft) -> None:
    b = d.branches[e.branch_id]
    _put(d, _evolve(b, quarantine=b.quarantine.append(e.item)))


@_case.register
def _(e: ev.InteractionDiscarded, d: _Draft) -> None:
    pass


@_case.register
def _(e: ev.VerdictDropped, d: _Draft) -> None:
    pass


@_case.register
def _(e: ev.ContextStored, d: _Draft) -> None:
    b = d.branches[e.branch_id]
    _put(d, _evolve(b, context=b.context.add(e.item, e.embedding)))


@_case.register
def _(e: ev.RuleAdded, d: _Draft) -> None:
    b = d.branches[e.branch_id]
    _put(d, _evolve(b, rules=b.rules.append(e.rule)))
    d.set_counters(e.rule.id, RuleCounters())


@_case.register
def _(e: ev.DistillationRecorded, d: _Draft) -> None:
    _put(d, _stats(d.branches[e.branch_id], successes_since_distill=0, distill_due=e.next_due, distill_answered=e.answered))


@_case.register
def _(e: ev.RuleCountersMoved, d: _Draft) -> None:
    c = d.counters(e.rule_id)
    hb = c.helpful_branches.add(e.branch_id) if e.helpful and not credited(c.helpful_branches, e.branch_id) else c.helpful_branches
    d.set_counters(e.rule_id, RuleCounters(c.helpful + e.helpful, c.harmful + e.harmful, c.status, hb, c.tier))


@_case.register
def _(e: ev.RuleActivated, d: _Draft) -> None:
    _ledger(d, e.rule_id, status="active")


@_case.register
def _(e: ev.RuleRetired, d: _Draft) -> None:
    _ledger(d, e.rule_id, status="retired")


@_case.register
def _(e: ev.RulePromoted, d: _Draft) -> None:
    _ledger(d, e.rule_id, tier=e.tier)
    if e.tier == "global":
        d.global_rules = d.global_rules.append(e.rule_id)
        return
    fam = d.family_rules.get(e.function)
    fam = fam.append(e.rule_id) if fam is not None else pvector([e.rule_id])
    d.family_rules = d.family_rules.set(e.function, fam)


@_case.register
def _(e: ev.BranchesMerged, d: _Draft) -> None:
    kept, gone = d.branches[e.kept], d.branches[e.absorbed]
    ks, gs = kept.stats, gone.stats
    csum = b""
    if ks.centroid_sum or gs.centroid_sum:
        parts = [np.frombuffer(x, np.float32) for x in (ks.centroid_sum, gs.centroid_sum) if x]
        csum = np.sum(parts, axis=0).astype(np.float32).tobytes()
    shapes = ks.shapes
    for k, v in gs.shapes.items():
        shapes = shapes.set(k, shapes.get(k, 0) + v)
    known = pset(r.id for r in kept.rules)
    stats = _evolve(
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
    merged = _evolve(
        kept,
        sketch=merge_sketches(kept.sketch, gone.sketch),
        episodes=kept.episodes.merged(gone.episodes),
        rules=kept.rules.extend(r for r in gone.rules if r.id not in known),
        anti_patterns=kept.anti_patterns.merged(gone.anti_patterns),
        context=kept.context.merged(gone.context),
        quarantine=kept.quarantine.extend(gone.quarantine),
        stats=stats,
    )
    d.branches = d.branches.set(kept.id, merged).remove(gone.id)
    d._replaced = None
    d.episode_index = EpisodeIndex.build(d.branches.values())


@_case.register
def _(e: ev.BranchDeactivated, d: _Draft) -> None:
    _put(d, _evolve(d.branches[e.branch_id], active=False))


@_case.register
def _(e: ev.BranchPruned, d: _Draft) -> None:
    d.branches = d.branches.remove(e.branch_id)
    d._replaced = None
    if e.branch_id in d.episode_index.stores:  # rows of it in the index
        d.episode_index = EpisodeIndex.build(d.branches.values())


@_case.register
def _(e: ev.TurnRemembered, d: _Draft) -> None:
    wm = d.working_memory.append(e.turn)
    d.working_memory = wm[-e.capacity :] if len(wm) > e.capacity else wm


@_case.register
def _(e: ev.StepRecorded, d: _Draft) -> None:
    d.history = History(d.history.records.append(e.record))


@_case.register
def _(e: ev.MemoryRetired, d: _Draft) -> None:
    if e.store == "rules":
        _retire_rule(e, d)
        return
    if e.store == "working_memory":
        _retire_turn(e, d)
        return
    b = d.branches[e.branch_id]
    store = getattr(b, e.store)
    rec = next(r for r in store.records if r.key == e.key)
    i = next(i for i, r in enumerate(store.records) if r.key == e.key)
    text: str = getattr(rec, "input", "") or getattr(rec, "text", "")
    item = QuarantinedItem(e.key, text, getattr(rec, "answer", ""), getattr(rec, "reward", 0.0), e.reason, e.step)
    b = _evolve(b, **{e.store: store.without(e.key)}, quarantine=b.quarantine.append(item))
    if e.store != "episodes":
        _put(d, b)
        return
    # the centroid is the sum of the episodic embeddings: take the retired row out of it
    csum = np.frombuffer(b.stats.centroid_sum, np.float32) - store.matrix.rows()[i]
    b = _stats(b, centroid_sum=csum.astype(np.float32).tobytes() if len(b.episodes) else b"")
    _put(d, b)
    d.episode_index = EpisodeIndex.build(d.branches.values())


def _retire_rule(e: ev.MemoryRetired, d: _Draft) -> None:
    """A rule distilled from a superseded episode: out of the branch's rules, into its
    quarantine (``input`` = the rule's text), its counters retired (so no tier shows it)."""
    b = d.branches[e.branch_id]
    rule = next(r for r in b.rules if r.id == e.key)
    item = QuarantinedItem(rule.id, rule.text(), "", 0.0, e.reason, e.step)
    _put(d, _evolve(b, rules=pvector(r for r in b.rules if r.id != e.key), quarantine=b.quarantine.append(item)))
    _ledger(d, e.key, status="retired")


def _retire_turn(e: ev.MemoryRetired, d: _Draft) -> None:
    """A working-memory turn (``key`` = ``turn-<step>``) carrying a contradicted answer: out of
    ``W``, into its branch's quarantine when the branch still exists."""
    turn = next(t for t in d.working_memory if f"turn-{t.step}" == e.key)
    d.working_memory = pvector(t for t in d.working_memory if t is not turn)
    b = d.branches.get(e.branch_id)
    if b is not None:
        _put(d, _evolve(b, quarantine=b.quarantine.append(QuarantinedItem(e.key, turn.input, turn.answer, turn.reward, e.reason, e.step))))


@_case.register
def _(e: ev.BlockEvidenceMoved, d: _Draft) -> None:
    b = d.branches[e.branch_id]
    be = b.stats.block_evidence
    _put(d, _stats(b, block_evidence=be.set(e.block, moved(be.get(e.block, Evidence()), e.shown, e.reward, e.helpful, e.harmful))))


@_case.register
def _(e: ev.ZoneEvidenceMoved, d: _Draft) -> None:
    key = (e.source, e.reader)
    old = d.zone_evidence.get(key, Evidence())
    d.zone_evidence = d.zone_evidence.set(key, moved(old, True, e.reward, e.helpful, e.harmful))


@_case.register
def _(e: ev.SketchUpdated, d: _Draft) -> None:
    _put(d, _evolve(d.branches[e.branch_id], sketch=e.sketch))


@_case.register
def _(e: ev.BanditUpdated, d: _Draft) -> None:
    d.router = bandit_update(d.router, e.features, e.reward)
