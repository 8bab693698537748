"""Tenant walls (issue #12 §2): no memory of any kind crosses ``metadata.tenant``.

Property: for random interleavings of several tenants' streams, each tenant's final sub-state
and every prompt it saw equal those of its stream run alone, and no text or id derived from
another tenant's elements appears in its sub-state or prompts.
"""

from __future__ import annotations

import attrs
from hypothesis import given, settings, strategies as st

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
    retrieve,
    rizz,
    sub_state,
    to_data,
    unwall,
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


def _interleave(per: dict, order) -> list:
    """Every tenant's items in their own order, the tenants interleaved as ``order`` (a
    ``random.Random``) shuffles them."""
    tags = [t for t in TENANTS for _ in per[t]]
    order.shuffle(tags)
    pos = {t: 0 for t in TENANTS}
    mixed = []
    for t in tags:
        mixed.append(per[t][pos[t]])
        pos[t] += 1
    return mixed


def _assert_each_tenant_as_alone(state, prompts, alone_run) -> None:
    """Each tenant's sub-state (equal and same digest) and prompts are those of
    ``alone_run(tenant) -> (state, prompts)``, they hold no other tenant's name, and ``state``
    round-trips through its data form."""
    for t in TENANTS:
        alone, alone_prompts = alone_run(t)
        mine = sub_state(state, t)
        assert mine == sub_state(alone, t), t
        assert digest(mine) == digest(sub_state(alone, t)), t
        assert {k: v for k, v in prompts.items() if k.startswith(f"{t}-")} == alone_prompts, t
        text = canonical_json(mine) + "".join(alone_prompts.values())
        for other in TENANTS:
            if other != t:
                assert other not in text, f"{other}'s data in {t}'s memory or prompts"
    back = from_data(to_data(state))
    assert back == state and digest(back) == digest(state)


kinds = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=10)


@settings(max_examples=40, deadline=None)
@given(streams=st.fixed_dictionaries({t: kinds for t in TENANTS}), order=st.randoms(use_true_random=False))
def test_a_tenants_memory_and_prompts_equal_its_stream_run_alone(streams, order) -> None:
    per = {t: [_element(t, i, k, f, rw) for i, (k, f, rw) in enumerate(spec)] for t, spec in streams.items()}
    r = walled(rizz(POLICY))
    state, prompts = _run(r, _interleave(per, order))
    assert isinstance(state, TenantStates) and sorted(state.tenants) == sorted(TENANTS)
    assert not state.untenanted.branches
    _assert_each_tenant_as_alone(state, prompts, lambda t: _run(r, per[t]))


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


# -- the three rounds of a live session: answers in flight for several tenants -------------
def _tenant_ops(n: int, rnd) -> list[tuple[str, int]]:
    """One tenant's op sequence: answer i in order; each verdict some time after its answer."""
    ops, pending, nxt = [], [], 0
    while nxt < n or pending:
        if nxt < n and (not pending or rnd.random() < 0.5):
            ops.append(("answer", nxt))
            pending.append(nxt)
            nxt += 1
        else:
            ops.append(("verdict", pending.pop(rnd.randrange(len(pending)))))
    return ops


def _live(r, ops, per):
    """Fold ``ops`` ((tenant, op, i) in log order) as a live session does: route_round at
    answer time (global step = answer order), feedback_round with the kept decision at verdict
    time, then distill_round for the element's rules (``<tenant>/<id>`` key, global step)."""
    state, waiting, prompts, answers = r.init(), {}, {}, 0
    for t, op, i in ops:
        x, v = per[t][i]
        if op == "answer":
            x = attrs.evolve(x, step=answers, candidate_rules=(), distilled=False)
            answers += 1
            rr = r.route_round(state, x)
            own, local, d = unwall(rr.state, x, rr.decision)
            prompt = compile_prompt(prompt_blocks(retrieve(own, POLICY, local, d), x.text, x.instruction, x.evidence),
                                    POLICY.compiler, word_count, 4096)
            if not x.context_only:
                x = attrs.evolve(x, prompt_rule_ids=prompt.item_ids("rules"), prompt_episode_keys=prompt.item_ids("examples"))
            prompts[x.item_id] = prompt.text
            state = rr.state
            if x.context_only:  # stored at once (a step record)
                state = r.feedback_round(state, x, None, rr.decision).state
            else:
                waiting[(t, i)] = (x, rr.decision)
        elif (t, i) in waiting:
            x, d = waiting.pop((t, i))
            state = r.feedback_round(state, x, v, d).state
            rules = per[t][i][0].candidate_rules
            if rules:
                state = r.distill_round(state, d.branch_id, x.step, rules).state
    return state, prompts


@settings(max_examples=30, deadline=None)
@given(streams=st.fixed_dictionaries({t: kinds for t in TENANTS}), order=st.randoms(use_true_random=False))
def test_with_answers_in_flight_a_tenants_memory_and_prompts_equal_its_log_alone(streams, order) -> None:
    per = {t: [_element(t, i, k, f, rw) for i, (k, f, rw) in enumerate(spec)] for t, spec in streams.items()}
    own_ops = {t: [(t, op, i) for op, i in _tenant_ops(len(per[t]), order)] for t in TENANTS}
    r = walled(rizz(POLICY))
    state, prompts = _live(r, _interleave(own_ops, order), per)
    _assert_each_tenant_as_alone(state, prompts, lambda t: _live(r, own_ops[t], per))


