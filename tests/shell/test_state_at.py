"""``rizz.engine.run.state_at``: the state of a RUN_DIR at a step, from Python, read-only; it
agrees with what ``rizz diff`` (``rizz.lab.diff.diff_run``) says each step changed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from rizz.core import digest
from rizz.engine.run import fold_until, replay, run_stream, state_at, step_count
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.lab.diff import branch_rows, describe_event, diff_run

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
