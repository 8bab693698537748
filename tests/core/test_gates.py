import attrs
import numpy as np
from helpers import embed, make_input
from hypothesis import given, settings, strategies as st

from rizz.core import CandidateRule, Policy, Verdict, distill_batch, events as ev, rizz


def _events(r, s, x, v):
    return r.step_with_events(s, x, v)


def test_write_gate_antipattern_quarantine_discard():
    r = rizz(Policy())
    s = r.step(r.init(), make_input(0, 2, seed=0), Verdict(0.9, "rouge_l"))  # 0.9 >= 0.35 writes
    b = s.branches["b0"]
    assert len(b.episodes) == 1 and b.episodes.records[0].reward == 0.9
    s, evs = _events(r, s, make_input(1, 2, seed=1), Verdict(0.2, "rouge_l"))  # middling
    q = [e for e in evs if isinstance(e, ev.Quarantined)]
    assert q and q[0].item.reason == "middling-reward" and len(s.branches["b0"].episodes) == 1
    s, evs = _events(r, s, make_input(2, 2, seed=2, answer="bad"), Verdict(0.05, "rouge_l"))  # substantive failure
    assert len(s.branches["b0"].anti_patterns) == 1
    s, evs = _events(r, s, make_input(3, 2, seed=3), Verdict(0.0, "rouge_l", parsed=False))
    assert [e.reason for e in evs if isinstance(e, ev.InteractionDiscarded)] == ["unparsed"]
    assert len(s.branches["b0"].anti_patterns) == 1
    # exact_match: default threshold 1.0, so 0.99 is not written
    s2 = r.step(r.init(), make_input(0, 0), Verdict(0.99, "exact_match"))
    assert len(s2.branches["b0"].episodes) == 0


def test_same_content_twice_stores_one_record():
    r = rizz(Policy())
    x = make_input(0, 0, seed=4)
    s = r.step(r.init(), x, Verdict(1.0))
    s, evs = _events(r, s, attrs.evolve(x, step=1), Verdict(1.0))
    assert len(s.branches["b0"].episodes) == 1 and any(isinstance(e, ev.EpisodeDeduplicated) for e in evs)
    nodedupe = attrs.evolve(Policy(), write=attrs.evolve(Policy().write, dedupe=False))
    r2 = rizz(nodedupe)
    s = r2.step(r2.step(r2.init(), x, Verdict(1.0)), attrs.evolve(x, step=1), Verdict(1.0))
    assert len(s.branches["b0"].episodes) == 2


def test_far_from_centroid_is_quarantined():
    r = rizz(Policy())
    s = r.init()
    for t in range(5):
        s = r.step(s, make_input(t, 0, seed=t, noise=0.05), Verdict(1.0))
    outlier = attrs.evolve(make_input(5, 0, seed=9), embedding=embed(1, 0.01, 9).tobytes())
    s, evs = _events(r, s, outlier, Verdict(1.0))
    assert [e.item.reason for e in evs if isinstance(e, ev.Quarantined)] == ["far-from-centroid"]
    assert len(s.branches["b0"].episodes) == 5 and len(s.branches["b0"].quarantine) == 1


def _rule(text):
    v = np.zeros(32, np.float32)
    v[0] = 1
    return CandidateRule(f"the input is {text}", "answer with one letter", v)


def test_rule_lifecycle_candidate_active_family_global():
    p = Policy()
    r = rizz(p)
    s = r.init()
    for t in range(4):
        s = r.step(s, make_input(t, 0, seed=t), Verdict(1.0))
    assert [e.input for e in distill_batch(s, p, "b0")] == [f"family 0 item {t}" for t in range(4)]
    x = attrs.evolve(make_input(4, 0, seed=4), candidate_rules=(_rule("a stance question"),), distilled=True)
    s = r.step(s, x, Verdict(1.0))
    rid = s.branches["b0"].rules[0].id
    assert s.rule_ledger[rid].status == "candidate" and distill_batch(s, p, "b0") == ()
    plan = r.plan(s, make_input(5, 0, seed=5))
    assert [sc.item.id for sc in plan.retrieved.rules] == [rid]  # own branch sees a candidate
    other = r.plan(s, make_input(5, 1, seed=5))
    assert other.retrieved.rules == ()  # other branches see only active rules
    # two helpful uses activate it
    for t in (5, 6):
        s = r.step(s, attrs.evolve(make_input(t, 0, seed=t), prompt_rule_ids=(rid,)), Verdict(1.0))
    assert s.rule_ledger[rid].status == "active" and s.rule_ledger[rid].helpful == 2
    # helpful evidence from branches of 3 branches / 2 functions -> family then global
    s = r.step(s, make_input(7, 1, seed=7), Verdict(1.0))
    s = r.step(s, attrs.evolve(make_input(8, 1, seed=8), prompt_rule_ids=(rid,)), Verdict(1.0))
    assert s.rule_ledger[rid].tier == "family" and list(s.family_rules["classify"]) == [rid]
    s = r.step(s, make_input(9, 3, seed=9), Verdict(1.0))
    s = r.step(s, attrs.evolve(make_input(10, 3, seed=10), prompt_rule_ids=(rid,)), Verdict(1.0))
    assert s.rule_ledger[rid].tier == "global" and list(s.global_rules) == [rid]


