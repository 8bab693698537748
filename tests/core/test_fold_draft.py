"""A round's events folded at once (one draft of the state, one state built) equal the same
events applied one at a time, and the creation order carried over by a fold is the order a
sort gives."""

from __future__ import annotations

import collections

import numpy as np
from helpers import embed, make_input

from rizz.core import CandidateRule, Policy, Verdict, digest, events as ev, rizz
from rizz.core.apply import apply, fold
from rizz.core.policy import LifecyclePolicy


def _one_by_one(state, events):
    for e in events:
        state = apply(e, state)
    return state


def _sorted_active(state):
    return sorted((b for b in state.branches.values() if b.active), key=lambda b: (len(b.id), b.id))


def test_a_round_folded_at_once_equals_its_events_one_by_one_and_the_carried_order_is_sorted():
    r = rizz(Policy(lifecycle=LifecyclePolicy(max_branches=6, max_active=4, merge_every=5, stale_after=12)))
    rng = np.random.default_rng(7)
    s = r.init()
    seen: collections.Counter[str] = collections.Counter()
    for t in range(240):
        fam = int(rng.integers(4))
        ids = tuple(sorted(s.rule_ledger))[: int(rng.integers(4))]
        cands = (CandidateRule(f"when {fam}", f"do {t % 3}", embed(fam, 0.1, t).tobytes()),) if t % 5 == 0 else ()
        x = make_input(t, fam, seed=t, noise=0.3, prompt_rule_ids=ids, candidate_rules=cands, distilled=bool(cands))
        before = s
        s, events = r.step_with_events(s, x, Verdict(float(rng.choice([0.0, 0.5, 1.0])), "exact_match"))
        seen.update(type(e).__name__ for e in events)
        ref = _one_by_one(before, events)
        assert s == ref and digest(s) == digest(ref)
        assert np.array_equal(s.episode_index.matrix.rows(), ref.episode_index.matrix.rows())
        assert np.array_equal(s.episode_index.where(), ref.episode_index.where())
        got, want = s.active_branches(), _sorted_active(s)
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
    # the run went through every kind of change to the bank the carry must handle
    for kind in ("BranchSpawned", "BranchDeactivated", "RuleCountersMoved", "RulePromoted", "EpisodeWritten"):
        assert seen[kind], (kind, seen)


def test_a_fold_that_merges_prunes_or_spawns_carries_no_stale_order():
    r = rizz(Policy())
    s = r.init()
    for t, fam in enumerate([0, 1, 2, 3, 0, 1]):
        s = r.step(s, make_input(t, fam, seed=t), Verdict(1.0, "exact_match"))
    assert len(s.branches) == 4
    for events in ([ev.Routed("b1", 0.5, 9, None, False, None), ev.BranchesMerged("b1", "b2")],
                   [ev.Routed("b3", 0.5, 9, None, False, None), ev.BranchPruned("b0", "test")],
                   [ev.Routed("b3", 0.5, 9, None, False, None),
                    ev.BranchSpawned("b4", s.branches["b3"].label, s.branches["b3"].anchor, b"", None, 9)]):
        s.active_branches()  # the order of s is the one kept
        s2 = fold(s, events)
        got, want = s2.active_branches(), _sorted_active(s2)
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), [b.id for b in got]


def test_a_fold_of_no_change_returns_the_state_itself():
    r = rizz(Policy())
    s = r.step(r.init(), make_input(0, 0), Verdict(1.0, "exact_match"))
    assert apply(ev.InteractionDiscarded("b0", "low-reward", 1), s) is s
    assert fold(s, [ev.LabelSnapped(s.branches["b0"].label, s.branches["b0"].label, "jaccard", 1.0)]) is s
    assert apply(ev.Routed("b0", 0.5, 1, None, False, None), s).steps == s.steps + 1
