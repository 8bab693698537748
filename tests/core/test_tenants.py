"""Tenant walls (issue #12 §2): no memory of any kind crosses ``metadata.tenant``.

Property: for random interleavings of several tenants' streams, each tenant's final sub-state
and every prompt it saw equal those of its stream run alone, and no text or id derived from
another tenant's elements appears in its sub-state or prompts.
"""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from rizz.core import (
    CandidateRule,
    Policy,
    StepInput,
    TenantStates,
    Verdict,
    compile_prompt,
    digest,
    from_data,
    prompt_blocks,
    rizz,
    sub_state,
    to_data,
    walled,
)
from rizz.core.serialize import canonical_json
from tests.core.helpers import FAMILIES, embed, label_vec, make_input, word_count

TENANTS = ("alice", "bob", "carol")
# small caps so promotion, merges and rule activation happen within a short stream
POLICY = Policy(
    rules=attrs.evolve(Policy().rules, distill_every=1, activation_helpful=1, family_min_branches=1, global_min_branches=1, global_min_functions=1),
    lifecycle=attrs.evolve(Policy().lifecycle, merge_every=3, stale_after=4),
)


def _element(tenant: str, i: int, kind: int, family: int, reward: float) -> tuple[StepInput, Verdict | None]:
    """The i-th element of ``tenant``'s stream; every text and answer carries ``tenant``."""
    label, shape, verifier = FAMILIES[family]
    seed = 1000 * TENANTS.index(tenant) + i
    common = dict(step=i, item_id=f"{tenant}-item-{i}", embedding=embed(family, 0.15, seed), shape=shape, tenant=tenant)
    if kind == 0:  # context-only, scoped to the tenant's own conversation
        x = StepInput(text=f"{tenant}-context-{i}", scope=f"{tenant}-conv", context_only=True, **{**common, "shape": None})
        return x, None
    rules = ()
    if kind == 2:
        rules = (CandidateRule(f"{tenant}-when-{i}", f"{tenant}-do-{i}", embed(family, 0.1, seed + 500)),)
    x = StepInput(
        text=f"{tenant}-question-{i}", label=label, label_embedding=label_vec(label).tobytes(), answer=f"{tenant}-answer-{i}",
        scope=f"{tenant}-conv", candidate_rules=rules, distilled=bool(rules), **common,
    )
    return x, Verdict(reward, verifier)


def _with_prompt_ids(r, state, x):
    """Plan ``x`` and fill in what its compiled prompt contained (as the shell does)."""
    plan = r.plan(state, x)
    prompt = compile_prompt(prompt_blocks(plan.retrieved, x.text, x.instruction, x.evidence), POLICY.compiler, word_count, 4096)
    if not x.context_only:
        x = attrs.evolve(x, prompt_rule_ids=prompt.item_ids("rules"), prompt_episode_keys=prompt.item_ids("examples"))
    return x, prompt.text


def _run(r, stream):
    """Fold ``stream`` (global step = position); returns final state and each item's prompt text."""
    state = r.init()
    prompts = {}
    for t, (x, v) in enumerate(stream):
        x, text = _with_prompt_ids(r, state, attrs.evolve(x, step=t))
        prompts[x.item_id] = text
        state = r.step(state, x, v)
    return state, prompts


kinds = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=10)


@settings(max_examples=40, deadline=None)
@given(streams=st.fixed_dictionaries({t: kinds for t in TENANTS}), order=st.randoms(use_true_random=False))
def test_a_tenants_memory_and_prompts_equal_its_stream_run_alone(streams, order) -> None:
    per = {t: [_element(t, i, k, f, rw) for i, (k, f, rw) in enumerate(spec)] for t, spec in streams.items()}
    tags = [t for t in TENANTS for _ in per[t]]
    order.shuffle(tags)
    pos = {t: 0 for t in TENANTS}
    mixed = []
    for t in tags:
        mixed.append(per[t][pos[t]])
        pos[t] += 1
    r = walled(rizz(POLICY))
    state, prompts = _run(r, mixed)
    assert isinstance(state, TenantStates) and sorted(state.tenants) == sorted(TENANTS)
    assert not state.untenanted.branches
    for t in TENANTS:
        alone, alone_prompts = _run(r, per[t])
        mine = sub_state(state, t)
        assert mine == sub_state(alone, t)
        assert digest(mine) == digest(sub_state(alone, t))
        assert {k: v for k, v in prompts.items() if k.startswith(f"{t}-")} == alone_prompts
        text = canonical_json(mine) + "".join(alone_prompts.values())
        for other in TENANTS:
            if other != t:
                assert other not in text, f"{other}'s data in {t}'s memory or prompts"
    back = from_data(to_data(state))
    assert back == state and digest(back) == digest(state)


def test_untenanted_input_keeps_todays_state_and_digest() -> None:
    stream = [(make_input(i, i % 4, seed=i, answer=str(i)), Verdict(float(i % 3 == 0), FAMILIES[i % 4][2])) for i in range(30)]
    plain, _ = _run(rizz(POLICY), stream)
    wall, _ = _run(walled(rizz(POLICY)), stream)
    assert type(wall) is type(plain) and wall == plain and digest(wall) == digest(plain)
    x = make_input(0, 0)
    assert "tenant" not in canonical_json(x) and "time" not in canonical_json(x)


def test_untenanted_elements_between_tenants_form_their_own_wall() -> None:
    r = walled(rizz(POLICY))
    s = r.step(r.init(), make_input(0, 1, answer="7"), Verdict(1.0))
    s = r.step(s, attrs.evolve(make_input(1, 1, answer="8"), tenant="bob"), Verdict(1.0))
    s = r.step(s, make_input(2, 1, seed=5, answer="9"), Verdict(1.0))
    assert [e.answer for e in s.untenanted.branches["b0"].episodes.records] == ["7", "9"]
    assert [e.answer for e in s.tenants["bob"].branches["b0"].episodes.records] == ["8"]
    assert s.untenanted.steps == 2 and s.tenants["bob"].steps == 1 and s.steps == 3
    # the bob step left the untenanted sub-state the same object
    s2 = r.step(s, attrs.evolve(make_input(3, 1, seed=9, answer="1"), tenant="bob"), Verdict(1.0))
    assert s2.untenanted is s.untenanted
    assert sorted(s2.branches) == ["b0", "bob/b0"]
