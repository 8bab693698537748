"""``rizz sweep``: spec checks (fast), grid expansion, and a small sweep serial vs a real local Ray."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from rizz.formats.policy_file import load_policy
from rizz.lab.sweep import expand, load_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[2]
TRACE_MINI = ROOT / "data" / "trace-mini" / "test.jsonl"
sys.path.insert(0, str(ROOT / "benchmarks"))
import stub_model  # noqa: E402


def _spec(tmp_path: Path, **over) -> Path:
    lines = [l for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l or '"task": "C-STANCE"' in l][:4]
    (tmp_path / "s.jsonl").write_text("\n".join(lines) + "\n")
    data = {"base": "default", "grid": {"retrieval.examples_k": [0, 4]}, "streams": ["s.jsonl"], "seeds": [0, 1],
            "baselines": ["frozen"], **over}
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_expand_sets_the_fields_and_validates(tmp_path):
    spec = load_sweep(_spec(tmp_path, grid={"retrieval.examples_k": [2, 8], "routing.snap_threshold": [0.88, 0.92]}))
    pols = expand(spec)
    assert [p.name for _, p, _ in pols] == [
        "retrieval.examples_k=2,routing.snap_threshold=0.88", "retrieval.examples_k=2,routing.snap_threshold=0.92",
        "retrieval.examples_k=8,routing.snap_threshold=0.88", "retrieval.examples_k=8,routing.snap_threshold=0.92", "frozen"]
    base = load_policy("default")
    for _, p, f in pols[:4]:
        assert p.retrieval.examples_k == f["retrieval.examples_k"] and p.routing.snap_threshold == f["routing.snap_threshold"]
        assert p.lifecycle == base.lifecycle and p.compiler == base.compiler  # nothing else changed
    assert spec.seeds == (0, 1) and spec.streams == ((tmp_path / "s.jsonl").resolve(),)


@pytest.mark.parametrize("over, msg", [
    ({"grid": {"retrieval.examples_kk": [1]}}, r"\$\.grid\.retrieval\.examples_kk: no such policy field \(\$\.retrieval\.examples_kk\); did you mean `examples_k`\?"),
    ({"grid": {"routing.snap_threshold": [0.9, 1.7]}}, r"(?s)grid point routing\.snap_threshold=1\.7.*\$\.routing\.snap_threshold: expected a number in \[0, 1\]"),
    ({"grid": {"retrieval.examples_k": []}}, r"\$\.grid\.retrieval\.examples_k: expected a non-empty list"),
    ({"streams": ["nope.jsonl"]}, r"\$\.streams\[0\]: stream file not found"),
    ({"seeds": [-1]}, r"\$\.seeds: expected a non-empty list of integers"),
    ({"limt": 3}, r"\$\.limt: unknown key; did you mean `limit`\?"),
    ({"base": "no-such-policy"}, r"no-such-policy"),
])
def test_bad_specs_name_the_field(tmp_path, over, msg):
    with pytest.raises(ValueError, match=msg):
        expand(load_sweep(_spec(tmp_path, **over)))


def test_a_yaml_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("streams: [a.jsonl]\nbase: default\ngrid:\n  routing.snap_threshold: [0.9\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(bad))}:5: not valid YAML: "):
        load_sweep(bad)


def test_cli_refuses_a_bad_spec_before_writing(tmp_path):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, ["sweep", str(_spec(tmp_path, grid={"write.nope": [1]})), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "$.grid.write.nope: no such policy field" in res.output
    assert not (tmp_path / "o").exists()


def test_two_streams_of_one_file_name_make_two_cells_and_limit_overrides(tmp_path):
    """Two ``test.jsonl`` in different folders sweep together (cells ``<folder>-test``), and
    ``--limit`` overrides the spec's limit (a newcomer's report: both used to be refused/missing)."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app
    from rizz.lab.sweep import cell_stems

    lines = TRACE_MINI.read_text().splitlines()
    for i, folder in enumerate(("a", "b")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test.jsonl").write_text("\n".join(lines[3 * i:3 * i + 3]) + "\n")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"base": "default", "grid": {"retrieval.examples_k": [0]},
                                    "streams": ["a/test.jsonl", "b/test.jsonl"], "limit": 3}))
    assert cell_stems(load_sweep(spec).streams) == ["a-test", "b-test"]
    assert cell_stems([Path("x/test.jsonl"), Path("y/dev.jsonl")]) == ["test", "dev"]  # unique stems keep their names
    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "o"), "--model", "oracle", "--limit", "2"])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "o" / "results.json").read_text())
    assert data["cells"] == ["a-test", "b-test"]
    for cell, first in (("a-test", lines[0]), ("b-test", lines[3])):
        log = (tmp_path / "o" / "cells" / cell / "retrieval.examples_k=0" / "log.jsonl").read_text().splitlines()
        steps = [json.loads(l) for l in log if json.loads(l).get("kind", "step") == "step"]
        assert len(steps) == 2 and steps[0]["id"] == json.loads(first)["id"]
    same = tmp_path / "c"
    same.mkdir()
    spec.write_text(yaml.safe_dump({"base": "default", "grid": {"retrieval.examples_k": [0]},
                                    "streams": ["a/test.jsonl", "c/../a/test.jsonl"]}))
    with pytest.raises(ValueError, match=r"\$\.streams: two stream files share a folder name and a file name"):
        load_sweep(spec)