def test_harmful_rule_is_retired_and_counters_shape_score():
    p = Policy()
    r = rizz(p)
    s = r.step(r.init(), attrs.evolve(make_input(0, 0), candidate_rules=(_rule("x"),)), Verdict(1.0))
    rid = s.branches["b0"].rules[0].id
    for t in range(1, 4):
        s = r.step(s, attrs.evolve(make_input(t, 0, seed=t, answer=f"w{t}"), prompt_rule_ids=(rid,)), Verdict(0.0))
    c = s.rule_ledger[rid]
    assert (c.helpful, c.harmful, c.status) == (0, 3, "retired")
    assert r.plan(s, make_input(4, 0)).retrieved.rules == ()


def test_rule_score_formula():
    from rizz.core import rule_score
    from rizz.core.records import RuleCounters
    p = Policy()
    assert rule_score(0.5, RuleCounters(helpful=2, harmful=0), p) == 0.5 * 1.6
    assert rule_score(0.5, RuleCounters(helpful=0, harmful=10), p) == 0.5 * 0.30  # clipped at m_min
    assert rule_score(0.5, RuleCounters(helpful=100, harmful=0), p) == 0.5 * 3.00  # clipped at m_max


def test_failures_stay_in_their_branch_examples_cross():
    r = rizz(Policy())
    s = r.init()
    s = r.step(s, make_input(0, 0, seed=0, answer="wrong"), Verdict(0.0))
    s = r.step(s, make_input(1, 0, seed=1), Verdict(1.0))
    s = r.step(s, make_input(2, 1, seed=2), Verdict(1.0))
    p0 = r.plan(s, make_input(3, 0, seed=3)).retrieved
    p1 = r.plan(s, make_input(3, 1, seed=3)).retrieved
    assert [f.branch_id for f in p0.anti_patterns] == ["b0"] and p1.anti_patterns == ()


def test_merge_and_prune_lifecycle():
    lc = attrs.evolve(Policy().lifecycle, merge_every=1, stale_after=3, merge_anchor_similarity=0.5)
    p = attrs.evolve(Policy(), lifecycle=lc, routing=attrs.evolve(Policy().routing, snap_enabled=False, jaccard_enabled=False, w_anchor=0.0))
    r = rizz(p)
    s = r.step(r.init(), make_input(0, 0, seed=0), Verdict(1.0))
    from rizz.core import Label
    twin = attrs.evolve(make_input(1, 0, seed=1), label=Label("classify", "monetary-policy-stance-fed"), label_embedding=b"")
    s, evs = r.step_with_events(s, twin, Verdict(1.0))
    merged = [e for e in evs if isinstance(e, ev.BranchesMerged)]
    assert [(e.kept, e.absorbed) for e in merged] == [("b0", "b1")]
    assert list(s.branches) == ["b0"] and len(s.branches["b0"].episodes) == 2
    for t in range(2, 7):
        s = r.step(s, make_input(t, 1, seed=t), Verdict(1.0))
    assert not s.branches["b0"].active or "b0" not in s.branches


def test_a_verdict_names_a_reward_that_is_not_a_number():
    import numpy as np
    import pytest

    from rizz.core import Verdict

    with pytest.raises(ValueError, match=r"reward must be a number in \[0, 1\], got '1' \(str\)"):
        Verdict("1", "exact_match")  # was a bare TypeError from the comparison
    with pytest.raises(ValueError, match=r"reward must be in \[0, 1\], got 1.5"):
        Verdict(1.5)
    assert Verdict(np.float32(0.5)).reward == 0.5  # numpy scalars are numbers


def test_a_correction_is_written_as_a_verified_example_only_under_write_corrections():
    """Issue #24: Verdict(reward, correction=…) — a failed answer with the user's right answer."""
    x = make_input(0, 2, seed=5, answer="A")
    v = Verdict(0.0, "exact_match", correction="C")
    off = rizz(Policy())
    s_off, evs_off = _events(off, off.init(), x, v)
    assert len(s_off.branches["b0"].anti_patterns) == 1 and len(s_off.branches["b0"].episodes) == 0
    # with the setting off the correction changes nothing: the same state as a bare verdict
    assert s_off == off.step(off.init(), x, Verdict(0.0, "exact_match"))
    on = rizz(attrs.evolve(Policy(), write=attrs.evolve(Policy().write, corrections=True)))
    s_on, evs_on = _events(on, on.init(), x, v)
    b = s_on.branches["b0"]
    assert len(b.anti_patterns) == 0 and [(e.input, e.answer, e.reward) for e in b.episodes.records] == [(x.text, "C", 1.0)]
    # a verified answer is written as it is, whatever correction rides along
    s_ok = on.step(on.init(), attrs.evolve(x, answer="C"), Verdict(1.0, "exact_match", correction="C"))
    assert [e.answer for e in s_ok.branches["b0"].episodes.records] == ["C"]
    # an unparsed answer with a correction still teaches the right answer
    s_un = on.step(on.init(), x, Verdict(0.0, "exact_match", parsed=False, correction="B"))
    assert [e.answer for e in s_un.branches["b0"].episodes.records] == ["B"]


