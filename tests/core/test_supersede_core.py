"""Superseded memories (issue #12 §5) and the time fields (§4) in the pure core."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from rizz.core import Policy, StepInput, Verdict, digest, events as ev, from_data, rizz, to_data
from rizz.core.episode_index import EpisodeIndex
from rizz.core.records import ContextItem
from rizz.core.serialize import canonical_json
from rizz.formats.timekeys import time_fields
from tests.core.helpers import FAMILIES, embed, label_vec, make_input

ON = Policy(write=attrs.evolve(Policy().write, supersede=True))


def _ctx(step: int, text: str, time: str | None, scope: str = "bo") -> StepInput:
    return StepInput(step, f"c{step}", text, embed(3, 0.0, 7), scope=scope, context_only=True, **time_fields(time))


def _context(state) -> list[tuple[str, str | None, int]]:
    return [(it.text, it.time, it.step) for b in state.branches.values() for it in b.context.records]


def test_a_restated_context_item_keeps_its_newest_time() -> None:
    r = rizz(ON)
    s = r.step(r.init(), _ctx(0, "Bo: I live in Oslo.", "2025-01-01"), None)
    res = r.step_with_events(s, _ctx(1, "Bo: I live in Oslo.", "2026-01-01T00:00:00+01:00"), None)
    retired = [e for e in res.events if isinstance(e, ev.MemoryRetired)]
    assert [(e.store, e.reason) for e in retired] == [("context", "superseded: restated at step 1")]
    assert _context(res.state) == [("Bo: I live in Oslo.", "2026-01-01T00:00:00+01:00", 1)]
    # an older restatement arriving later does not replace the newer item (deduplicated)
    s3 = r.step(res.state, _ctx(2, "Bo: I live in Oslo.", "2024-06-01"), None)
    assert _context(s3) == _context(res.state)
    # off: today's behaviour, the first item is kept and the restatement deduplicated
    off = rizz(Policy())
    t = off.step(off.step(off.init(), _ctx(0, "Bo: I live in Oslo.", "2025-01-01"), None), _ctx(1, "Bo: I live in Oslo.", "2026-01-01"), None)
    assert _context(t) == [("Bo: I live in Oslo.", "2025-01-01", 0)]


def test_a_failure_retires_the_episode_in_another_branch_and_keeps_the_index_current() -> None:
    r = rizz(ON)
    s = r.init()
    for i in range(3):  # three other episodes in the branch
        s = r.step(s, make_input(i, 1, seed=i, answer=str(i)), Verdict(1.0))
    q = make_input(3, 1, seed=99, answer="10")
    s = r.step(s, q, Verdict(1.0))
    # force the same input into another branch: spawn one by hand via a different label
    other = attrs.evolve(make_input(4, 0, seed=5, answer="A"))
    s = r.step(s, other, Verdict(1.0))
    assert len(s.branches) == 2
    lab0 = FAMILIES[0][0]
    wrong = attrs.evolve(q, step=5, label=lab0, label_embedding=label_vec(lab0).tobytes(), shape="letter")
    res = r.step_with_events(s, wrong, Verdict(0.0))
    (ret,) = [e for e in res.events if isinstance(e, ev.MemoryRetired)]
    routed = next(e.branch_id for e in res.events if isinstance(e, ev.Routed))
    assert routed != ret.branch_id  # the retired episode lives outside the routed branch
    assert ret.store == "episodes" and ret.reason == "superseded: answer '10' failed verification at step 5"
    b = res.state.branches[ret.branch_id]
    assert "10" not in [e.answer for e in b.episodes.records] and b.quarantine[-1].answer == "10"
    rows = b.episodes.matrix.rows()
    assert np.allclose(np.frombuffer(b.stats.centroid_sum, np.float32), rows.sum(axis=0), atol=1e-5)
    rebuilt = EpisodeIndex.build(res.state.branches.values())
    assert res.state.episode_index.is_current(res.state.branches)
    assert np.array_equal(res.state.episode_index.matrix.rows(), rebuilt.matrix.rows())
    back = from_data(to_data(res.state))
    assert back == res.state and digest(back) == digest(res.state)


def test_the_same_words_in_another_scope_are_another_question() -> None:
    r = rizz(ON)
    a = make_input(0, 1, seed=1, answer="10", scope="conv-a")
    s = r.step(r.init(), a, Verdict(1.0))
    res = r.step_with_events(s, attrs.evolve(a, step=1, scope="conv-b", answer="12"), Verdict(1.0))
    assert not [e for e in res.events if isinstance(e, ev.MemoryRetired)]
    assert sorted(e.answer for e in res.state.branches["b0"].episodes.records) == ["10", "12"]


def test_new_fields_at_their_defaults_leave_the_serialised_form_unchanged() -> None:
    r = rizz(Policy())
    s = r.step(r.init(), _ctx(0, "Bo: hello.", None), None)
    s = r.step(s, make_input(1, 1, answer="3", scope="bo"), Verdict(0.0))
    text = canonical_json(s)
    assert '"time"' not in text and '"scope":"bo"' in text
    assert all(a.scope is None for b in s.branches.values() for a in b.anti_patterns.records)  # supersede off: as before
    timed = r.step(r.init(), _ctx(0, "Bo: hello.", "2026-05-24"), None)
    assert '"time":"2026-05-24"' in canonical_json(timed)
    assert from_data(to_data(timed)) == timed
    # the instant (µs UTC, parsed by the shell) is a function of the text: snapshots keep it,
    # the digest leaves it out, so states recorded before it existed keep their digests
    assert '"instant_us":1779580800000000' in canonical_json(timed)
    assert '"instant_us"' not in canonical_json(timed, for_digest=True) and '"time":"2026-05-24"' in canonical_json(timed, for_digest=True)
    assert digest(timed) == "sha256:" + __import__("hashlib").sha256(canonical_json(timed, for_digest=True).encode()).hexdigest()


def test_a_time_without_its_instant_is_refused_by_the_core() -> None:
    """The core never parses a calendar: text without the shell's instant cannot be built (an
    old snapshot holding one is ignored and rebuilt from the log: tests/shell/test_time_context.py)."""
    with pytest.raises(ValueError, match="time '2026-05-24' needs its instant_us"):
        StepInput(0, "c0", "Bo: hello.", embed(3, 0.0, 7), context_only=True, time="2026-05-24")
    with pytest.raises(ValueError, match="needs its instant_us"):
        ContextItem("k", "Bo: hello.", "bo", 0, "2026-05-24")
    with pytest.raises(ValueError, match="time None needs its instant_us"):
        ContextItem("k", "Bo: hello.", "bo", 0, None, 5)
    assert ContextItem("k", "t", "bo", 0, "1970-01-01T00:00:01+00:00", 1_000_000).instant_us == 1_000_000


def test_scope_walled_examples_equal_the_open_ranking_filtered_by_scope() -> None:
    from rizz.core import retrieve, route

    base = Policy()
    r = rizz(base)
    s = r.init()
    scopes = ["s0", "s1", None]
    for i in range(60):
        s = r.step(s, make_input(i, i % 4, seed=i, answer=str(i), scope=scopes[i % 3]), Verdict(1.0, FAMILIES[i % 4][2]))
    assert len(s.branches) >= 3
    for j, scope in enumerate(["s0", "s1", None, "s2"] * 4):
        x = make_input(100 + j, j % 4, seed=500 + j, scope=scope)
        d = route(s, base, x)
        wide = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_k=1000))
        walled_policy = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_cross_scope=False))
        got = retrieve(s, walled_policy, x, d).episodes
        ref = [e for e in retrieve(s, wide, x, d).episodes if e.item.scope in (None, scope)][: base.retrieval.examples_k]
        assert [(e.item.key, e.branch_id) for e in got] == [(e.item.key, e.branch_id) for e in ref]
        assert all(e.item.scope in (None, scope) for e in got)


from hypothesis import (  # noqa: E402
    given,
    settings,
    strategies as st,  # noqa: E402
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["10", "12", "15"]), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=12))
def test_after_any_history_the_newest_verified_answer_is_the_only_episode(history) -> None:
    r = rizz(ON)
    s = r.init()
    last_verified = None
    failed_since: set[str] = set()
    for t, (ans, reward) in enumerate(history):
        s = r.step(s, make_input(t, 1, seed=3, answer=ans), Verdict(reward))
        if reward == 1.0:
            last_verified, failed_since = ans, set()
        elif reward == 0.0:
            failed_since.add(ans)
    episodes = {e.answer for b in s.branches.values() for e in b.episodes.records}
    mistakes = {a.answer for b in s.branches.values() for a in b.anti_patterns.records}
    want = {last_verified} - failed_since if last_verified is not None else set()
    assert episodes == want
    if last_verified is not None and last_verified not in failed_since:
        assert last_verified not in mistakes


def test_one_step_mode_records_the_batch_and_retires_its_rules() -> None:
    """Rules handed in with a step (log format 1) record the batch as it stands after the
    step's write; a later failure of that answer retires them (write.supersede_derived)."""
    from rizz.core import CandidateRule
    from rizz.core.decide import batch_keys

    pol = Policy(write=attrs.evolve(Policy().write, supersede=True, supersede_derived=True),
                 rules=attrs.evolve(Policy().rules, distill_every=2))
    r = rizz(pol)
    s = r.step(r.init(), make_input(0, 1, seed=1, answer="7"), Verdict(1.0))
    rule = CandidateRule("asked item 2", "answer 9", embed(1, 0.0, 3))
    x = make_input(1, 1, seed=2, answer="9", candidate_rules=(rule,), distilled=True)
    s = r.step(s, x, Verdict(1.0))
    (b,) = [b for b in s.branches.values() if b.rules]
    keys = tuple(e.key for e in b.episodes.records)
    assert len(keys) == 2 and b.rules[0].sources == keys == batch_keys(pol, keys)
    assert batch_keys(Policy(write=attrs.evolve(Policy().write, supersede=True)), keys) == ()  # off: no sources, old digests
    res = r.step_with_events(s, make_input(2, 1, seed=1, answer="7"), Verdict(0.0))  # 7 is wrong now
    got = sorted((e.store, e.key) for e in res.events if isinstance(e, ev.MemoryRetired))
    assert got == [("episodes", keys[0]), ("rules", b.rules[0].id), ("working_memory", "turn-0")]
    assert res.state.rule_ledger[b.rules[0].id].status == "retired"
    assert not res.state.branches[b.id].rules and [t.step for t in res.state.working_memory] == [1]
    assert from_data(to_data(res.state)) == res.state


def test_derived_retirement_is_off_unless_asked_and_leaves_old_digests() -> None:
    """With only write.supersede (a policy recorded before supersede_derived), rules carry no
    sources, turns no scope, and the failing turn is remembered: the state as before."""
    r = rizz(ON)
    s = r.step(r.init(), make_input(0, 1, seed=1, answer="7", scope="u"), Verdict(1.0))
    s = r.step(s, make_input(1, 1, seed=1, answer="7", scope="u"), Verdict(0.0))
    assert [(t.step, t.scope) for t in s.working_memory] == [(0, None), (1, None)]
    assert '"sources"' not in canonical_json(s) and '"supersede_derived"' not in canonical_json(ON)
