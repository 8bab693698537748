"""Issue #10 through the shell: prompt blocks are logged, and a run under the evidence and
learned-routing policies refolds from its log to its digest (fake model, real embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rizz.shell.embed import Embedder
from rizz.shell.policy_file import load_policy
from rizz.shell.run import replay, run_stream

from test_run import TRACE_MINI, _answer  # noqa: F401  (same stand-in model as the run tests)


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
