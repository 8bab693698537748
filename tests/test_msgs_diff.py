"""``rizz diff RUN --to K`` without ``--at``: ``--at`` defaults to the log's last step, so a
``--to`` before it was refused as "--to 3 is before --at 15", naming an --at the user never
gave. The one-line refusal now says where that step came from and what to type instead."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rizz.apps.cli import app
from rizz.lab.diff import diff_run

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "v1-rundir"  # a RUN_DIR of 16 steps (0..15)


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "run")
    return tmp_path / "run"


def test_to_alone_before_the_last_step_says_at_defaults_to_it_and_what_to_give(run: Path) -> None:
    res = CliRunner().invoke(app, ["diff", str(run), "--to", "3"])
    assert res.exit_code == 2
    assert res.output == ("--to 3 is before --at, which defaults to the log's last step (15 here) when not given: "
                          "give both, e.g. --at 0 --to 3 for steps 0..3, or --at 3 for step 3 alone\n")
    assert "--at 15" not in res.output  # the --at the user never gave


def test_to_0_alone_suggests_at_0_alone(run: Path) -> None:
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    res = CliRunner().invoke(app, ["diff", str(run), "--to", "0"])
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert res.exit_code == 2
    assert res.output == ("--to 0 is before --at, which defaults to the log's last step (15 here) when not given: "
                          "give --at 0 for step 0 alone\n")
    assert diff_run(run, 0).splitlines()[0].startswith("step 0 ")  # what it suggests runs


def test_what_the_refusal_suggests_runs(run: Path) -> None:
    text = diff_run(run, 0, 3)
    assert [line.split(" ")[1] for line in text.splitlines() if line.startswith("step ")] == ["0", "1", "2", "3"]
    assert diff_run(run, 3).splitlines()[0].startswith("step 3 ")


def test_a_given_at_keeps_its_short_refusal_and_to_at_the_last_step_alone_runs(run: Path) -> None:
    res = CliRunner().invoke(app, ["diff", str(run), "--at", "5", "--to", "3"])
    assert res.exit_code == 2 and res.output == "--to 3 is before --at 5\n"
    res = CliRunner().invoke(app, ["diff", str(run), "--to", "15"])
    assert res.exit_code == 0 and res.output.startswith("step 15 "), res.output
