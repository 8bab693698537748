"""Issue #12 §2 through the Session: Alice's verified answer must not reach Bob's prompt.

The stream of the issue: a context line in scope ``alice`` ("Alice: my locker code is
ZEBRA-42."), two questions in scope ``alice`` verified against ``ZEBRA-42``, then "What is
Bob's locker code?" in scope ``bob``. Fake model and a bag-of-words embedder (no model files).
"""

from __future__ import annotations

import hashlib
import re

import attrs
import numpy as np
import pytest

from rizz.core import Policy, TenantStates, digest
from rizz.engine.run import replay, run_stream
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import StreamElement, write_stream
from tests.core.helpers import unit


class BowEmbedder:
    """Bag of hashed lowercase words, L2-normalised: texts sharing words are similar."""

    name = "fake:bow"
    dim = 64

    def embed(self, texts):
        rows = []
        for t in texts:
            v = np.zeros(self.dim, dtype=np.float32)
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            rows.append(unit(v))
        return np.stack(rows)


def _reply(messages) -> str:
    text = messages[-1].content
    if '"function"' in text:
        return '{"function": "answer-question", "application": "locker-codes"}'
    return "LION-7" if "Bob's locker" in text else "ZEBRA-42"


def _stream(tenants: bool) -> list[StreamElement]:
    def meta(who: str) -> dict:
        return {"scope": who, "shape": "span", **({"tenant": who} if tenants else {})}

    return [
        StreamElement("c1", "Alice: my locker code is ZEBRA-42.", metadata=meta("alice"), context_only=True),
        StreamElement("q1", "What is Alice's locker code?", metadata=meta("alice"), reference="ZEBRA-42", verifier="exact_match"),
        StreamElement("q2", "Which locker code does Alice use?", metadata=meta("alice"), reference="ZEBRA-42", verifier="exact_match"),
        StreamElement("q3", "What is Bob's locker code?", metadata=meta("bob"), reference="LION-7", verifier="exact_match"),
    ]


def _bob_prompt(policy: Policy, fake_model, tenants: bool) -> tuple[str, Session]:
    s = Session(policy, fake_model(_reply), BowEmbedder())
    prompt = ""
    for el in _stream(tenants):
        p = s.answer(el)
        if el.id == "q3":
            prompt = p.prompt.text
        if not el.context_only:  # a context-only element is stored when answered
            s.fold(p, s.verify(p))
    return prompt, s


def test_without_walls_the_leak_of_the_issue_is_reproduced(fake_model) -> None:
    policy = attrs.evolve(load_policy("default"), retrieval=attrs.evolve(load_policy("default").retrieval, examples_cross_scope=True))
    prompt, _ = _bob_prompt(policy, fake_model, tenants=False)
    assert "Solved examples:" in prompt and "Answer: ZEBRA-42" in prompt


def test_tenants_keep_alices_answer_out_of_bobs_prompt(fake_model) -> None:
    policy = attrs.evolve(load_policy("default"), retrieval=attrs.evolve(load_policy("default").retrieval, examples_cross_scope=True))
    prompt, s = _bob_prompt(policy, fake_model, tenants=True)
    assert "What is Bob's locker code?" in prompt
    assert "ZEBRA" not in prompt and "Alice" not in prompt
    assert isinstance(s.state, TenantStates) and sorted(s.state.tenants) == ["alice", "bob"]
    bob = s.state.tenants["bob"]
    assert "ZEBRA" not in repr(bob) and "Alice" not in repr(bob)
    assert sum(len(b.episodes) for b in s.state.tenants["alice"].branches.values()) == 2
    assert s.state.tenants["alice"].steps == 3 and bob.steps == 1


def test_scope_switch_walls_episodes_within_one_tenant(fake_model) -> None:
    base = load_policy("default")
    policy = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_cross_scope=False))
    prompt, s = _bob_prompt(policy, fake_model, tenants=False)
    assert "ZEBRA" not in prompt
    # Alice's own second question still sees her first verified answer
    s2 = Session(policy, fake_model(_reply), BowEmbedder())
    seen = []
    for el in _stream(False)[:3]:
        p = s2.answer(el)
        seen.append(p.prompt.text if p.prompt else "")
        if not el.context_only:
            s2.fold(p, s2.verify(p))
    assert "Answer: ZEBRA-42" in seen[2]


def test_a_tenanted_run_replays_to_its_digest(tmp_path, fake_model) -> None:
    stream = tmp_path / "walls.jsonl"
    write_stream(stream, _stream(True))
    out = tmp_path / "run"
    summary = run_stream(stream, load_policy("default"), "default", out, fake_model(_reply), BowEmbedder(), log=lambda m: None)
    assert summary["steps"] == 4 and summary["branches"]["total"] >= 2
    log = (out / "log.jsonl").read_text()
    assert '"tenant": "bob"' in log
    again = replay(out, write_summary=False)
    assert again["state_digest"] == summary["state_digest"]


@pytest.mark.parametrize("bad", ["", 3])
def test_a_bad_tenant_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="metadata.tenant"):
        StreamElement("x", "q", metadata={"tenant": bad})


