import attrs
import numpy as np
from helpers import FAMILIES, embed, label_vec, make_input

from rizz.core import Label, Policy, StepInput, Verdict, jaccard, needs_label, normalise_label, rizz, route, snap_label
from rizz.core.routing import app_tokens


def test_normalise_label():
    assert normalise_label(" Classify ", "Stance Detection (Chinese)") == Label("classify", "stance-detection-chinese")
    assert normalise_label("", "  ") == Label("unknown", "unknown")


def test_jaccard_of_hyphen_tokens():
    assert app_tokens("stance--detection-") == {"stance", "detection"}
    assert jaccard("stance-detection-chinese", "stance-detection") == 2 / 3
    assert jaccard("a-b", "c-d") == 0.0
    assert jaccard("", "") == 0.0


def _state_with(families, policy=Policy()):
    r = rizz(policy)
    s = r.init()
    for t, f in enumerate(families):
        s = r.step(s, make_input(t, f, seed=t), Verdict(1.0))
    return r, s


def test_same_label_routes_to_its_branch_and_new_family_spawns():
    r, s = _state_with([0, 1])
    assert sorted(b.label.application for b in s.branches.values()) == ["arithmetic-word-problems", "monetary-policy-stance"]
    d = route(s, r.policy, make_input(2, 0, seed=99))
    assert d.spawn is None and s.branches[d.branch_id].label == FAMILIES[0][0]
    d = route(s, r.policy, make_input(3, 2, seed=5))
    assert d.spawn is not None and d.branch_id == "b2"


def test_snap_by_label_embedding_then_jaccard():
    r, s = _state_with([0])
    lab = Label("classify", "fed-stance")
    # psi equal to the existing application's: cosine 1.0 >= 0.92 snaps.
    snapped, ev = snap_label(s, r.policy, lab, label_vec(FAMILIES[0][0]).tobytes())
    assert snapped == FAMILIES[0][0] and ev.method == "embedding" and ev.score == 1.0
    # orthogonal psi, but a same-function sibling sharing 2 of 3 tokens (J = 2/3 >= 0.40).
    other = np.zeros(32, np.float32)
    other[31] = 1
    snapped, ev = snap_label(s, r.policy, Label("classify", "monetary-policy"), other.tobytes())
    assert snapped == FAMILIES[0][0] and ev.method == "jaccard" and abs(ev.score - 2 / 3) < 1e-6
    # a different function never snaps by Jaccard
    snapped, ev = snap_label(s, r.policy, Label("summarize", "monetary-policy"), other.tobytes())
    assert ev is None and snapped.application == "monetary-policy"
    # the anti-fragmentation ablation turns both off
    off = attrs.evolve(r.policy, routing=attrs.evolve(r.policy.routing, snap_enabled=False, jaccard_enabled=False))
    assert snap_label(s, off, Label("classify", "monetary-policy"), label_vec(FAMILIES[0][0]).tobytes())[1] is None


def test_shape_guard_keeps_incompatible_branches_out():
    r, s = _state_with([0])
    x = attrs.evolve(make_input(1, 0, seed=3), shape="number")  # same label, other shape
    d = route(s, r.policy, x)
    assert d.spawn is not None
    unguarded = attrs.evolve(r.policy, routing=attrs.evolve(r.policy.routing, shape_guard=False))
    assert route(s, unguarded, x).spawn is None


def test_spawn_cap_routes_to_best_existing():
    p = attrs.evolve(Policy(), lifecycle=attrs.evolve(Policy().lifecycle, max_branches=2, max_active=2))
    r, s = _state_with([0, 1], p)
    d = route(s, p, make_input(2, 3, seed=1))
    assert d.spawn is None and d.branch_id in s.branches


def test_context_only_routes_by_nearest_anchor():
    r = rizz(Policy())
    s = r.init()
    c0 = StepInput(0, "c0", "session 1 of conversation A", embed(3, 0.1, 1), scope="conv-a", context_only=True)
    s = r.step(s, c0, None)
    assert [b.label for b in s.branches.values()] == [Label("context", "conv-a")]
    c1 = attrs.evolve(c0, step=1, item_id="c1", text="session 2", embedding=embed(3, 0.1, 2).tobytes())
    s = r.step(s, c1, None)
    assert len(s.branches) == 1 and len(s.branches["b0"].context) == 2
    far = attrs.evolve(c0, step=2, item_id="c2", text="other", embedding=embed(0, 0.05, 3).tobytes())
    s = r.step(s, far, None)
    assert len(s.branches) == 2


def test_needs_label_when_uncertain():
    p = attrs.evolve(Policy(), routing=attrs.evolve(Policy().routing, judge="when_uncertain"))
    r, s = _state_with([0, 1], p)
    assert not needs_label(s, p, embed(0, 0.05, 7).tobytes(), "letter")  # near the classify anchor
    assert needs_label(s, p, embed(2, 0.05, 7).tobytes(), "text")  # nothing near
    always = attrs.evolve(p, routing=attrs.evolve(p.routing, judge="always"))
    assert needs_label(s, always, embed(0, 0.05, 7).tobytes(), "letter")  # the paper's setting


def test_single_branch_mode_routes_everything_to_one_branch():
    p = attrs.evolve(Policy(), routing=attrs.evolve(Policy().routing, mode="single"))
    r, s = _state_with([0, 1, 2, 3, 0], p)
    assert list(s.branches) == ["b0"] and s.branches["b0"].stats.traffic == 5


def test_the_anchor_memo_never_serves_another_states_anchors():
    """routing keeps the last stacked anchor matrix; a state whose branch has another anchor
    (a new Branch value) must route by its own anchors, alternating states call after call."""
    from rizz.core import routing
    from rizz.core.vec import to_bytes

    r, s = _state_with([0, 1])
    x = make_input(2, 0, seed=99)
    ids = sorted(s.branches)
    flipped = attrs.evolve(s.branches[ids[0]], anchor=to_bytes(-np.frombuffer(s.branches[ids[0]].anchor, dtype=np.float32)))
    moved = attrs.evolve(s, branches=s.branches.set(ids[0], flipped))
    a, b = route(s, r.policy, x), route(moved, r.policy, x)
    assert a.branch_id == ids[0] and b.branch_id != ids[0]
    assert route(s, r.policy, x) == a and route(moved, r.policy, x) == b  # alternating: no stale matrix
    routing._ANCHORS = None
    assert route(moved, r.policy, x) == b and route(s, r.policy, x) == a  # the same without the memo
