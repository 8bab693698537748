"""Interference isolation, driven by hypothesis over random interleaved streams."""

import attrs
from helpers import make_input
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rizz.core import Policy, Verdict, digest, events as ev, rizz

DEFAULT = Policy()
SINGLE = attrs.evolve(Policy(), routing=attrs.evolve(Policy().routing, mode="single"))
# issue #10: bandit router, sketches (merge by overlap), block evidence, own-first reads with the zone gate
LEARNED = attrs.evolve(
    Policy(),
    routing=attrs.evolve(Policy().routing, router="linucb"),
    sketch=attrs.evolve(Policy().sketch, enabled=True, rank=3, w_energy=0.5, merge_overlap=0.9),
    evidence=attrs.evolve(Policy().evidence, enabled=True, mistakes_need_examples=True),
    retrieval=attrs.evolve(Policy().retrieval, zone="own_first", zone_gate=True),
)


def family_of(text: str) -> int:
    return int(text.split()[1])


class Interleaved(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.runs = {"default": rizz(DEFAULT), "single": rizz(SINGLE), "learned": rizz(LEARNED)}
        self.states = {k: r.init() for k, r in self.runs.items()}
        self.history = []  # (state, digest) of every earlier state
        self.t = 0

    @rule(family=st.integers(0, 3), seed=st.integers(0, 10_000), reward=st.sampled_from([0.0, 0.0, 1.0, 1.0, 0.5]), parsed=st.booleans())
    def step(self, family, seed, reward, parsed):
        x = make_input(self.t, family, seed=seed, answer=f"ans{seed}")
        verdict = Verdict(reward, "exact_match", parsed=parsed or reward == 1.0)
        for name, r in self.runs.items():
            before = self.states[name]
            self.history.append((before, digest(before)))
            after, events = r.step_with_events(before, x, verdict)
            routed = {e.branch_id for e in events if isinstance(e, ev.Routed)}
            touched = routed | {e.kept for e in events if isinstance(e, ev.BranchesMerged)}
            touched |= {e.absorbed for e in events if isinstance(e, ev.BranchesMerged)}
            touched |= {e.branch_id for e in events if isinstance(e, (ev.BranchPruned, ev.BranchDeactivated))}
            assert len(routed) == 1
            for bid, branch in before.branches.items():
                if bid not in touched:
                    assert after.branches[bid] is branch, f"{name}: step {self.t} changed untouched branch {bid}"
            # writes go to the routed branch only
            for e in events:
                if isinstance(e, (ev.EpisodeWritten, ev.AntiPatternWritten, ev.Quarantined, ev.RuleAdded, ev.SketchUpdated, ev.BlockEvidenceMoved)):
                    assert e.branch_id in routed
            self.states[name] = after
        self.t += 1

    @invariant()
    def earlier_states_never_mutated(self):
        for s, d in self.history[-6:]:
            assert digest(s) == d

    @invariant()
    def default_keeps_families_apart(self):
        for name in ("default", "learned"):
            for b in self.states[name].branches.values():
                fams = {family_of(e.input) for e in b.episodes.records} | {family_of(f.input) for f in b.anti_patterns.records}
                assert len(fams) <= 1, f"{name}: branch {b.id} mixes families {fams}"

    @precondition(lambda self: self.t > 0)
    @rule(family=st.integers(0, 3), seed=st.integers(0, 10_000))
    def retrieval_respects_locality(self, family, seed):
        x = make_input(self.t, family, seed=seed)
        plan = self.runs["default"].plan(self.states["default"], x)
        assert all(f.branch_id == plan.decision.branch_id for f in plan.retrieved.anti_patterns)
        assert all(family_of(f.item.input) == family for f in plan.retrieved.anti_patterns)
        assert all(family_of(e.item.input) == family for e in plan.retrieved.episodes)
        # The single-branch ablation shares one memory: a failure of another family is shown.
        single = self.states["single"]
        fails = [family_of(f.input) for b in single.branches.values() for f in b.anti_patterns.records]
        if fails and family not in fails:
            sp = self.runs["single"].plan(single, x)
            assert sp.retrieved.anti_patterns and all(family_of(f.item.input) != family for f in sp.retrieved.anti_patterns)


Interleaved.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestInterleaved = Interleaved.TestCase


def test_single_branch_interferes_default_does_not():
    """A fixed interleaved stream: count retrieved items of another family under each policy."""
    foreign = {}
    for name, pol in (("default", DEFAULT), ("single", SINGLE)):
        r = rizz(pol)
        s = r.init()
        n = 0
        for t in range(80):
            fam = t % 4
            x = make_input(t, fam, seed=t, answer=f"a{t}")
            plan = r.plan(s, x)
            n += sum(family_of(i.item.input) != fam for i in plan.retrieved.episodes + plan.retrieved.anti_patterns)
            s = r.step(s, x, Verdict(float(t % 3 == 0)))
        foreign[name] = n
    assert foreign["default"] == 0 and foreign["single"] > 40
