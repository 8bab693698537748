"""benchmarks/label_sweep.py: the routing-only refold and its label-quality figures.

A tiny synthetic stream (8-d one-hot embeddings, hand-made label embeddings): two inputs of one
task whose judge labels differ (``apple-sums`` / ``pear-totals``, label cosine 0.85, Jaccard 0)
and one input of another task. Values asserted, so a refold that ignored the policy would fail.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rizz.core import Label, StepInput, Verdict

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import label_sweep  # noqa: E402
from test_run import TRACE_MINI, _answer  # noqa: E402,F401  (the run tests' stand-in model)


def _e(i: int) -> np.ndarray:
    return np.eye(8, dtype=np.float32)[i]


def _lab(cos: float) -> np.ndarray:
    """A unit label embedding with cosine ``cos`` to _e(7)."""
    return np.array([0, 0, 0, 0, 0, 0, np.sqrt(1 - cos * cos), cos], dtype=np.float32)


def _step(i: int, emb, label: Label, lemb, shape: str, task: str, reward: float = 1.0) -> label_sweep.Step:
    inp = StepInput(i, f"q{i}", f"question {i}", emb, shape=shape, label=label, label_embedding=np.asarray(lemb, np.float32).tobytes(), answer="x")
    return label_sweep.Step(inp, Verdict(reward), task)


@pytest.fixture
def stream() -> list[label_sweep.Step]:
    return [
        _step(0, _e(0), Label("solve-math", "apple-sums"), _e(7), "number", "T"),
        _step(1, _e(1), Label("solve-math", "pear-totals"), _lab(0.85), "number", "T"),
        _step(2, _e(2), Label("classify", "fruit-kind"), _e(5), "letter", "U"),
    ]


def _policy(**fields):
    (p,) = [pt for pt in label_sweep.points("default", {"g": {k: [v] for k, v in fields.items()}}) if pt.fields] or [None]
    return p.policy


def test_a_lower_snap_threshold_puts_two_labels_of_one_task_in_one_branch(stream):
    base = label_sweep.refold(label_sweep._load("default"), stream)
    assert base["routes"] == ["b0", "b1", "b2"]  # 0.85 < τ_snap 0.92: pear-totals spawns its own branch
    fb = label_sweep.figures(base)
    assert (fb["purity"], fb["fragmentation"], fb["per_task"]) == (1.0, 1.5, {"T": 2, "U": 1})
    assert fb["per_task_share"] == {"T": 0.5, "U": 1.0}  # the task's largest branch holds half of its traffic
    assert fb["spawned"] == 3 and fb["judged"] == 3 and fb["merges"] == 0

    low = label_sweep.refold(_policy(**{"routing.snap_threshold": 0.80}), stream)
    assert low["routes"] == ["b0", "b0", "b1"]  # snapped to apple-sums, then routed to b0 (score 0.3 > 0)
    fl = label_sweep.figures(low)
    assert (fl["purity"], fl["fragmentation"], fl["per_task"]) == (1.0, 1.0, {"T": 1, "U": 1})
    assert fl["branches"][0]["label"] == "solve-math/apple-sums" and fl["branches"][0]["traffic"] == 2
    assert label_sweep._better(fl, fb) and not label_sweep._better(fb, fl)


def test_a_merge_lowers_fragmentation_after_merges_not_as_routed(stream):
    pol = _policy(**{"lifecycle.merge_every": 1, "lifecycle.merge_label_jaccard": 0.0, "lifecycle.merge_anchor_similarity": 0.0})
    r = label_sweep.refold(pol, stream)
    assert r["routes"] == ["b0", "b1", "b2"] and r["merged"] == {"b1": "b0"}
    f = label_sweep.figures(r)
    assert (f["fragmentation"], f["fragmentation_merged"], f["purity_merged"], f["merges"]) == (1.5, 1.0, 1.0, 1)


def test_when_uncertain_keeps_a_label_only_where_the_judge_would_be_asked(stream):
    again = _step(3, _e(0), Label("solve-math", "something-else"), _e(6), "number", "T")  # cosine 1 to b0's anchor
    r = label_sweep.refold(label_sweep._load("default"), stream + [again])
    assert r["routes"][3] == "b0" and r["judged"] == 3  # confident: the label was not used, no spawn
    always = label_sweep.refold(label_sweep._load("judge-always"), stream + [again])
    assert always["judged"] == 4 and always["routes"][3] == "b0"  # judge-always: labelled, but the anchor outweighs it
    assert always["spawned"] == 3


def test_parse_grid_and_bad_points_name_the_field():
    assert label_sweep.parse_grid("routing.snap_threshold=0.8,0.9; sketch.enabled=true") == {
        "routing.snap_threshold": [0.8, 0.9], "sketch.enabled": [True]}
    with pytest.raises(ValueError, match="expected field=v1,v2"):
        label_sweep.parse_grid("routing.snap_threshold")
    from rizz.lab.sweep import SweepError

    with pytest.raises(SweepError, match=r"\$\.routing\.snap_threshold"):
        label_sweep.points("default", {"g": {"routing.snap_threshold": [1.5]}})
    pts = label_sweep.points("default", {"g": {"routing.snap_threshold": [0.92, 0.8]}})
    assert [p.name for p in pts] == ["base", "routing.snap_threshold=0.8"]  # 0.92 is the base itself


def test_a_logged_run_refolds_to_its_own_routes(tmp_path, fake_model, capsys):
    from rizz.adapters.embedder import Embedder
    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    lines = [l for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l or '"task": "ScienceQA"' in l][:10]
    stream_file = tmp_path / "s.jsonl"
    stream_file.write_text("\n".join(lines) + "\n")
    run_stream(stream_file, load_policy("judge-always"), "judge-always", tmp_path / "run", fake_model(_answer), Embedder(), log=lambda m: None)
    steps, logged, meta = label_sweep.load_steps(tmp_path / "run")
    assert len(steps) == 10 and all(s.inp.label is not None for s in steps)
    assert [s.task for s in steps] == [json.loads(l)["metadata"]["task"] for l in lines]
    assert label_sweep.refold(label_sweep._load("judge-always"), steps)["routes"] == logged
    rc = label_sweep.main([str(tmp_path / "run"), "--base", "judge-always", "--grid", "routing.snap_threshold=0.5"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and out["own_policy_routes_reproduced"] == 10 and out["steps"] == 10
    base = out["points"][0]
    assert base["name"] == "base" and base["judged"] == 10 and base["spawned"] == len(set(logged))
    assert sum(b["traffic"] for b in base["branches"]) == 10


class _TableEmbedder:
    """Maps the two application texts of the test to fixed unit vectors (label_sweep.relabel only)."""

    name = "table"

    def embed(self, texts):
        table = {"apple sums": _e(7), "pear totals": _lab(0.95)}
        return np.stack([table[t] for t in texts])


def test_relabel_replaces_labels_and_their_embeddings_then_the_snap_follows(stream):
    labels = {"q1": {"function": "Solve Math", "application": "pear totals"}}
    steps, n = label_sweep.relabel(stream, labels, _TableEmbedder())
    assert n == 1 and steps[1].inp.label == Label("solve-math", "pear-totals") and steps[0] is stream[0]
    assert np.allclose(np.frombuffer(steps[1].inp.label_embedding, np.float32), _lab(0.95))
    assert label_sweep.refold(label_sweep._load("default"), steps)["routes"] == ["b0", "b0", "b1"]  # 0.95 ≥ τ_snap 0.92


def test_labels_tuned_changes_only_the_routing_fields_it_names():
    import attrs

    d, t = label_sweep._load("default"), label_sweep._load(str(ROOT / "policies" / "labels-tuned.yaml"))
    assert t.name == "labels-tuned" and (t.routing.jaccard_threshold, t.routing.w_anchor) == (0.2, 3.0)
    assert t.routing.fallback_application == "first_line"
    back = attrs.evolve(t.routing, jaccard_threshold=0.4, w_anchor=2.0, judge="local")
    assert attrs.evolve(t, name="default", routing=back) == d
