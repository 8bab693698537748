"""The bank-level episodic index: kept in step with the branches, derived (never serialised),
and example retrieval through it agrees exactly with the per-branch scan it replaced."""

import json

import attrs
import numpy as np
from helpers import make_input
from hypothesis import given, settings, strategies as st

from rizz.core import Label, Policy, StepInput, Verdict, digest, events as ev, from_data, rizz, to_data
from rizz.core.apply import fold
from rizz.core.episode_index import EpisodeIndex
from rizz.core.records import Episode
from rizz.core.retrieval import Scored, _episodes
from rizz.core.routing import CONTEXT_FUNCTION
from rizz.core.vec import row_dots

D = 16
SHAPES = ("label", "number", None)


# --- the per-branch implementation retrieval used before the index (kept as the reference) ---


def _top_ref(scores, k):
    """Indices of the k largest scores, best first; ties by index (full sort, exact)."""
    if k <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.lexsort((np.arange(len(scores)), -scores))[:k]


def examples_per_branch(state, policy, inp, selected):
    """One product per eligible branch, that branch's top k, then a sort of the pool by
    (score desc, branch creation order, row)."""
    p = policy.retrieval
    q = np.frombuffer(inp.embedding, dtype=np.float32)
    pool = []
    order = 0
    for b in state.active_branches():
        if not len(b.episodes) or b.label.function == CONTEXT_FUNCTION:
            continue
        own = b.id == selected
        if not own:
            if not p.examples_cross_branch:
                continue
            if policy.routing.shape_guard and inp.shape is not None and b.shape not in (None, inp.shape):
                continue
        scores = row_dots(b.episodes.matrix.rows(), q)
        for i in _top_ref(scores, p.examples_k):
            s = float(scores[i])
            if (p.examples_own_min_similarity <= -1.0 or s >= p.examples_own_min_similarity) if own else (s >= p.examples_min_similarity):
                pool.append((s, order, int(i), b))
        order += 1
    pool.sort(key=lambda t: (-t[0], t[1], t[2]))
    return tuple(Scored(b.episodes.records[i], round(s, 6), b.id) for s, _, i, b in pool[: p.examples_k])


# --- random banks built from events, with vectors whose dot products are exact in float32 ---

# entries in {-2, -1, 0, 1, 2} / 4: every dot product is a multiple of 1/16, exact under any
# summation order (BLAS gemv and einsum agree bit for bit), and ties are frequent
grid_vec = st.lists(st.integers(-2, 2), min_size=D, max_size=D).map(lambda xs: (np.array(xs, np.float32) / 4).tobytes())

spawn = st.tuples(st.just("spawn"), st.sampled_from(["classify", "classify", "solve-math", CONTEXT_FUNCTION]), st.sampled_from(SHAPES), grid_vec)
write = st.tuples(st.just("write"), st.integers(0, 50), grid_vec, st.booleans())
ops = st.tuples(
    st.lists(spawn, min_size=2, max_size=6),
    st.lists(write, min_size=4, max_size=30),
    st.lists(
        st.one_of(
            spawn,
            write,
            write,
            write,
            write,
            st.tuples(st.just("deactivate"), st.integers(0, 50)),
            st.tuples(st.just("merge"), st.integers(0, 50), st.integers(0, 50)),
            st.tuples(st.just("prune"), st.integers(0, 50)),
        ),
        max_size=80,
    ),
).map(lambda t: t[0] + t[1] + t[2])


def build(op_list):
    """Fold the events of ``op_list``; "write" with dup=True repeats the last vector written
    (in whichever branch), so equal scores occur within and across branches."""
    events, live, n, last = [], [], 0, None
    for t, op in enumerate(op_list):
        if op[0] == "spawn":
            bid = f"b{n}"
            n += 1
            events.append(ev.BranchSpawned(bid, Label(op[1], f"app-{bid}"), op[3], b"", op[2], t))
            live.append(bid)
        elif not live:
            continue
        elif op[0] == "write":
            bid = live[op[1] % len(live)]
            vec = last if op[3] and last is not None else op[2]
            last = vec
            events.append(ev.EpisodeWritten(bid, Episode(f"e{t}", f"x{t}", f"y{t}", 1.0, None, t), vec))
        elif op[0] == "deactivate":
            events.append(ev.BranchDeactivated(live[op[1] % len(live)], "test"))
        elif op[0] == "merge" and len(live) > 1:
            a, b = live[op[1] % len(live)], live[op[2] % len(live)]
            if a != b:
                events.append(ev.BranchesMerged(a, b))
                live.remove(b)
        elif op[0] == "prune":
            events.append(ev.BranchPruned(live.pop(op[1] % len(live)), "test"))
    state = fold(rizz(Policy()).init(), events)
    return attrs.evolve(state, next_branch=n)


def _rows_by_position(index):
    return {tuple(w): index.matrix.rows()[j].tobytes() for j, w in enumerate(index.where().T.tolist())}


