"""``rizz.engine.run.state_at``: the state of a RUN_DIR at a step, from Python, read-only; it
agrees with what ``rizz diff`` (``rizz.lab.diff.diff_run``) says each step changed."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

import rizz.engine.logfold as logfold_mod
from rizz.core import digest
from rizz.engine.run import fold_until, replay, run_stream, state_at, step_count
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.lab.diff import branch_rows, describe_event, diff_run
from rizz.store.runlog import RunDir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from livekit import HashEmbedder as LiveEmbedder, StubModel  # noqa: E402
from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream  # noqa: E402

_WRITTEN = re.compile(r"^  \+ episode written to (\S+):", re.M)


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A ``rizz run`` RUN_DIR of 12 arithmetic elements (context lines among them), stub model."""
    tmp = tmp_path_factory.mktemp("state_at")
    out = tmp / "run"
    run_stream(arithmetic_stream(tmp / "s.jsonl", 12), load_policy("default"), "default", out, ArithmeticModel(), HashEmbedder(),
               log=lambda m: None)
    return out


def _episodes(state) -> dict[str, int]:
    return {b: len(state.branches[b].episodes) for b in state.branch_ids()}


def test_each_steps_state_grows_by_the_episodes_its_diff_writes(run):
    n = step_count(run)
    assert n == 12
    checked = 0
    for k in range(1, n):
        text = diff_run(run, k)
        if any(w in text for w in ("retired", "merged", "pruned", "deactivated")):
            continue  # memory that goes: not a plain count
        before, after = _episodes(state_at(run, k - 1)), _episodes(state_at(run, k))
        written: dict[str, int] = {}
        for b in _WRITTEN.findall(text):
            written[b] = written.get(b, 0) + 1
        assert {b: after[b] - before.get(b, 0) for b in after} == {b: written.get(b, 0) for b in after}, (k, text)
        assert text.endswith(f"after step {k}: {len(state_at(run, k).branches)} branch" + ("" if len(after) == 1 else "es")
                             + f" ({len(after)} active)")
        checked += bool(written)
    assert checked >= 5  # most steps verified and wrote an example


def test_the_last_steps_state_is_the_runs_and_nothing_is_written(run):
    before = _files(run)
    last = state_at(run, step_count(run) - 1)
    assert digest(last) == digest(state_at(run)) == replay(run, write_summary=False)["state_digest"]
    assert digest(state_at(run, 3)) != digest(last)
    assert [r["episodes"] for r in branch_rows(last)] == list(_episodes(last).values())
    assert _files(run) == before  # read-only: no summary, snapshot or lock file


def test_fold_until_gives_each_records_events(run):
    seen: list[tuple[int, str]] = []
    state = fold_until(run, 2, lambda rec, events: seen.extend((rec["step"], d) for e in events if (d := describe_event(e))))
    assert digest(state) == digest(state_at(run, 2))
    assert {s for s, _ in seen} == {0, 1, 2}
    step2 = [d for s, d in seen if s == 2]
    lines = [line[2:] for line in diff_run(run, 2).splitlines() if line.startswith("  ")]
    assert step2 and [line for line in lines if line in step2] == step2  # the lines rizz diff prints for step 2's events


def test_a_step_outside_the_log_is_refused(run, tmp_path):
    with pytest.raises(ValueError, match=r"step 12 is not in the log of .* \(it has steps 0\.\.11\)"):
        state_at(run, 12)
    with pytest.raises(ValueError, match="numbered from 0"):
        state_at(run, -1)
    with pytest.raises(FileNotFoundError, match="not a rizz RUN_DIR"):
        state_at(tmp_path, 0)


def test_a_live_sessions_state_at_a_step_holds_the_verdicts_folded_before_the_next_answer(tmp_path):
    app = tmp_path / "app"
    with Session.open(app, policy="default", model=StubModel(), embedder=LiveEmbedder()) as s:
        p0 = s.answer({"id": "q0", "input": "What is the sum of 2 and 2?", "metadata": {"shape": "number"}})
        p1 = s.answer({"id": "q1", "input": "What is the sum of 3 and 4?", "metadata": {"shape": "number"}})
        s.fold(p0, 1.0)  # step 0's verdict arrives after step 1's answer
        s.fold(p1, 1.0)
        final = s.digest()
    assert sum(_episodes(state_at(app, 0)).values()) == 0  # in log order, step 1's answer comes before q0's verdict
    assert sum(_episodes(state_at(app, 1)).values()) == 2
    assert digest(state_at(app, 1)) == final


