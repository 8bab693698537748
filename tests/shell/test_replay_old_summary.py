"""``rizz replay --policy`` of a RUN_DIR whose summary.json an older rizz wrote (no
``branch_labels``: the v1 fixture) says what differs instead of failing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from rizz.apps.cli import app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1-rundir"


def test_replay_under_another_policy_of_a_summary_without_labels(tmp_path: Path):
    out = tmp_path / "v1"
    shutil.copytree(FIXTURE, out)
    assert "branch_labels" not in json.loads((out / "summary.json").read_text())
    res = CliRunner().invoke(app, ["replay", str(out), "--policy", "frozen"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    said = res.stderr.splitlines()
    assert said[1].startswith("differs from the run's summary.json (fixture) in: branches 3 (3 active) → 1 (1 active)")
    assert "labels not recorded → any/global" in said[1]
    assert res.exit_code == 0
