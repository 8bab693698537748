"""Policy fields the shipped default sets (results/2026-12-02-qwen15-heldout131.md):
``rules.distill_growth`` spaces a branch's distillations geometrically,
``rules.distill_after_miss`` distils only where the model has missed since the last
distillation, and ``retrieval.failures_min_similarity`` shows a failure only beside a
near-identical input."""

from __future__ import annotations

import attrs
import numpy as np
from helpers import make_input

from rizz.core import CandidateRule, Policy, Verdict, distill_batch, rizz

V1 = Verdict(1.0, "exact_match")
V0 = Verdict(0.0, "exact_match")


def _distill_points(policy: Policy, successes: int, misses: frozenset[int] = frozenset()) -> list[int]:
    """The answered steps (1-based) after which ``distill_batch`` asks for a distillation; the
    steps in ``misses`` (0-based) are answered wrongly, the others rightly."""
    r = rizz(policy)
    s, out = r.init(), []
    e = np.eye(32, dtype=np.float32)[7]
    for t in range(successes):
        s = r.step(s, make_input(t, 0, seed=100 + t, answer=f"A{t}"), V0 if t in misses else V1)
        if distill_batch(s, policy, "b0"):
            out.append(t + 1)
            s, _ = r.distill_round(s, "b0", t, (CandidateRule(f"case {t}", "answer A", e),))
    return out


def test_fixed_count_distils_every_distill_every_successes():
    assert _distill_points(Policy(), 20) == [4, 8, 12, 16, 20]


def test_growth_two_distils_after_4_12_28_and_caps_the_wait():
    grow = attrs.evolve(Policy(), rules=attrs.evolve(Policy().rules, distill_growth=2.0))
    assert _distill_points(grow, 64) == [4, 12, 28, 60]
    capped = attrs.evolve(Policy(), rules=attrs.evolve(Policy().rules, distill_growth=2.0, distill_max_every=8))
    assert _distill_points(capped, 40) == [4, 12, 20, 28, 36]


def test_growth_off_stores_nothing_in_the_state():
    r = rizz(Policy())
    s = r.step(r.init(), make_input(0, 0, seed=1), V1)
    s, _ = r.distill_round(s, "b0", 0, ())
    assert (s.branches["b0"].stats.distill_due, s.branches["b0"].stats.distill_answered) == (0, 0)


def test_after_miss_an_always_right_branch_never_distils():
    after = attrs.evolve(Policy(), rules=attrs.evolve(Policy().rules, distill_after_miss=True))
    assert _distill_points(after, 30) == []
    assert _distill_points(Policy(), 30, frozenset()) == [4, 8, 12, 16, 20, 24, 28]


def test_after_miss_waits_for_both_the_successes_and_a_miss_since_the_last_distillation():
    after = attrs.evolve(Policy(), rules=attrs.evolve(Policy().rules, distill_after_miss=True))
    # a miss at step 2 (before 4 successes): due at the 4th success (step 5); the next needs a new miss
    assert _distill_points(after, 30, frozenset({2})) == [5]
    # misses at steps 2 and 14: the second distillation comes right after the second miss
    assert _distill_points(after, 30, frozenset({2, 14})) == [5, 15]
    # a miss before the successes are in: the distillation waits for the 4th success since the last one
    assert _distill_points(after, 30, frozenset({2, 6})) == [5, 10]


def test_a_failure_is_shown_only_beside_a_near_identical_input():
    near = attrs.evolve(Policy(), retrieval=attrs.evolve(Policy().retrieval, failures_min_similarity=0.92))
    for policy, expect_other in ((Policy(), 1), (near, 0)):
        r = rizz(policy)
        s = r.step(r.init(), make_input(0, 0, seed=0, answer="wrong"), V0)
        same = attrs.evolve(make_input(1, 0, seed=0), item_id="again")  # the same text and embedding
        other = make_input(1, 0, seed=5)  # same family, another input
        assert len(r.plan(s, same).retrieved.anti_patterns) == 1
        got = r.plan(s, other).retrieved.anti_patterns
        assert len(got) == expect_other
        if got:
            assert got[0].score < 0.92