def _strip(x, drop=frozenset({"wall_s", "latency_s", "cached", "uncached", "cost_usd", "command"})):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in drop}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


@pytest.mark.slow
def test_sweep_serial_and_on_ray_agree(tmp_path):
    ray = pytest.importorskip("ray", reason="rizz[ray] not installed")
    spec = load_sweep(_spec(tmp_path))
    serial = run_sweep(spec, tmp_path / "serial", model_factory=stub_model.cached_stub, log=lambda m: None)
    assert serial["cells"] == ["s.seed0", "s.seed1"] and serial["reference"] == "frozen"
    order0 = [json.loads(l)["id"] for l in (tmp_path / "serial/streams/s.seed0.jsonl").read_text().splitlines()]
    order1 = [json.loads(l)["id"] for l in (tmp_path / "serial/streams/s.seed1.jsonl").read_text().splitlines()]
    assert sorted(order0) == sorted(order1) and order0 != order1  # same elements, two orders
    r = serial["results"]
    k0, k4 = "retrieval.examples_k=0", "retrieval.examples_k=4"
    for n in (k0, k4, "frozen"):
        pooled = [json.loads(l)["verdict"]["reward"] for c in serial["cells"]
                  for l in (tmp_path / "serial/cells" / c / n / "log.jsonl").read_text().splitlines()]
        assert r[n]["n_answered"] == len(pooled) == 8
        assert r[n]["mean_reward"] == pytest.approx(sum(pooled) / 8, abs=1e-6)
        assert r[n]["ci95"][0] <= r[n]["mean_reward"] <= r[n]["ci95"][1]
    assert serial["deltas"][k4]["delta_pp"] == pytest.approx(100 * (r[k4]["mean_reward"] - r["frozen"]["mean_reward"]), abs=1e-3)
    assert [m["value"] for m in serial["marginals"]["retrieval.examples_k"]] == [0, 4]
    assert serial["marginals"]["retrieval.examples_k"][1]["mean_reward"] == r[k4]["mean_reward"]
    for name in ("sweep_rewards.png", "sweep_retrieval.examples_k.png", "report.md", "cells/s.seed0/report.md"):
        assert (tmp_path / "serial" / name).stat().st_size > 1000, name
    ray.cloudpickle.register_pickle_by_value(stub_model)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        par = run_sweep(spec, tmp_path / "ray", model_factory=stub_model.cached_stub, ray_address="local", log=lambda m: None)
    finally:
        ray.shutdown()
    assert _strip({k: v for k, v in par.items() if k != "streams"}) == _strip({k: v for k, v in serial.items() if k != "streams"})
    assert [r["per_cell"]["s.seed1"]["state_digest"] for r in par["results"].values()] == \
        [r["per_cell"]["s.seed1"]["state_digest"] for r in serial["results"].values()]
