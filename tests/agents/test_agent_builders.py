"""`rizz streams build bfcl|tau-bench`: the issue's split rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from rizz.lab.builders import BuildError, BuildOptions, build

DATA_ROOT = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA_ROOT / "tau_bench").is_dir(), reason="../shared/data not present")


def test_bfcl_halves_in_file_order_per_category() -> None:
    opts = dict(tasks=("multiple", "multi_turn_base"))
    train = build("bfcl", Path("."), BuildOptions(split="train", **opts)).elements
    test = build("bfcl", Path("."), BuildOptions(split="test", per_task=2, **opts)).elements
    assert [e.id for e in train if e.task == "multiple"][:2] == ["bfcl-multiple_0", "bfcl-multiple_1"]
    assert len([e for e in train if e.task == "multiple"]) == 100
    assert [e.id for e in test] == ["bfcl-multiple_100", "bfcl-multiple_101", "bfcl-multi_turn_base_100", "bfcl-multi_turn_base_101"]
    mt = test[2]
    assert mt.verifier == "bfcl_multi_turn" and mt.turns and mt.environment["involved_classes"]
    with pytest.raises(BuildError, match="BFCL streams have train and test"):
        build("bfcl", Path("."), BuildOptions(split="eval", **opts))
    with pytest.raises(BuildError, match="not one of"):
        build("bfcl", Path("."), BuildOptions(tasks=("web_search",)))


def test_bfcl_interleaved_mixes_categories_keeping_each_ones_order() -> None:
    opts = dict(split="test", per_task=3, tasks=("multiple", "parallel", "irrelevance"))
    seq = build("bfcl", Path("."), BuildOptions(**opts)).elements
    mixed = build("bfcl", Path("."), BuildOptions(order="interleaved", seed=0, **opts)).elements
    assert sorted(e.id for e in mixed) == sorted(e.id for e in seq) and len(mixed) == 9
    assert [e.id for e in mixed] != [e.id for e in seq]
    for cat in opts["tasks"]:
        assert [e.id for e in mixed if e.task == cat] == [e.id for e in seq if e.task == cat]
    again = build("bfcl", Path("."), BuildOptions(order="interleaved", seed=0, **opts)).elements
    assert [e.id for e in again] == [e.id for e in mixed]


@needs_data
def test_tau_bench_source_splits() -> None:
    dev = build("tau-bench", DATA_ROOT, BuildOptions(split="dev", domain="retail")).elements
    assert len(dev) == 20 and dev[0].id == "tau-retail-dev-000" and dev[0].verifier == "tau_db"
    assert dev[0].user == dev[0].input and dev[0].instruction.startswith("# Retail agent policy")
    air = build("tau-bench", DATA_ROOT, BuildOptions(split="test", domain="airline")).elements
    assert len(air) == 38
    with pytest.raises(BuildError, match="airline ships only test"):
        build("tau-bench", DATA_ROOT, BuildOptions(split="train", domain="airline"))


def test_episode_lines_are_the_same_bytes_under_any_hash_seed(tmp_path: Path) -> None:
    """A stream built twice is the same file: pmaps iterate in hash-seed order, so the writer
    sorts every nested dict's keys (streams.sorted_plain); before, two processes wrote the
    tool lists of one BFCL item in different orders."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"b{seed}.jsonl"
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(root))
        subprocess.run([sys.executable, "-m", "rizz.apps.cli", "streams", "build", "bfcl", "--categories",
                        "simple_python,multi_turn_base", "--split", "test", "--per-task", "2", "--out", str(out)],
                       env=env, check=True, capture_output=True, cwd=root)
        outs.append(out.read_bytes())
    assert b'"tools"' in outs[0] and outs[0] == outs[1]


def test_bfcl_builds_without_a_benchmark_data_root(tmp_path: Path, monkeypatch) -> None:
    """BFCL's items ship inside the bfcl-eval wheel: a fresh clone with no ../shared/data (and a
    data root that does not exist) still builds it; a builder reading the data root still asks."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RIZZ_DATA_ROOT", str(tmp_path / "nowhere"))
    res = CliRunner().invoke(app, ["streams", "build", "bfcl", "--categories", "simple_python", "--per-task", "2",
                                   "--out", str(tmp_path / "b.jsonl")])
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2
    res = CliRunner().invoke(app, ["streams", "build", "tau-bench", "--domain", "retail", "--out", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 2 and "benchmark data root not found" in res.output
