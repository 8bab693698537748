"""The step as three transitions: route_round, feedback_round, distill_round (live sessions)."""

from __future__ import annotations

import numpy as np
from helpers import make_input

from rizz.core import CandidateRule, Policy, Verdict, digest, events as ev, rizz
from rizz.core.apply import fold

R = rizz(Policy())
V1 = Verdict(1.0, "exact_match")


def test_step_is_feedback_after_route():
    s = R.init()
    for t, fam in enumerate([0, 1, 0, 2, 1, 0, 3, 3]):
        x = make_input(t, fam, seed=t)
        rr = R.route_round(s, x)
        composed, events = R.feedback_round(rr.state, x, V1, rr.decision)
        whole = R.step_with_events(s, x, V1)
        assert digest(composed) == digest(whole.state) and rr.events + events == whole.events
        s = whole.state


def test_two_answers_in_flight_that_both_spawn_get_distinct_branches_and_fold_in_any_order():
    s0 = R.init()
    x0, x1 = make_input(0, 0, seed=1), make_input(1, 1, seed=2)
    a = R.route_round(s0, x0)
    b = R.route_round(a.state, x1)  # routed after the first answer's spawn was folded
    assert (a.decision.branch_id, b.decision.branch_id) == ("b0", "b1") and b.decision.spawn is not None
    late_first, _ = R.feedback_round(b.state, x1, V1, b.decision)
    late_first, _ = R.feedback_round(late_first, x0, V1, a.decision)
    assert [len(late_first.branches[i].episodes) for i in ("b0", "b1")] == [1, 1]
    assert late_first.branches["b0"].episodes.records[0].step == 0  # written with its answer's step


def test_a_verdict_for_a_branch_pruned_meanwhile_is_dropped_and_changes_nothing():
    x = make_input(0, 0, seed=3)
    rr = R.route_round(R.init(), x)
    gone = fold(rr.state, [ev.BranchPruned("b0", "test")])
    out, events = R.feedback_round(gone, x, V1, rr.decision)
    assert events == (ev.VerdictDropped(x.item_id, "b0", 0, "branch-gone"),) and out is gone


def test_distill_round_adds_rules_and_resets_the_batch_and_ignores_a_gone_branch():
    s = R.init()
    for t in range(4):
        s = R.step(s, make_input(t, 0, seed=10 + t, answer=f"A{t}"), V1)
    assert s.branches["b0"].stats.successes_since_distill == 4
    e = np.eye(32, dtype=np.float32)[5]
    rules = (CandidateRule("the text is about rates", "answer B", e), CandidateRule("x", "y", e))
    after, events = R.distill_round(s, "b0", 3, rules)
    assert [type(x).__name__ for x in events] == ["RuleAdded", "RuleAdded", "DistillationRecorded"]
    assert [r.id for r in after.branches["b0"].rules] == ["r3-0", "r3-1"] and after.branches["b0"].stats.successes_since_distill == 0
    same, none = R.distill_round(s, "b9", 3, rules)
    assert none == () and same is s
