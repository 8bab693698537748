"""A copy of a shipped policy file keeps its ``name:``: `cp policies/default.yaml my-snap.yaml`,
one threshold changed, was called `default` by `rizz policy check`, every line of `rizz run`
and (refused) `rizz bench -P default,my-snap.yaml`, with nothing saying the name clashed."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rizz.apps import cli

ROOT = Path(__file__).resolve().parents[2]


def _copy(folder: Path, snap: str = "0.85") -> Path:
    """``cp policies/default.yaml my-snap.yaml`` with ``routing.snap_threshold`` set to ``snap``."""
    text = (ROOT / "policies" / "default.yaml").read_text(encoding="utf-8")
    assert "snap_threshold: 0.92" in text
    path = folder / "my-snap.yaml"
    path.write_text(text.replace("snap_threshold: 0.92", f"snap_threshold: {snap}"), encoding="utf-8")
    return path


def _stream(path: Path) -> Path:
    els = [{"id": f"s{i}", "input": f"What is {i} + {i}?", "reference": str(2 * i), "verifier": "exact_match",
            "metadata": {"task": "short"}} for i in range(4)]
    path.write_text("".join(json.dumps(e) + "\n" for e in els))
    return path


def _err(res) -> str:
    return res.output  # stdout and stderr, as a terminal shows them


def _clash(path: Path) -> str:
    return (f"note: {path} is named default, as the shipped policy, but 1 field differs from it (rizz policy diff default {path}); "
            "rizz run and rizz bench label it my-snap; give it its own name: (name: my-snap), or write extends: default "
            "with only the keys you changed")


def test_policy_check_notes_a_copied_shipped_policy_whose_fields_differ(tmp_path):
    copy = _copy(tmp_path)
    res = CliRunner().invoke(cli.app, ["policy", "check", str(copy)])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[0] == (f"{copy}: ok (default); note: no extends:, so its unset fields are rizz.core.Policy's values, not "
                        f"policies/default.yaml's (1 field differs from default: rizz policy diff default {copy}; "
                        "add extends: default to start from it)"), lines
    assert lines[1:] == [_clash(copy)], lines


def test_policy_check_says_nothing_of_a_clash_for_shipped_policies_identical_copies_or_own_names(tmp_path):
    same = tmp_path / "same.yaml"
    same.write_text((ROOT / "policies" / "default.yaml").read_text(encoding="utf-8"))
    own = tmp_path / "own.yaml"
    own.write_text("extends: default\nrouting:\n  snap_threshold: 0.85\n")
    res = CliRunner().invoke(cli.app, ["policy", "check", "default", "frozen", str(ROOT / "policies" / "frozen.yaml"), str(same), str(own)])
    assert res.exit_code == 0 and "note" not in res.output and "label" not in res.output, res.output


def test_the_no_extends_note_says_1_field(tmp_path):
    loose = tmp_path / "loose.yaml"
    text = (ROOT / "policies" / "default.yaml").read_text(encoding="utf-8").replace("snap_threshold: 0.92", "snap_threshold: 0.85")
    loose.write_text(text.replace("name: default", "name: loose") if "name: default" in text else text)
    res = CliRunner().invoke(cli.app, ["policy", "check", str(loose)])
    assert res.exit_code == 0 and "(1 field differs from default: " in res.output and "1 fields" not in res.output, res.output


def test_run_labels_a_clashing_copy_by_its_file_stem_and_says_why(tmp_path, cli_stub):
    copy, stream, out = _copy(tmp_path), _stream(tmp_path / "s.jsonl"), tmp_path / "snap"
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--policy", str(copy), "--out", str(out), "--model", "fake:scripted"])
    assert res.exit_code == 0, _err(res)
    said = _err(res)
    assert said.count("is named default, as the shipped policy") == 1 and f"rizz run: {_clash(copy)}" in " ".join(said.split()), said
    assert f"policy my-snap, into {out}" in said and "policy default," not in said, said
    assert json.loads((out / "run.json").read_text())["policy"] == str(copy)  # the contract's fields as before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == str(copy) and summary["steps"] == 4


def test_bench_of_default_and_a_clashing_copy_runs_both_under_distinct_labels(tmp_path, cli_stub):
    copy, stream, out = _copy(tmp_path), _stream(tmp_path / "s.jsonl"), tmp_path / "b"
    res = CliRunner().invoke(cli.app, ["bench", str(stream), "-P", f"default,{copy}", "--out", str(out), "--model", "fake:scripted"])
    assert res.exit_code == 0, _err(res)
    said = _err(res)
    assert said.count("is named default, as the shipped policy") == 1 and f"rizz bench: {_clash(copy)}" in " ".join(said.split()), said
    assert (out / "default" / "summary.json").is_file() and (out / "my-snap" / "summary.json").is_file()
    results = json.loads((out / "results.json").read_text())
    assert list(results["results"]) == ["default", "my-snap"]
    assert json.loads((out / "my-snap" / "summary.json").read_text())["policy"] == str(copy)
    rows = [line.split()[0] for line in res.output.splitlines() if "mean reward" not in line and " [0.000, " in line]
    assert rows == ["default", "my-snap"], res.output  # the table: one row each
    again = CliRunner().invoke(cli.app, ["bench", str(stream), "-P", f"default,{copy}", "--out", str(out), "--model", "fake:scripted"])
    assert again.exit_code == 0 and f"{out / 'my-snap'}: already finished (4 steps); nothing to run" in again.output, again.output


def test_bench_still_refuses_two_entries_of_one_label(tmp_path, cli_stub):
    """An identical copy is the shipped policy under another file: it keeps the label (and the refusal)."""
    same = tmp_path / "same.yaml"
    same.write_text((ROOT / "policies" / "default.yaml").read_text(encoding="utf-8"))
    res = CliRunner().invoke(cli.app, ["bench", str(_stream(tmp_path / "s.jsonl")), "-P", f"default,{same}", "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "policy names must differ" in _err(res), _err(res)