_ = digest


def test_inspect_and_diff_of_a_tenanted_run_keep_the_walls(tmp_path, fake_model) -> None:
    from rizz.lab.diff import diff_run, inspect_run

    stream = tmp_path / "walls.jsonl"
    write_stream(stream, _stream(True))
    out = tmp_path / "run"
    run_stream(stream, load_policy("default"), "default", out, fake_model(_reply), BowEmbedder(), log=lambda m: None)
    rows = inspect_run(out)
    by_tenant = {t: [r for r in rows if r["branch"].startswith(t + "/")] for t in ("alice", "bob")}
    assert len(rows) == len(by_tenant["alice"]) + len(by_tenant["bob"])
    assert [r["branch"] for r in by_tenant["bob"]] == ["bob/b0"] and by_tenant["bob"][0]["episodes"] == 1  # his own LION-7
    assert sum(r["episodes"] for r in by_tenant["alice"]) == 2 and sum(r["context"] for r in by_tenant["alice"]) == 1
    assert diff_run(out, 3).endswith(f"after step 3: {len(rows)} branches ({len(rows)} active)")


def test_with_shipped_default_the_issue_stream_no_longer_leaks(fake_model) -> None:
    prompt, _ = _bob_prompt(load_policy("default"), fake_model, tenants=False)
    assert "What is Bob's locker code?" in prompt and "ZEBRA" not in prompt and "Alice" not in prompt


def test_a_tenanted_run_resumes_from_a_snapshot_to_the_same_digest(tmp_path, fake_model) -> None:
    stream = tmp_path / "walls.jsonl"
    write_stream(stream, _stream(True))
    whole = run_stream(stream, load_policy("default"), "default", tmp_path / "a", fake_model(_reply), BowEmbedder(), log=lambda m: None)
    part = tmp_path / "b"
    run_stream(stream, load_policy("default"), "default", part, fake_model(_reply), BowEmbedder(), limit=3, snapshot_every=2, log=lambda m: None)
    assert (part / "snapshots" / "00000002.json").exists()
    resumed = run_stream(stream, load_policy("default"), "default", part, fake_model(_reply), BowEmbedder(), snapshot_every=2, log=lambda m: None)
    assert resumed["state_digest"] == whole["state_digest"] and resumed["steps"] == 4


# -- a live Session: answers in flight for several tenants, restart, replay ----------------
def _tenant_el(tenant: str, i: int) -> dict:
    import sys as _sys
    from pathlib import Path as _P

    _sys.path.insert(0, str(_P(__file__).parent))
    from livekit import element

    el = element(i)
    return dict(el, id=f"{tenant}-{el['id']}", metadata=dict(el["metadata"], tenant=tenant))


def _live_ops(path, ops, snapshot_every=3):
    """Run ``ops`` ((op, tenant, i), op answer / fold / restart) through Session.open."""
    from livekit import HashEmbedder, StubModel

    from rizz.core import Verdict

    base = load_policy("default")
    policy = attrs.evolve(base, rules=attrs.evolve(base.rules, distill_every=2))

    def open_():
        return Session.open(path, policy=policy, model=StubModel(), embedder=HashEmbedder(), snapshot_every=snapshot_every)

    s, prompts = open_(), {}
    for op, t, i in ops:
        if op == "answer":
            p = s.answer(_tenant_el(t, i))
            prompts[p.id] = p.prompt.text
        elif op == "fold":
            s.fold(f"{t}-q{i}", Verdict(1.0 if i % 3 else 0.0, "exact_match"))
        else:
            s.close()
            s = open_()
    return s, prompts


LIVE_OPS = [("answer", "alice", 0), ("answer", "bob", 0), ("answer", "alice", 1), ("answer", "alice", 2),
            ("fold", "bob", 0), ("answer", "bob", 1), ("fold", "alice", 2), ("restart", "", 0),
            ("answer", "bob", 2), ("fold", "alice", 0), ("answer", "alice", 3), ("fold", "bob", 2),
            ("fold", "alice", 1), ("answer", "alice", 4), ("fold", "bob", 1), ("fold", "alice", 4),
            ("answer", "bob", 3), ("fold", "alice", 3), ("answer", "alice", 5), ("fold", "alice", 5), ("fold", "bob", 3)]


