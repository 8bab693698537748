"""``rizz inspect RUN_DIR --at N``: the branches (and, with ``--episodes``, the episodes) of the
state after step N, as ``rizz diff --at N`` counts steps; the same as a fold of the log to step N."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rizz.adapters.models.spec import load_model
from rizz.apps.cli import app
from rizz.engine.run import run_stream, state_at, step_count
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream
from rizz.lab.diff import branch_rows, inspect_run
from rizz.lab.episode_view import episode_rows, episodes_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from livekit import late_verdict_session  # noqa: E402
from stubs import HashEmbedder, StubBackend  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"
ELEMENTS = [json.loads(line) for line in (DATA / "trace-mini" / "test.jsonl").read_text().splitlines()[:10]]


class ReferenceModel(StubBackend):
    """Answers each element with its reference (every step verified, so each writes an example);
    the distiller gets a fixed rule. The fallback judge (routing.judge: local) asks no model."""

    name = "stub:reference"

    def reply(self, messages) -> str:
        text = messages[-1].content
        seen = [e for e in ELEMENTS if e["input"][-200:] in text]
        if not seen:
            return "IF the text is about rates THEN answer B"
        return max(seen, key=lambda e: text.rfind(e["input"][-200:]))["reference"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A ``rizz run`` RUN_DIR of trace-mini's first 10 elements (five tasks), a snapshot every 3 records."""
    tmp = tmp_path_factory.mktemp("inspect_at")
    stream = tmp / "s.jsonl"
    stream.write_text("".join(json.dumps(e) + "\n" for e in ELEMENTS))
    run_stream(stream, load_policy("default"), "default", tmp / "run", ReferenceModel(), HashEmbedder(), snapshot_every=3,
               log=lambda m: None)
    return tmp / "run"


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


def test_the_rows_at_a_step_are_a_fold_to_that_step_and_differ_from_the_final_ones(run):
    n = step_count(run)
    assert n == 10
    policy = load_policy("default")
    final = inspect_run(run)
    assert [(r["branch"], r["traffic"], r["episodes"]) for r in final] == [("b0", 7, 7), ("b1", 1, 1), ("b2", 2, 2)]
    for k in range(n):
        rows, folded = inspect_run(run, k), branch_rows(state_at(run, k), policy)
        assert [{key: r[key] for key in f} for r, f in zip(rows, folded, strict=True)] == folded, k
        assert sum(r["traffic"] for r in rows) == k + 1 and sum(r["episodes"] for r in rows) == k + 1, k
        for r in rows:  # the label's origin as at the end (labels are made at spawn), the inputs routed up to step k
            was = next(f for f in final if f["branch"] == r["branch"])
            assert (r["label"], r["label_from"], r["label_step"]) == (was["label"], was["label_from"], was["label_step"]) and r["label_step"] <= k
            assert sum(r["routed_by"].values()) == r["traffic"], (k, r)
    assert [len(inspect_run(run, k)) for k in range(n)] == [1, 1, 2, 2, 3, 3, 3, 3, 3, 3]  # b1 spawns at step 2, b2 at step 4
    assert [(r["branch"], r["traffic"], r["episodes"]) for r in inspect_run(run, 3)] == [("b0", 3, 3), ("b1", 1, 1)]
    assert inspect_run(run, n - 1) == final  # the last step's state is the final one


def test_the_cli_shows_the_state_after_the_step(run):
    code, out = _cli("inspect", str(run), "--at", "3", "--json")
    assert code == 0 and json.loads(out) == inspect_run(run, 3)
    code, out = _cli("inspect", str(run), "--at", "3", "--wide")
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"branches of {run} after step 3", out
    assert sum(1 for line in lines if line.lstrip().startswith(("b0 ", "b1 ", "b2 "))) == 2, out
    code, out = _cli("inspect", str(run), "--at", "9", "--json")
    assert code == 0 and json.loads(out) == inspect_run(run)


@pytest.mark.parametrize("extra", [(), ("--json",), ("--episodes",), ("--episodes", "--json")])
@pytest.mark.parametrize("at", ["10", "-1"])
def test_a_step_outside_the_log_is_one_line_naming_the_run_dir_and_its_last_step(run, at, extra):
    code, out = _cli("inspect", str(run), "--at", at, *extra)
    said = {"10": f"--at 10: step 10 is not in the log of {run} (it has steps 0..9)",
            "-1": f"--at -1: steps are numbered from 0 (the log of {run} has steps 0..9)"}[at]
    assert code == 2 and out == said + "\n", out
    with pytest.raises(ValueError) as info:
        (episode_rows if "--episodes" in extra else inspect_run)(run, int(at))
    assert str(info.value) == said