def assert_index_matches(state):
    idx = state.episode_index
    assert idx.is_current(state.branches)
    assert len(idx) == sum(len(b.episodes) for b in state.branches.values())
    assert _rows_by_position(idx) == _rows_by_position(EpisodeIndex.build(state.branches.values()))
    for bid, b in state.branches.items():
        for i in range(len(b.episodes)):
            assert _rows_by_position(idx)[(int(bid[1:]), i)] == b.episodes.matrix.rows()[i].tobytes()


@settings(max_examples=150, deadline=None)
@given(ops)
def test_index_follows_writes_merges_prunes(op_list):
    assert_index_matches(build(op_list))


queries = st.fixed_dictionaries(
    {
        "q": grid_vec,
        "selected": st.integers(0, 6),
        "k": st.sampled_from([0, 1, 2, 3, 4, 4, 7]),
        "cross": st.sampled_from([True, True, False]),
        "min_sim": st.sampled_from([-1.0, 0.0, 0.0625, 0.25, 0.5]),
        "own_min_sim": st.sampled_from([-1.0, -1.0, 0.0, 0.25, 0.5]),
        "guard": st.booleans(),
        "shape": st.sampled_from(SHAPES),
    }
)


@settings(max_examples=300, deadline=None)
@given(ops, st.lists(queries, min_size=1, max_size=4))
def test_examples_through_index_equal_per_branch_scan(op_list, qs):
    state = build(op_list)
    for qd in qs:
        policy = Policy()
        policy = attrs.evolve(
            policy,
            retrieval=attrs.evolve(policy.retrieval, examples_k=qd["k"], examples_cross_branch=qd["cross"], examples_min_similarity=qd["min_sim"],
                                         examples_own_min_similarity=qd["own_min_sim"]),
            routing=attrs.evolve(policy.routing, shape_guard=qd["guard"]),
        )
        inp = StepInput(0, "q", "q", qd["q"], shape=qd["shape"])
        selected = f"b{qd['selected']}"
        assert _episodes(state, policy, inp, selected) == examples_per_branch(state, policy, inp, selected)


def test_ties_break_by_branch_order_then_row():
    v = (np.eye(D, dtype=np.float32)[0]).tobytes()
    events = [ev.BranchSpawned(f"b{i}", Label("classify", f"a{i}"), v, b"", "label", 0) for i in range(12)]
    # written newest branch first, so index rows are not in (branch, row) order
    for t, i in enumerate(reversed(range(12))):
        events += [ev.EpisodeWritten(f"b{i}", Episode(f"e{i}-{j}", "x", "y", 1.0, None, t), v) for j in range(3)]
    state = fold(rizz(Policy()).init(), events)
    policy = attrs.evolve(Policy(), retrieval=attrs.evolve(Policy().retrieval, examples_k=5))
    got = _episodes(state, policy, StepInput(0, "q", "q", v, shape="label"), "b7")
    assert [s.item.key for s in got] == ["e0-0", "e0-1", "e0-2", "e1-0", "e1-1"]
    assert got == examples_per_branch(state, policy, StepInput(0, "q", "q", v, shape="label"), "b7")


def test_random_unit_vectors_agree_with_per_branch_scan():
    rng = np.random.default_rng(3)
    r = rizz(Policy())
    s = r.init()
    for t in range(120):
        s = r.step(s, make_input(t, t % 4, seed=int(rng.integers(1000)), answer=str(t)), Verdict(1.0))
    assert_index_matches(s)
    for t in range(40):
        x = make_input(200 + t, t % 4, seed=5000 + t)
        d = r.plan(s, x).decision
        new, old = _episodes(s, r.policy, x, d.branch_id), examples_per_branch(s, r.policy, x, d.branch_id)
        assert [(e.item, e.branch_id) for e in new] == [(e.item, e.branch_id) for e in old]
        assert np.allclose([e.score for e in new], [e.score for e in old], atol=2e-6)


def test_index_is_derived_data():
    r = rizz(Policy())
    s = r.init()
    for t in range(20):
        s = r.step(s, make_input(t, t % 3, seed=t), Verdict(1.0))
    assert len(s.episode_index) == sum(len(b.episodes) for b in s.branches.values()) > 0
    data = to_data(s)
    assert "episode_index" not in data
    stale = attrs.evolve(s, episode_index=EpisodeIndex.build([]))
    assert stale == s and hash(stale) == hash(s) and digest(stale) == digest(s)
    assert "episode_index" not in repr(s)
    back = from_data(json.loads(json.dumps(data)))
    assert back == s and digest(back) == digest(s)
    assert_index_matches(back)
    # a stale index is never read: retrieval rebuilds it
    x = make_input(99, 1, seed=7)
    d = r.plan(s, x).decision
    assert _episodes(stale, r.policy, x, d.branch_id) == _episodes(s, r.policy, x, d.branch_id)


def test_steps_keep_index_current_and_share_storage():
    r = rizz(Policy())
    s = r.init()
    for t in range(60):
        before = s
        s = r.step(s, make_input(t, t % 4, seed=t % 9, answer=str(t % 2)), Verdict(float(t % 3 != 0)))
        assert_index_matches(s)
        assert_index_matches(before)  # the older state's index still holds only its own rows