def test_a_correction_must_be_text():
    import pytest

    with pytest.raises(ValueError, match="correction must be a str"):
        Verdict(0.0, correction=3)  # type: ignore[arg-type]


def test_an_examples_or_mistakes_block_of_one_answer_is_withheld_under_min_distinct():
    """Issue #24: a block whose items all carry one answer reads as a vote; with
    ``retrieval.examples_min_distinct`` / ``mistakes_min_distinct`` at 2 it is not shown."""
    from rizz.core import retrieve, route

    base = Policy()
    r = rizz(base)
    s = r.init()
    for i in range(3):  # three verified "A" answers, two failures answering "B"
        s = r.step(s, make_input(i, 2, seed=i, answer="A"), Verdict(1.0))
    for i in range(3, 5):
        s = r.step(s, make_input(i, 2, seed=i, answer="B"), Verdict(0.0))
    x = make_input(9, 2, seed=99)
    d = route(s, base, x)
    plain = retrieve(s, base, x, d)
    assert {e.item.answer for e in plain.episodes} == {"A"} and {e.item.answer for e in plain.anti_patterns} == {"B"}
    strict = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_min_distinct=2, mistakes_min_distinct=2))
    got = retrieve(s, strict, x, d)
    assert got.episodes == () and got.anti_patterns == ()
    # a fourth, different verified answer makes the examples block a demonstration again
    s = r.step(s, make_input(5, 2, seed=5, answer="C"), Verdict(1.0))
    assert {e.item.answer for e in retrieve(s, strict, x, route(s, base, x)).episodes} >= {"A", "C"}


def test_examples_per_answer_keeps_the_nearest_of_each_answer_up_to_its_cap():
    """``retrieval.examples_per_answer``: the examples block takes the nearest examples in score
    order, skipping one whose answer already fills ``cap`` places (majority-label bias of
    in-context examples); 0 leaves the nearest ``examples_k``."""
    from rizz.core import retrieve, route

    base = Policy()
    r = rizz(base)
    s = r.init()
    answers = ["B", "B", "B", "B", "B", "A", "C"]  # five verified "B" answers, one "A", one "C"
    for i, a in enumerate(answers):
        s = r.step(s, make_input(i, 2, seed=i, answer=a), Verdict(1.0))
    x = make_input(20, 2, seed=99)
    d = route(s, base, x)
    plain = retrieve(s, base, x, d)
    assert len(plain.episodes) == 4
    capped_policy = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_per_answer=1))
    capped = retrieve(s, capped_policy, x, d)
    assert sorted(e.item.answer for e in capped.episodes) == ["A", "B", "C"]
    # the kept "B" is the nearest "B", and the block stays in score order
    nearest_b = max((e for e in retrieve(s, attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_k=7)), x, d).episodes
                     if e.item.answer == "B"), key=lambda e: e.score)
    assert [e for e in capped.episodes if e.item.answer == "B"] == [nearest_b]
    assert [e.score for e in capped.episodes] == sorted((e.score for e in capped.episodes), reverse=True)
    two = retrieve(s, attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_per_answer=2)), x, d)
    assert sorted(e.item.answer for e in two.episodes) == ["A", "B", "B", "C"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("ABC"), min_size=1, max_size=12), st.integers(1, 6), st.integers(1, 3))
def test_examples_per_answer_never_exceeds_its_cap_nor_k(answers, k, cap):
    """Property: under any stored answers, the capped block holds at most ``cap`` of each answer
    and at most ``examples_k`` items, and as many as the stored answers allow."""
    from rizz.core import retrieve, route

    base = Policy()
    s = rizz(base).init()
    for i, a in enumerate(answers):
        s = rizz(base).step(s, make_input(i, 2, seed=i, answer=a), Verdict(1.0))
    pol = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_k=k, examples_per_answer=cap))
    x = make_input(50, 2, seed=77)
    got = [e.item.answer for e in retrieve(s, pol, x, route(s, base, x)).episodes]
    stored = [e.answer for b in s.branches.values() for e in b.episodes.records]
    assert all(got.count(a) <= cap for a in set(got)) and len(got) <= k
    assert len(got) == min(k, sum(min(cap, stored.count(a)) for a in set(stored)))
