"""Issue #10 through the shell: prompt blocks are logged, and a run under the evidence and
learned-routing policies refolds from its log to its digest (fake model, real embedder)."""

from __future__ import annotations

import json

import pytest
from test_run import TRACE_MINI, _answer  # noqa: F401  (same stand-in model as the run tests)

from rizz.adapters.embedder import Embedder
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


@pytest.mark.parametrize("policy", ["learned-routing", "zones-own-first"])
def test_issue10_policies_log_blocks_and_replay_to_the_digest(tmp_path, fake_model, embedder, policy):
    lines = [l for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l or '"task": "NumGLUE-ds"' in l][:16]
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    s = run_stream(stream, load_policy(policy), policy, out, fake_model(_answer), embedder, log=lambda m: None)
    recs = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    blocks = [r["prompt"]["blocks"] for r in recs if "prompt" in r]
    assert blocks and all(set(b) <= {"scoped_context", "rules", "examples", "mistakes", "working_memory"} for b in blocks)
    assert any("examples" in b for b in blocks)
    assert replay(out)["state_digest"] == s["state_digest"]
    labels = s["branch_labels"]
    assert set(labels) and all("/" in v["label"] for v in labels.values())
    assert sum(v["traffic"] for v in labels.values()) == 16


def test_declared_label_is_used_only_when_the_policy_says(tmp_path, fake_model, embedder):
    lines = [json.loads(l) for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l][:4]
    for el in lines:
        el["metadata"]["label"] = {"function": "classify", "application": "fomc-monetary-stance"}
    stream = tmp_path / "s.jsonl"
    stream.write_text("".join(json.dumps(el) + "\n" for el in lines))
    pol = load_policy("default")
    import attrs

    on = attrs.evolve(pol, name="declared", routing=attrs.evolve(pol.routing, declared_label=True))
    s = run_stream(stream, on, "declared", tmp_path / "on", fake_model(_answer), embedder, log=lambda m: None)
    assert [v["label"] for v in s["branch_labels"].values()] == ["classify/fomc-monetary-stance"]
    assert s["calls_by_kind"]["judge"] == 0
    assert replay(tmp_path / "on")["state_digest"] == s["state_digest"]
    off = run_stream(stream, pol, "default", tmp_path / "off", fake_model(_answer), embedder, log=lambda m: None)
    assert [v["label"] for v in off["branch_labels"].values()] != ["classify/fomc-monetary-stance"]


def test_a_late_verdict_updates_the_arm_chosen_at_answer_time_across_a_restart(tmp_path):
    """Live session under ``learned-routing``: the route decision (bandit features) and the
    prompt's blocks wait with the answer, survive close/reopen through the snapshot's in-flight
    side file, and the late verdict's ``BanditUpdated`` uses the features seen at answer time."""
    from livekit import HashEmbedder, StubModel, element

    from rizz import Session
    from rizz.core import events as ev

    def open_(p):
        return Session.open(p, policy=load_policy("learned-routing"), model=StubModel(), embedder=HashEmbedder(), snapshot_every=5)

    app = tmp_path / "app"
    s = open_(app)
    for i in range(12):
        s.answer(element(i))
    for i in (0, 3, 6, 9, 2, 5):
        s.fold(f"q{i}", 1.0 if i % 2 == 0 else 0.0)
    waiting = dict(s._fold.inflight.items())
    assert set(waiting) == {"q1", "q4", "q7", "q8", "q10", "q11"}
    feats = {k: w.decision.features for k, w in waiting.items()}
    assert all(len(f) == 7 and all(type(x) is float for x in f) for f in feats.values() if f)
    assert sum(1 for f in feats.values() if f) >= 4
    answers = {r["id"]: r for r in map(json.loads, (app / "log.jsonl").read_text().splitlines()) if r["kind"] == "answer"}
    for k, w in waiting.items():
        assert w.step_input.prompt_blocks == tuple(answers[k].get("prompt", {}).get("blocks", ()))
    d = s.digest()
    s.close()  # snapshot + in-flight side file

    side = sorted(app.glob("snapshots/*.inflight.json"))[-1]
    assert "features" in side.read_text()
    s2 = open_(app)
    assert s2.digest() == d and dict(s2._fold.inflight.items()) == waiting  # the decisions round-tripped exactly
    # the state moved since those answers: routing them now would see other features
    assert any(s2.core.route_round(s2.state, w.step_input).decision.features != w.decision.features
               for w in waiting.values() if w.decision.features)
    k = next(k for k in ("q8", "q10", "q4", "q1") if feats[k])
    before = s2.state.router.updates
    got = s2.fold(k, 1.0)
    assert [e for e in got.events if isinstance(e, ev.BanditUpdated)] == [ev.BanditUpdated(feats[k], 1.0)]
    assert s2.state.router.updates == before + 1
    d2 = s2.digest()
    s2.close()
    assert replay(app, write_summary=False)["state_digest"] == d2


def test_the_bandit_learns_behind_a_tenant_wall_as_without_one(tmp_path):
    """A live session of one tenant under ``learned-routing`` (late, out-of-order verdicts,
    close/reopen in between) ends with the sub-state the untenanted session ends with, router
    included; the pending decisions behind the wall carry the bandit features."""
    from livekit import HashEmbedder, StubModel, element

    from rizz import Session

    def session(path, tenant):
        def open_():
            return Session.open(path, policy=load_policy("learned-routing"), model=StubModel(), embedder=HashEmbedder(), snapshot_every=5)

        s = open_()
        for i in range(12):
            el = element(i)
            if tenant:
                el["metadata"]["tenant"] = tenant
            s.answer(el)
        for i in (0, 3, 6, 9, 2, 5):
            s.fold(f"q{i}", 1.0 if i % 2 == 0 else 0.0)
        feats = {k: w.decision.features for k, w in s._fold.inflight.items()}
        s.close()
        s = open_()
        for i in (8, 1, 11, 4, 10, 7):
            s.fold(f"q{i}", 1.0 if i % 3 else 0.0)
        state = s.state
        s.close()
        return state, feats

    plain, f0 = session(tmp_path / "plain", None)
    walled_, f1 = session(tmp_path / "walled", "acme")
    assert f1 == f0 and sum(1 for f in f1.values() if f) >= 4  # the walled decisions expose the features
    assert plain.router.updates >= 8
    assert walled_.tenants["acme"] == plain
