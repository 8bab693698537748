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
from livekit import HashEmbedder as LiveEmbedder, StubModel, late_verdict_session  # noqa: E402
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
    final = late_verdict_session(app)  # step 0's verdict arrives after step 1's answer
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


# -- rizz diff (diff_run) from a snapshot: the same text as a refold from the first record --
@pytest.fixture(scope="module")
def live_snapped(tmp_path_factory) -> Path:
    """A live session's RUN_DIR of 10 answers whose verdicts arrive two answers late (answers in
    flight at each snapshot), a snapshot every 3 records, all kept."""
    app = tmp_path_factory.mktemp("diff_snap") / "app"
    with Session.open(app, policy="default", model=StubModel(), embedder=LiveEmbedder(), snapshot_every=3, keep_snapshots=100) as s:
        pending = []
        for i in range(10):
            pending.append(s.answer({"id": f"q{i}", "input": f"What is the sum of {i} and 2?", "metadata": {"shape": "number"}}))
            if len(pending) > 2:
                s.fold(pending.pop(0), float(i % 2))
        for p in pending:
            s.fold(p, 1.0)
    return app


def _first_kept(run: Path, at: int, to: int) -> int:
    """Records before the first of steps ``at``..``to`` in ``run``'s log: the newest snapshot diff_run may start from."""
    return next(i for i, r in enumerate(RunDir(run).records()) if at <= r["step"] <= to)


def _through(run: Path, to: int) -> int:
    """Records a fold up to step ``to`` reads: all before step ``to + 1``'s answer."""
    recs = list(RunDir(run).records())
    return next((i for i, r in enumerate(recs) if r["step"] > to and r.get("kind", "step") in ("step", "answer")), len(recs))


@pytest.mark.parametrize("which", ["snapped", "live_snapped"])
def test_diff_run_from_a_snapshot_says_what_a_full_refold_says(which, request, monkeypatch):
    run = request.getfixturevalue(which)
    before = _files(run)
    snaps = RunDir(run).snapshot_steps()
    assert len(snaps) >= 3
    n = step_count(run)
    pairs = [(k, k) for k in range(n)] + [(0, n - 1), (1, 4), (n - 4, n - 1), (n // 2, n // 2 + 2)]
    seen = _folded(monkeypatch)
    from_snapshot = 0
    for at, to in pairs:
        seen.clear()
        text = diff_run(run, at, to, snapshots=False)
        assert len(seen) == _through(run, to)  # snapshots=False: every record from the first
        assert f"step {at} [" in text and f"step {to} [" in text and text.endswith(")")
        seen.clear()
        assert diff_run(run, at, to) == text, (at, to)
        newest = max((s for s in snaps if s <= _first_kept(run, at, to)), default=0)
        assert len(seen) == _through(run, to) - newest, (at, to)
        from_snapshot += newest > 0
    assert from_snapshot >= n // 2  # most pairs started from a snapshot
    assert _files(run) == before  # read-only


def test_diff_run_on_a_late_step_folds_only_the_records_after_a_snapshot(snapped, monkeypatch):
    rd = RunDir(snapped)
    kinds = [(r.get("kind", "step"), r["step"]) for r in rd.records()]
    assert kinds[8:11] == [("step", 8), ("distill", 8), ("step", 9)] and len(kinds) == 13  # step 8's verdict made a distillation due
    assert rd.snapshot_steps() == [6, 9, 12]  # after 6, 9 and 12 records
    seen = _folded(monkeypatch)
    text = diff_run(snapped, 11)
    assert len(seen) == 1  # snapshot 12 is the state just before step 11: its record only (a refold folds 13)
    assert text.startswith("step 11 [") and "(12th element)" in text and text.endswith("after step 11: 1 branch (1 active)")
    seen.clear()
    diff_run(snapped, 9, 11)  # from snapshot 9, taken right before step 9's record
    assert len(seen) == 13 - 9
    seen.clear()
    text = diff_run(snapped, 8)  # snapshot 9 is after step 8's distill record, which diff reports: from snapshot 6
    assert len(seen) == 10 - 6
    assert text == diff_run(snapped, 8, snapshots=False) and "\nstep 8 [q8] distill (9th element)\n" in text
    seen.clear()
    diff_run(snapped, 2)  # before the oldest snapshot kept: from the first record
    assert len(seen) == 3


def test_diff_run_passes_over_a_damaged_snapshot_with_the_same_text(snapped, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(snapped, run)
    full = {(at, 11): diff_run(run, at, 11, snapshots=False) for at in (11, 9, 7)}
    bad = run / "snapshots" / f"{12:08d}.json"
    bad.write_bytes(bad.read_bytes().replace(b'"sha256":"', b'"sha256":"0', 1))  # its checksum fails
    before = _files(run)
    seen = _folded(monkeypatch)
    assert diff_run(run, 11) == full[(11, 11)]
    assert len(seen) == 13 - 9  # from the snapshot before it
    assert _files(run) == before  # not rewritten
    (run / "snapshots" / f"{9:08d}.inflight.json").write_text("not json")  # answers in flight this version cannot read
    before = _files(run)
    seen.clear()
    assert {k: diff_run(run, *k) for k in full} == full
    assert len(seen) == 13 + 13 + (13 - 6)  # 11 and 9..11 from the first record; 7..11 from snapshot 6
    assert _files(run) == before


def test_fold_until_each_from_sees_the_same_records_as_a_full_fold_and_starts_from_a_snapshot(snapped, monkeypatch):
    full: list[tuple[int, str, tuple]] = []
    fold_until(snapped, 10, lambda rec, events: full.append((rec["step"], rec.get("kind", "step"), events)))
    seen = _folded(monkeypatch)
    part: list[tuple[int, str, tuple]] = []
    state = fold_until(snapped, 10, lambda rec, events: part.append((rec["step"], rec.get("kind", "step"), events)), each_from=9)
    assert part == [r for r in full if r[0] >= 9] and {s for s, _, _ in part} == {9, 10}
    assert len(seen) == 12 - 9  # from snapshot 9 (after 9 records): step 8's distill record, steps 9 and 10
    assert digest(state) == digest(state_at(snapped, 10))


def test_diff_run_reads_the_log_once(snapped, log_reads):
    reads = log_reads
    assert diff_run(snapped, 9, 10) == diff_run(snapped, 9, 10, snapshots=False)
    assert len(reads) == 2  # once per call