def test_a_live_session_keeps_tenants_apart_with_answers_in_flight_restarts_and_replay(tmp_path) -> None:
    import json

    from rizz.core import sub_state

    s, prompts = _live_ops(tmp_path / "mixed", LIVE_OPS)
    assert isinstance(s.state, TenantStates) and sorted(s.state.tenants) == ["alice", "bob"] and not s.pending_ids()
    d = s.digest()
    mixed = {t: sub_state(s.state, t) for t in ("alice", "bob")}
    s.close()
    lines = [json.loads(x) for x in (tmp_path / "mixed" / "log.jsonl").read_text().splitlines()]
    assert {r["input"]["tenant"] for r in lines if r["kind"] == "answer"} == {"alice", "bob"}
    distills = [r["branch"] for r in lines if r["kind"] == "distill"]
    assert distills and all(b.split("/")[0] in ("alice", "bob") for b in distills)  # rules distilled behind the walls
    assert replay(tmp_path / "mixed", write_summary=False)["state_digest"] == d
    for t in ("alice", "bob"):
        alone, alone_prompts = _live_ops(tmp_path / t, [o for o in LIVE_OPS if o[1] in (t, "")])
        assert sub_state(alone.state, t) == mixed[t] and digest(sub_state(alone.state, t)) == digest(mixed[t])
        assert alone_prompts == {k: v for k, v in prompts.items() if k.startswith(t + "-")}
        other = "bob" if t == "alice" else "alice"
        assert other not in repr(mixed[t]) and not any(other in v for v in alone_prompts.values())
        alone.close()


def test_a_merge_in_one_tenant_moves_only_that_tenants_answers_in_flight(tmp_path) -> None:
    """Alice's and Bob's sub-states both hold b0 and b1; Alice's lifecycle merges her b1 into
    b0 while an answer of each tenant routed to its own b1 is pending: only Alice's moves."""
    from pyrsistent import pmap

    from rizz.core import Label, RouteDecision, RouteResult, StepInput, WalledDecision, events as ev
    from rizz.core.apply import fold
    from rizz.core.records import empty_state
    from rizz.engine.logfold import LogFold, load_inflight, save_inflight
    from rizz.formats.logrecord import LogRecord, VerdictPart

    lab, anchor = Label("solve-math", "sum"), np.eye(16, dtype=np.float32)[0].tobytes()
    pol = Policy()
    two = fold(empty_state(), [ev.BranchSpawned(b, lab, anchor, b"", "number", 0) for b in ("b0", "b1")])
    ts = TenantStates(tenants=pmap({"alice": two, "bob": two}), answers=pmap({"alice": 24, "bob": 5}))
    lf = LogFold(pol, None, state=ts, answers=40)

    def inp(step: int, item: str, tenant: str) -> StepInput:
        return StepInput(step=step, item_id=item, text=f"sum {item}", embedding=anchor, shape="number", answer="4", tenant=tenant)

    for step, item, tenant, local in ((40, "alice-late", "alice", 23), (41, "bob-late", "bob", 4)):
        d = WalledDecision(RouteDecision("b1", lab, 1.0), tenant, local)
        lf.apply(LogRecord(step=step, id=item, v=2, kind="answer"), inp=inp(step, item, tenant), routed=RouteResult(lf.state, d, ()))
    events = lf.apply(LogRecord(step=42, id="alice-now", v=2, kind="step", verdict=VerdictPart(1.0, "exact_match")),
                      inp=inp(42, "alice-now", "alice"))
    assert ev.BranchesMerged("b0", "b1") in events  # Alice's local step 24: (24 + 1) % merge_every == 0
    assert lf.inflight["alice-late"].decision.branch_id == "alice/b0"
    assert lf.inflight["bob-late"].decision.branch_id == "bob/b1"  # Bob's b1 is another branch
    save_inflight(tmp_path / "x.inflight.json", lf)
    assert load_inflight(tmp_path / "x.inflight.json") == (43, lf.inflight)
    events = lf.apply(LogRecord(step=41, id="bob-late", v=2, kind="verdict", verdict=VerdictPart(1.0, "exact_match")))
    assert [e.branch_id for e in events if isinstance(e, ev.EpisodeWritten)] == ["b1"]
    assert [e.input for e in lf.state.tenants["bob"].branches["b1"].episodes.records] == ["sum bob-late"]
    lf.apply(LogRecord(step=40, id="alice-late", v=2, kind="verdict", verdict=VerdictPart(1.0, "exact_match")))
    assert [e.input for e in lf.state.tenants["alice"].branches["b0"].episodes.records] == ["sum alice-now", "sum alice-late"]


def test_max_pending_counts_only_the_answers_of_the_same_tenant(tmp_path) -> None:
    from livekit import HashEmbedder, StubModel

    base = load_policy("default")
    policy = attrs.evolve(base, feedback=attrs.evolve(base.feedback, max_pending=2))
    s = Session.open(tmp_path / "app", policy=policy, model=StubModel(), embedder=HashEmbedder())
    s.answer(_tenant_el("alice", 0))
    for i in range(4):  # Bob's traffic does not age Alice's pending answer
        s.answer(_tenant_el("bob", i))
    s.answer(_tenant_el("alice", 1))  # checked on each call: bob-q0 has 3 later answers of Bob's
    assert "alice-q0" in s.pending_ids() and "bob-q0" not in s.pending_ids() and "bob-q1" in s.pending_ids()
    for i in (2, 3, 4):
        s.answer(_tenant_el("alice", i))  # at alice-q3 / alice-q4: three later answers of Alice's own
    assert [i for i in s.pending_ids() if i.startswith("alice")] == ["alice-q2", "alice-q3", "alice-q4"]
    d = s.digest()
    s.close()
    assert replay(tmp_path / "app", write_summary=False)["state_digest"] == d