def test_walled_rounds_on_untenanted_input_are_the_plain_rounds() -> None:
    plain, wall = rizz(POLICY), walled(rizz(POLICY))
    s_p, s_w = plain.init(), wall.init()
    xs = [make_input(i, i % 2, seed=i, answer=str(i)) for i in range(4)]
    rp = [plain.route_round(s_p, xs[0])]
    rw = [wall.route_round(s_w, xs[0])]
    assert rp[0] == rw[0] and type(rw[0].decision).__name__ == "RouteDecision"
    s_p = plain.feedback_round(rp[0].state, xs[0], Verdict(1.0), rp[0].decision).state
    s_w = wall.feedback_round(rw[0].state, xs[0], Verdict(1.0), rw[0].decision).state
    assert s_w == s_p and digest(s_w) == digest(s_p)
    ev_p = plain.distill_round(s_p, "b0", 0, (CandidateRule("when", "do", xs[0].embedding),))
    ev_w = wall.distill_round(s_w, "b0", 0, (CandidateRule("when", "do", xs[0].embedding),))
    assert ev_p == ev_w


def test_an_untenanted_answer_in_flight_when_the_first_tenant_comes_folds_into_the_untenanted_wall() -> None:
    r = walled(rizz(POLICY))
    x0 = make_input(0, 1, answer="7")
    rr0 = r.route_round(r.init(), x0)  # plain state, plain decision
    x1 = attrs.evolve(make_input(1, 1, seed=3, answer="8"), tenant="bob")
    rr1 = r.route_round(rr0.state, x1)
    assert isinstance(rr1.state, TenantStates) and rr1.decision.branch_id == "bob/b0" and rr1.decision.step == 0
    s = r.feedback_round(rr1.state, x0, Verdict(1.0), rr0.decision).state  # the untenanted verdict arrives late
    s = r.feedback_round(s, x1, Verdict(1.0), rr1.decision).state
    assert [e.answer for e in s.untenanted.branches["b0"].episodes.records] == ["7"]
    assert [e.answer for e in s.tenants["bob"].branches["b0"].episodes.records] == ["8"]
    x2 = make_input(2, 1, seed=5, answer="9")  # the untenanted counter continues from the global step 1
    rr2 = r.route_round(s, x2)
    assert rr2.decision.tenant is None and rr2.decision.step == 1 and rr2.decision.branch_id == "b0"


def test_the_bandit_learns_behind_a_wall_exactly_as_without() -> None:
    """``routing.router: linucb`` (policies/learned-routing.yaml): a stream of one tenant gives
    the sub-state the untenanted stream gives, router included, in one-step mode and with
    answers in flight (verdicts folded two answers late, in reverse pairs); the walled decision
    exposes the features it was chosen on, as a plain decision does."""
    from rizz.core import WalledDecision
    from rizz.formats.policy_file import load_policy

    pol = load_policy("learned-routing")
    plain, wall = rizz(pol), walled(rizz(pol))
    xs = [make_input(t, t % 4, seed=t, answer=str(t % 3)) for t in range(40)]
    vs = [Verdict(float((t * 7) % 5 < 3), FAMILIES[t % 4][2]) for t in range(40)]
    s, w = plain.init(), wall.init()
    for x, v in zip(xs, vs):
        s = plain.step(s, x, v)
        w = wall.step(w, attrs.evolve(x, tenant="acme"), v)
    assert s.router != plain.init().router and len(s.router.b) > 0  # the bandit did learn
    assert w.tenants["acme"] == s and digest(w.tenants["acme"]) == digest(s)

    def live(core, tenant):
        st, waiting = core.init(), []
        for x, v in zip(xs, vs):
            rr = core.route_round(st, attrs.evolve(x, tenant=tenant))
            st = rr.state
            waiting.append((attrs.evolve(x, tenant=tenant), v, rr.decision))
            if len(waiting) == 3:
                for x2, v2, d in (waiting[1], waiting[0]):
                    st = core.feedback_round(st, x2, v2, d).state
                waiting = waiting[2:]
        for x2, v2, d in reversed(waiting):
            st = core.feedback_round(st, x2, v2, d).state
        return st, rr.decision

    a, da = live(plain, None)
    b, db = live(wall, "acme")
    assert isinstance(db, WalledDecision) and db.features == da.features != ()
    assert b.tenants["acme"] == a and a.router != plain.init().router


def test_the_property_reaches_every_kind_of_memory_and_the_check_can_fail() -> None:
    """The property above is not vacuous: on one fixed rich interleaving each tenant's own
    sub-state holds episodes, anti-patterns, quarantine, scoped context and rules promoted to
    the family and global tiers, and the walls hold; the same stream without walls (one
    shared state, ``rizz`` alone) puts other tenants' text into a tenant's prompts, which the
    check would catch."""
    import random

    spec = [(k, f, rw) for f in range(2) for k in (0, 1, 2, 2, 1) for rw in (1.0, 0.0, 0.5, 1.0)]
    per = {t: [_element(t, i, k, f, rw) for i, (k, f, rw) in enumerate(spec)] for t in TENANTS}
    mixed = _interleave(per, random.Random(7))
    r = walled(rizz(POLICY))
    state, prompts = _run(r, mixed)
    for t in TENANTS:
        mine = sub_state(state, t)
        branches = list(mine.branches.values())
        assert sum(len(b.episodes.records) for b in branches) > 0, t
        assert sum(len(b.anti_patterns.records) for b in branches) > 0, t
        assert sum(len(b.quarantine) for b in branches) > 0, t
        assert len(mine.global_rules) > 0 and any(len(v) for v in mine.family_rules.values()), t
        assert any(f"{t}-context-" in p for p in prompts.values() if f"{t}-" in p), t
    _assert_each_tenant_as_alone(state, prompts, lambda t: _run(r, per[t]))
    _, shared = _run(rizz(POLICY), mixed)
    leaked = [k for k, p in shared.items() if any(o in p for o in TENANTS if not k.startswith(f"{o}-"))]
    assert leaked  # without walls the same stream leaks: the assertion above has teeth