def test_a_live_sessions_rows_at_a_step_leave_out_the_verdicts_logged_after_the_next_answer(tmp_path):
    app_dir = tmp_path / "app"
    late_verdict_session(app_dir)  # step 0's verdict is logged after step 1's answer
    at0, final = inspect_run(app_dir, 0), inspect_run(app_dir)
    assert [(r["branch"], r["traffic"], r["answered"], r["episodes"]) for r in at0] == [("b0", 0, 0, 0)]  # spawned, no verdict folded
    assert [{k: r[k] for k in f} for r, f in zip(at0, branch_rows(state_at(app_dir, 0)), strict=True)] == branch_rows(state_at(app_dir, 0))
    assert sum(r["answered"] for r in final) == 2 and sum(r["episodes"] for r in final) == 2
    assert inspect_run(app_dir, 1) == final


def test_episodes_up_to_a_step(tmp_path):
    els = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements[:3]
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, els)
    run_stream(stream, load_policy("frozen"), "frozen", out, load_model("oracle"), HashEmbedder(), log=lambda m: None)
    every = episode_rows(out)
    assert [r["step"] for r in every] == [0, 1, 2] and all(r["reward"] == 1.0 for r in every)
    assert episode_rows(out, 1) == every[:2] and episode_rows(out, 2) == every
    text = episodes_text(out, at=0)
    assert [line for line in text.splitlines() if line.startswith("step ")] == [f"step 0 [{els[0].id}] task {els[0].task}: reward 1.000 (tau_db)"]
    assert episodes_text(out, at=2) == episodes_text(out)
    code, printed = _cli("inspect", str(out), "--episodes", "--at", "1", "--json")
    assert code == 0 and json.loads(printed) == every[:2]
    code, printed = _cli("inspect", str(out), "--episodes", "--at", "0")
    assert code == 0 and printed.strip() == text


@pytest.mark.parametrize(("args", "said"), [
    (("--at", "-1"), "--at -1: steps are numbered from 0 (the log of {run} has steps 0..9)"),
    (("--at", "10"), "--at 10: step 10 is not in the log of {run} (it has steps 0..9)"),
    (("--at", "2", "--to", "-1"), "--to -1: steps are numbered from 0 (the log of {run} has steps 0..9)"),
    (("--to", "-3"), "--to -3: steps are numbered from 0 (the log of {run} has steps 0..9)"),
    (("--at", "2", "--to", "10"), "--to 10: step 10 is not in the log of {run} (it has steps 0..9)"),
])
def test_diff_refuses_a_step_outside_the_log_in_the_one_line_inspect_prints(run, args, said):
    """``rizz diff --at -1`` was typer's usage box (its option had min=0); it is now
    ``rizz.engine.run.check_step``'s one line, as ``rizz inspect --at -1`` prints."""
    code, out = _cli("diff", str(run), *args)
    assert code == 2 and out == said.format(run=run) + "\n", out


def test_state_at_reads_the_log_once(run, log_reads, monkeypatch):
    """state_at(run, step) counted the steps (one read of log.jsonl) and then folded (another)."""
    from rizz.core import digest
    from rizz.engine.run import fold_until

    reads = log_reads
    state = state_at(run, 4)
    assert len(reads) == 1
    reads.clear()
    with pytest.raises(ValueError, match=r"step 10 is not in the log"):
        state_at(run, 10)
    assert len(reads) == 1
    monkeypatch.undo()  # log_reads's patch
    assert digest(state) == digest(fold_until(run, 4, snapshots=False)) != digest(state_at(run))


def test_replay_of_a_corrupt_log_is_one_line_naming_the_record_as_inspect_and_diff_say(tmp_path):
    """A newcomer appended a broken line to a run's log: inspect and diff said where, replay
    printed a traceback (exit 1), and the message lost the JSON error's position."""
    import shutil

    run = tmp_path / "v1"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "v1-rundir", run)
    with (run / "log.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"broken\n')
    said = f"{run / 'log.jsonl'}:17: corrupt log record (Invalid control character at column 9)"
    for cmd in (["replay", str(run)], ["inspect", str(run)], ["diff", str(run)]):
        code, out = _cli(*cmd)
        assert code == 2 and said in out and "Traceback" not in out, (cmd, out)
