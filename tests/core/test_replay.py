import json

import attrs
from helpers import embed, make_input
from hypothesis import given, settings, strategies as st

from rizz.core import CandidateRule, Policy, StepInput, Verdict, digest, from_data, rizz, to_data
from rizz.core.serialize import canonical_json

streams = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 999), st.sampled_from([0.0, 0.3, 1.0])), min_size=1, max_size=40)


def _fold(stream, policy=Policy()):
    r = rizz(policy)
    s = r.init()
    for t, (fam, seed, reward) in enumerate(stream):
        x = make_input(t, fam, seed=seed, answer=str(seed % 3))
        if t % 7 == 3:
            v = embed(fam, 0.0, 0)
            x = attrs.evolve(x, candidate_rules=(CandidateRule("ante", f"strategy {seed}", v),), distilled=True)
        if t % 11 == 5:
            x = StepInput(t, f"c{t}", f"context {seed}", embed(fam, 0.2, seed), scope=f"s{fam}", context_only=True)
            s = r.step(s, x, None)
            continue
        s = r.step(s, x, Verdict(reward, "token_f1"))
    return s


@settings(max_examples=60, deadline=None)
@given(streams)
def test_refold_is_equal_and_digest_stable(stream):
    a, b = _fold(stream), _fold(stream)
    assert a == b and digest(a) == digest(b)


@settings(max_examples=60, deadline=None)
@given(streams)
def test_serialise_round_trip(stream):
    s = _fold(stream)
    data = json.loads(json.dumps(to_data(s)))
    back = from_data(data)
    assert back == s and digest(back) == digest(s)
    assert canonical_json(back) == canonical_json(s)


def test_digest_changes_with_content_and_policy():
    stream = [(0, 1, 1.0), (1, 2, 0.0), (2, 3, 1.0)]
    a = _fold(stream)
    b = _fold(stream[:-1] + [(2, 3, 0.0)])
    c = _fold(stream, attrs.evolve(Policy(), routing=attrs.evolve(Policy().routing, mode="single")))
    assert len({digest(a), digest(b), digest(c)}) == 3


def test_resume_from_serialised_state_matches_uninterrupted():
    stream = [(t % 4, t, float(t % 2)) for t in range(30)]
    r = rizz(Policy())
    s = r.init()
    for t, (fam, seed, reward) in enumerate(stream):
        if t == 15:
            s = from_data(json.loads(json.dumps(to_data(s))))  # snapshot + restart
        s = r.step(s, make_input(t, fam, seed=seed), Verdict(reward))
    assert digest(s) == digest(_fold_plain(stream))


def _fold_plain(stream):
    r = rizz(Policy())
    s = r.init()
    for t, (fam, seed, reward) in enumerate(stream):
        s = r.step(s, make_input(t, fam, seed=seed), Verdict(reward))
    return s