@pytest.fixture(scope="module")
def snapped(tmp_path_factory) -> Path:
    """A ``rizz run`` RUN_DIR of 12 arithmetic elements with a snapshot every 3 steps (the newest 3 kept)."""
    tmp = tmp_path_factory.mktemp("state_at_snap")
    out = tmp / "run"
    run_stream(arithmetic_stream(tmp / "s.jsonl", 12), load_policy("default"), "default", out, ArithmeticModel(), HashEmbedder(),
               snapshot_every=3, log=lambda m: None)
    return out


def _folded(monkeypatch) -> list[int]:
    """Counts the records LogFold.apply folds from now on (one entry per record)."""
    seen: list[int] = []
    real = logfold_mod.LogFold.apply

    def apply(self, rec):
        seen.append(1)
        return real(self, rec)

    monkeypatch.setattr(logfold_mod.LogFold, "apply", apply)
    return seen


def test_state_at_from_a_snapshot_is_the_full_refolds_state(snapped):
    before = _files(snapped)
    assert RunDir(snapped).snapshot_steps()  # the run kept snapshots
    for k in range(step_count(snapped)):
        assert digest(state_at(snapped, k)) == digest(fold_until(snapped, k, snapshots=False)), k
    assert digest(state_at(snapped)) == digest(fold_until(snapped, snapshots=False)) == replay(snapped, write_summary=False)["state_digest"]
    assert _files(snapped) == before  # still read-only: no snapshot rebuilt, nothing written


def test_state_at_starts_from_the_newest_snapshot_at_or_before_the_step(snapped, monkeypatch):
    rd = RunDir(snapped)
    newest, records = rd.snapshot_steps()[-1], len(list(rd.records()))
    seen = _folded(monkeypatch)
    state_at(snapped)
    assert len(seen) == records - newest  # only the records after the newest snapshot
    seen.clear()
    fold_until(snapped, snapshots=False)
    assert len(seen) == records
    seen.clear()
    fold_until(snapped, None, lambda rec, events: None)  # each sees every record: from the first
    assert len(seen) == records
    seen.clear()
    state_at(snapped, 0)  # before the oldest snapshot kept
    assert len(seen) == 1


def test_a_damaged_snapshot_is_passed_over_and_left_as_it_is(snapped, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(snapped, run)
    rd = RunDir(run)
    *_, older, newest = rd.snapshot_steps()
    bad = run / "snapshots" / f"{newest:08d}.json"
    bad.write_bytes(bad.read_bytes().replace(b'"sha256":"', b'"sha256":"0', 1))
    before = _files(run)
    full = digest(fold_until(run, snapshots=False))
    seen = _folded(monkeypatch)
    assert digest(state_at(run)) == full
    assert len(seen) == len(list(rd.records())) - older  # from the snapshot before it
    assert _files(run) == before  # a refold reads: the damaged snapshot is not rewritten


def test_a_live_sessions_state_from_snapshots_holds_its_answers_in_flight(tmp_path, monkeypatch):
    app = tmp_path / "app"
    with Session.open(app, policy="default", model=StubModel(), embedder=LiveEmbedder(), snapshot_every=3, keep_snapshots=100) as s:
        pending = []
        for i in range(10):
            pending.append(s.answer({"id": f"q{i}", "input": f"What is the sum of {i} and 2?", "metadata": {"shape": "number"}}))
            if len(pending) > 2:  # each verdict arrives two answers late: answers are in flight at each snapshot
                s.fold(pending.pop(0), float(i % 2))
        for p in pending:
            s.fold(p, 1.0)
    rd = RunDir(app)
    in_flight = [n for n in rd.snapshot_steps() if json.loads((rd.snap_dir / f"{n:08d}.inflight.json").read_text())["inflight"]]
    assert len(in_flight) >= 3
    full = {k: digest(fold_until(app, k, snapshots=False)) for k in range(step_count(app))}
    seen = _folded(monkeypatch)
    assert {k: digest(state_at(app, k)) for k in full} == full
    assert len(seen) < len(full) * len(list(rd.records())) / 2  # most of them started from a snapshot
