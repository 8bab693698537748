"""An episode in a live Session (log format 2): answered now, its verdict folded after a restart.

The `answer` record carries the whole episode; the first wrong call waits with the answer in
flight (also across a snapshot), so the late verdict of a failed episode writes that call as the
branch's anti-pattern, and `rizz replay` refolds the directory to the session's digest.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from rizz.core import StepInput, Verdict
from rizz.engine.logfold import memory_input
from rizz.engine.run import replay
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream
from tests.agents.conftest import StubModel

DATA = Path(__file__).resolve().parents[2] / "data"
TAU = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements


def _stub() -> StubModel:
    return StubModel(lambda p: "think(thought='hmm')" if "Tools:" in p else ("Hi." if "Agent:" not in p else "###STOP###"))


def test_memory_input_swaps_in_the_wrong_call_only_below_the_write_threshold() -> None:
    pol = load_policy("default")
    inp = StepInput(0, "x", "t", b"", answer="trajectory")
    thr = pol.write_threshold("tau_db")
    assert memory_input(pol, inp, Verdict(thr, "tau_db"), "bad()").answer == "trajectory"
    assert memory_input(pol, inp, Verdict(0.0, "tau_db"), "bad()").answer == "bad()"
    assert memory_input(pol, inp, Verdict(0.0, "tau_db"), None) is inp  # not an episode


def test_live_episode_folds_late_after_restart_and_replays(tmp_path, embedder) -> None:
    pol = load_policy("default")
    pol = attrs.evolve(pol, agents=attrs.evolve(pol.agents, max_steps=3))
    el = TAU[0]
    path = tmp_path / "live"
    s = Session.open(path, policy=pol, model=_stub(), embedder=embedder)
    p = s.answer(el)
    assert p.episode.model_calls == 3 and p.episode.stop == "max_steps"
    assert p.answer.startswith("think(thought='hmm')") and p.wrong_call == "think(thought='hmm')"
    s.close()  # snapshot with the episode in flight
    side = json.loads(next((path / "snapshots").glob("*.inflight.json")).read_text())
    assert side["inflight"][0][4] == "think(thought='hmm')"
    rec = json.loads((path / "log.jsonl").read_text().splitlines()[0])
    assert rec["kind"] == "answer" and rec["episode"]["wrong_call"] == "think(thought='hmm')"
    assert [e["role"] for e in rec["episode"]["transcript"]][:2] == ["user", "assistant"]

    model = _stub()
    s2 = Session.open(path, policy=pol, model=model, embedder=embedder)
    assert s2.pending_ids() == [el.id]
    s2.fold(el.id, Verdict(0.0, "tau_db"))
    failures = [a for b in s2.state.branches.values() for a in b.anti_patterns.records]
    assert [a.answer for a in failures] == ["think(thought='hmm')"]
    assert not any(b.episodes.records for b in s2.state.branches.values())
    digest = s2.digest()
    s2.close()
    n = len(model.prompts)
    assert replay(path)["state_digest"] == digest
    assert len(model.prompts) == n  # no model call
