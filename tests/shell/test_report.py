"""The bench report: numbers, bootstrap intervals, stream checks, plots and report.md.

Two kinds of fixture: a real BENCH_DIR made by running ``default``, ``frozen`` and
``single-branch`` over 14 TRACE-mini lines with the fake model (one run, cached for the
module), and small hand-written BENCH_DIRs whose numbers are worked out by hand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rizz.lab.report import PLOTS, build_report, format_table
from rizz.lab.stats import N_RESAMPLES, bootstrap_ci, paired_delta

ROOT = Path(__file__).resolve().parents[2]
TRACE_MINI = ROOT / "data" / "trace-mini" / "test.jsonl"
POLICIES = ["default", "frozen", "single-branch"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_CACHE: dict[str, Path] = {}


def _answer(messages) -> str:
    """Deterministic stand-in model: a judge label, a letter by prompt hash, or a rule."""
    text = messages[-1].content
    if "function" in text.split("\n")[0].lower() or '"function"' in text:
        return '{"function": "classify", "application": "stance"}'
    if text.rstrip().endswith("Answer:") or "Reply with" in text:
        return ["A", "B", "C", "1", "2"][int(hashlib.sha256(text.encode()).hexdigest(), 16) % 5]
    return "IF the text is about rates THEN answer B"


@pytest.fixture
def real_bench(tmp_path_factory, fake_model) -> Path:
    """BENCH_DIR of the real pipeline (fake model, real embedder); built once per module."""
    if "dir" not in _CACHE:
        from rizz.adapters.embedder import Embedder
        from rizz.engine.run import run_stream
        from rizz.formats.policy_file import load_policy

        bench = tmp_path_factory.mktemp("bench")
        lines = [l for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l or '"task": "C-STANCE"' in l][:14]
        stream = bench / "stream.jsonl"
        stream.write_text("\n".join(lines) + "\n")
        embedder = Embedder()
        for p in POLICIES:
            run_stream(stream, load_policy(p), p, bench / p, fake_model(_answer), embedder, log=lambda m: None)
        _CACHE["dir"] = bench
    return _CACHE["dir"]


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(l) for l in path.read_text().splitlines()]


# -- hand-written BENCH_DIRs ---------------------------------------------------------------------
def _rec(step: int, id: str, task: str, reward: float | None, tokens: int = 50, budget: int = 100, *,
         kinds=("answer",), overflow=False, cost=None, sent: int = 10) -> dict[str, Any]:
    """A log record in the shape of ``rizz.engine.run.build_record`` (reward None: context-only);
    ``tokens``: the compiled prompt's, ``sent``: its answer call's prompt tokens (template included)."""
    rec: dict[str, Any] = {
        "step": step, "id": id, "task": task, "context_only": reward is None, "input": {"text": id},
        "route": {"branch": f"b{step % 2}", "score": 0.5, "spawned": step < 2},
        "calls": [{"kind": k, "prompt_tokens": sent if k == "answer" else 10, "completion_tokens": 2, "latency_s": 0.1, "cost_usd": cost, "cached": False} for k in kinds],
        "overflow": overflow, "wall_s": 0.5,
    }
    if reward is not None:
        rec["prompt"] = {"sha256": "0" * 64, "tokens": tokens, "budget": budget, "rendering": "raw", "dropped": [], "rule_ids": [], "episode_keys": []}
        rec["answer"] = {"raw": "A", "extracted": "A", "parsed": True}
        rec["verdict"] = {"reward": reward, "verifier": "exact_match", "parsed": True}
    return rec


def _write(bench: Path, policy: str, records: list[dict[str, Any]], branches=(2, 2)) -> None:
    d = bench / policy
    d.mkdir(parents=True)
    (d / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (d / "summary.json").write_text(json.dumps({"steps": len(records), "branches": {"total": branches[0], "active": branches[1]},
                                                "model": "fake:scripted", "policy": policy}))


IDS = ["x0", "x1", "ctx", "x2", "x3"]
TASKS = ["A", "A", "A", "B", "B"]


@pytest.fixture
def hand_bench(tmp_path) -> Path:
    """default: rewards 1, 0, (context), 1, 1 with one prompt over budget as sent (compiled 90,
    sent 120 > 100: the budget bounds the prompt as sent) and an overflow; frozen: 0.5 on every answered step; single-branch: default - 0.25 per step."""
    d = [1.0, 0.0, None, 1.0, 1.0]
    _write(tmp_path, "default", [_rec(i, IDS[i], TASKS[i], r, tokens=90 if i == 3 else 50, sent=120 if i == 3 else 10, kinds=("judge", "answer"),
                                      overflow=i == 4, cost=0.01) for i, r in enumerate(d)], branches=(3, 2))
    _write(tmp_path, "frozen", [_rec(i, IDS[i], TASKS[i], None if r is None else 0.5) for i, r in enumerate(d)], branches=(1, 1))
    _write(tmp_path, "single-branch", [_rec(i, IDS[i], TASKS[i], None if r is None else r - 0.25) for i, r in enumerate(d)], branches=(1, 1))
    return tmp_path


def _build(bench: Path, **kw) -> dict[str, Any]:
    return build_report(bench, POLICIES, title="hand bench", command="rizz bench s.jsonl --policies a,b", **kw)


def test_hand_values(hand_bench):
    res = _build(hand_bench)
    d, f, s = (res["results"][p] for p in POLICIES)
    assert d["mean_reward"] == 0.75 and d["n_answered"] == 4 and d["steps"] == 5
    assert d["per_task"]["A"]["n"] == 2 and d["per_task"]["A"]["mean_reward"] == 0.5
    assert d["per_task"]["B"] == {"n": 2, "mean_reward": 1.0, "ci95": [1.0, 1.0], "overflow": 1}  # step 4 overflowed
    assert "overflow" not in d["per_task"]["A"] and "overflow" not in f["per_task"]["B"]  # a task's count only when any
    assert d["model_calls"]["total"] == 10 and d["model_calls"]["by_kind"] == {"answer": 5, "distill": 0, "judge": 5}
    assert d["calls_per_answered_step"] == 2.5
    assert d["prompt_tokens"] == 210 and d["completion_tokens"] == 20 and d["max_prompt_tokens"] == 120  # as sent, not compiled (90)
    assert d["budget_exceeded"] == 1 and d["overflow"] == 1 and d["cost_usd"] == pytest.approx(0.1)
    assert d["wall_s"] == 2.5 and d["branches"] == {"total": 3, "active": 2}
    assert f["mean_reward"] == 0.5 and f["ci95"] == [0.5, 0.5] and f["budget_exceeded"] == 0 and f["cost_usd"] is None
    assert s["mean_reward"] == 0.5 and s["calls_per_answered_step"] == 1.25
    # deltas: default vs frozen +25 pp; single-branch is default shifted by -0.25 on every step,
    # so the paired interval of default vs single-branch has no width at all.
    assert res["deltas"]["frozen"]["default"]["delta_pp"] == 25.0 and res["deltas"]["frozen"]["default"]["n"] == 4
    assert res["deltas"]["single-branch"]["default"] == {"delta_pp": 25.0, "ci95_pp": [25.0, 25.0], "n": 4}
    assert res["command"] == "rizz bench s.jsonl --policies a,b" and res["policies"] == POLICIES
    assert res["bootstrap"]["resamples"] == N_RESAMPLES == 2000
    assert json.loads((hand_bench / "results.json").read_text()) == res


def test_deltas_by_half(hand_bench):
    # default's answered rewards are 1, 0 | 1, 1 against frozen's 0.5 everywhere: no gain in the
    # first half, +50 pp in the second; single-branch trails default by 25 pp on every step.
    res = _build(hand_bench)
    first, second = res["deltas_by_half"]["frozen"]["default"]
    # each half's first and last step, numbered from 0 as in the log, report.md, rizz diff and the plots (they were
    # 1-based positions among the paired steps, [1, 2] here); log_steps, the same numbers, is kept for earlier readers
    assert first["steps"] == first["log_steps"] == [0, 1] and first["delta_pp"] == 0.0 and first["n"] == 2
    assert second == {"delta_pp": 50.0, "ci95_pp": [50.0, 50.0], "n": 2, "steps": [3, 4], "log_steps": [3, 4]}  # step 2 is context-only
    assert [h["delta_pp"] for h in res["deltas_by_half"]["single-branch"]["default"]] == [25.0, 25.0]
    assert set(res["deltas_by_half"]["frozen"]) == {"default", "single-branch"}
    md = (hand_bench / "report.md").read_text()
    # numbered from 0 as rizz diff, inspect and view number steps (answered steps 1-2 and 3-4 of 4)
    assert "| policy vs baseline | first half, steps 0–1 | second half, steps 3–4 |" in md
    assert "| default vs frozen | +0.0 [" in md and "| +50.0 [+50.0, +50.0] |" in md
    assert "| single-branch vs frozen |" in md and "frozen vs single-branch" not in md  # the same pair once


def test_steps_that_changed_count_answers_and_rewards_moved_each_way(hand_bench):
    """A Δ is a balance; the changes table shows what it balances: default's rewards 1, 0, 1, 1
    against frozen's 0.5 are 3 rises and 1 fall (Δ +25 pp), and an answer that differs from the
    baseline's counts as changed whatever its reward."""
    log = hand_bench / "default" / "log.jsonl"
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    recs[1]["answer"]["extracted"] = "B"  # x1: another answer, the same reward (0 vs single-branch's -0.25)
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = _build(hand_bench)
    assert res["changes"]["frozen"]["default"] == {"n": 4, "answers_changed": 1, "up": 3, "down": 1}
    assert res["changes"]["frozen"]["single-branch"] == {"n": 4, "answers_changed": 0, "up": 3, "down": 1}
    assert res["changes"]["single-branch"]["default"] == {"n": 4, "answers_changed": 1, "up": 4, "down": 0}
    md = (hand_bench / "report.md").read_text()
    assert "| default vs frozen | 4 | 1 | 3 | 1 |" in md and "| frozen vs single-branch |" not in md
    assert "other_runs" not in res and "not in this report" not in md
    (hand_bench / "per-answer").mkdir()
    (hand_bench / "per-answer" / "run.json").write_text("{}")  # an earlier command's run in the same folder
    res = _build(hand_bench)
    assert res["other_runs"] == ["per-answer"]
    assert "Also in this folder, not in this report (runs of other bench commands; name them in `-P` to compare): per-answer." \
        in (hand_bench / "report.md").read_text()


def test_deltas_by_half_odd_count_gives_the_second_half_the_extra_step(tmp_path):
    for p, rs in (("default", [1.0, 1.0, 0.0]), ("frozen", [0.0, 0.0, 0.0])):
        _write(tmp_path, p, [_rec(i, f"s{i}", "T", r) for i, r in enumerate(rs)])
    res = build_report(tmp_path, ["frozen", "default"], title="t", command="c")
    first, second = res["deltas_by_half"]["frozen"]["default"]
    assert (first["steps"], first["log_steps"], first["delta_pp"]) == ([0, 0], [0, 0], 100.0)
    assert (second["steps"], second["log_steps"], second["delta_pp"]) == ([1, 2], [1, 2], 50.0)
    assert "| first half, steps 0–0 | second half, steps 1–2 |" in (tmp_path / "report.md").read_text()


def test_deltas_by_half_with_one_paired_step_names_the_empty_half(tmp_path):
    for p, rs in (("default", [1.0]), ("frozen", [0.0])):
        _write(tmp_path, p, [_rec(i, f"s{i}", "T", r) for i, r in enumerate(rs)])
    res = build_report(tmp_path, ["frozen", "default"], title="t", command="c")
    first, second = res["deltas_by_half"]["frozen"]["default"]
    assert first["steps"] is first["log_steps"] is None and second["steps"] == second["log_steps"] == [0, 0]
    assert "| first half, no steps | second half, steps 0–0 |" in (tmp_path / "report.md").read_text()


def test_bootstrap_contains_mean_and_is_deterministic():
    x = np.random.default_rng(7).random(60)
    lo, hi = bootstrap_ci(x, seed=3)
    assert lo < x.mean() < hi and hi - lo < 0.4
    assert bootstrap_ci(x, seed=3) == [lo, hi]
    assert bootstrap_ci(x, seed=4) != [lo, hi]
    assert bootstrap_ci([], seed=0) is None and bootstrap_ci([0.2] * 5) == [0.2, 0.2]
    # a paired bootstrap sees only the per-step differences
    assert paired_delta([0.5, 1.0, 0.5], [0.0, 0.5, 0.0]) == {"delta_pp": 50.0, "ci95_pp": [50.0, 50.0], "n": 3}
    with pytest.raises(ValueError, match="equal lengths"):
        paired_delta([1.0], [1.0, 0.0])


def test_report_deterministic_for_a_seed(hand_bench):
    a, b, c = _build(hand_bench, seed=1), _build(hand_bench, seed=1), _build(hand_bench, seed=2)
    assert a == b
    assert a["results"]["default"]["ci95"][0] <= 0.75 <= a["results"]["default"]["ci95"][1]
    assert a["results"]["default"]["mean_reward"] == c["results"]["default"]["mean_reward"]


def test_step_order_mismatch_names_the_policy(hand_bench):
    p = hand_bench / "single-branch" / "log.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("".join([lines[1], lines[0], *lines[2:]]))
    with pytest.raises(ValueError, match=r"policy 'single-branch'.*step 0 is 'x1' vs 'x0'"):
        _build(hand_bench)
    p.write_text("".join(lines[:3]))
    with pytest.raises(ValueError, match=r"policy 'single-branch'.*3 steps vs 5"):
        _build(hand_bench)


def test_missing_run_is_named(hand_bench):
    (hand_bench / "frozen" / "summary.json").unlink()
    with pytest.raises(FileNotFoundError, match="frozen"):
        _build(hand_bench)
    with pytest.raises(ValueError):
        build_report(hand_bench, [], title="t", command="c")


def test_report_md_and_terminal_table(hand_bench):
    res = _build(hand_bench)
    md = (hand_bench / "report.md").read_text()
    assert md.startswith("# hand bench\n") and "rizz bench s.jsonl --policies a,b" in md
    assert "```\n\nModel: `fake:scripted`\n\n## Side by side" in md  # the resolved model, not the spec typed
    lo, hi = res["results"]["default"]["ci95"]
    dlo, dhi = res["deltas"]["frozen"]["default"]["ci95_pp"]
    r = res["results"]
    ev_d, ev_f = r["default"]["prompt_tokens_evaluated"], r["frozen"]["prompt_tokens_evaluated"]
    assert f"| default | 0.750 [{lo:.3f}, {hi:.3f}] | +25.0 [{dlo:+.1f}, {dhi:+.1f}] | 2.50 | 210 | {ev_d} | 120 | 3/2 | 2.5 | 1 |" in md
    assert f"| frozen | 0.500 [0.500, 0.500] | (baseline) | 1.25 | 50 | {ev_f} | 10 | 1/1 | 2.5 | 0 |" in md
    assert (ev_d, ev_f) == (r["default"]["prompt_tokens_sent"], r["frozen"]["prompt_tokens_sent"]) == (210, 50)  # no cache: all evaluated
    assert "| A | 0.500 (n=2) | 0.500 (n=2) | 0.250 (n=2) |" in md
    assert "| B | 1.000 (n=2, 1 overflowed) | 0.500 (n=2) | 0.750 (n=2) |" in md  # default's step 4 did not fit the budget
    assert "| wall s | overflowed steps |\n" in md and "): default 1 of 5 (B: 1). A larger prompt budget" in md
    assert "token budget was exceeded** by default (1 step)" in md
    for name in PLOTS:
        assert f"]({name})" in md
    table = format_table(res).splitlines()
    assert len(table) == 2 + len(POLICIES) and table[0].startswith("policy") and "Δ vs frozen (pp)" in table[0]
    assert len({len(l) for l in table}) == 1  # fixed-width columns
    assert table[3].split()[:4] == ["frozen", "0.500", "[0.500,", "0.500]"]


def test_no_frozen_means_no_delta_column_values(tmp_path):
    _write(tmp_path, "default", [_rec(0, "a", "T", 1.0), _rec(1, "b", "T", 0.0)])
    res = build_report(tmp_path, ["default"], title="t", command="c")
    assert res["deltas"] == {} and res["deltas_by_half"] == {} and res["results"]["default"]["mean_reward"] == 0.5
    md = (tmp_path / "report.md").read_text()
    assert "| default | 0.500 [" in md and "by half" not in md.split("## How to read")[0]


@pytest.mark.slow
def test_real_pipeline_bench(real_bench):
    res = _build(real_bench, window=5)
    logs = {p: _log(real_bench / p / "log.jsonl") for p in POLICIES}
    for p in POLICIES:
        rewards = [r["verdict"]["reward"] for r in logs[p] if "verdict" in r]
        summary = json.loads((real_bench / p / "summary.json").read_text())
        r = res["results"][p]
        assert r["n_answered"] == len(rewards) == 14
        assert r["mean_reward"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)
        assert r["mean_reward"] == pytest.approx(summary["mean_reward"], abs=1e-6)
        assert r["ci95"][0] <= r["mean_reward"] <= r["ci95"][1]
        assert r["model_calls"]["total"] == summary["model_calls"] and r["branches"] == summary["branches"]
        assert r["prompt_tokens"] == summary["prompt_tokens"] and r["budget_exceeded"] == 0
        sent = [c["prompt_tokens"] for x in logs[p] if x.get("kind", "step") == "step" for c in x["calls"] if c["kind"] == "answer"]
        assert r["max_prompt_tokens"] == max(sent) <= r["budget"]  # the largest prompt as sent, within the budget
        assert {t: v["n"] for t, v in r["per_task"].items()} == {t: v["n"] for t, v in summary["per_task"].items()}
    assert res["results"]["frozen"]["model_calls"]["by_kind"]["judge"] == 0
    assert res["deltas"]["frozen"]["default"]["delta_pp"] == pytest.approx(
        100 * (res["results"]["default"]["mean_reward"] - res["results"]["frozen"]["mean_reward"]), abs=1e-3)
    assert set(res["deltas"]) == {"frozen", "single-branch"}
    for name in PLOTS:
        data = (real_bench / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000, name
    md = (real_bench / "report.md").read_text()
    f = res["results"]["frozen"]
    assert f"| frozen | {f['mean_reward']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}] | (baseline) |" in md
    assert "Warning" not in md


def test_plots_from_hand_bench_are_pngs(hand_bench):
    _build(hand_bench)
    for name in PLOTS:
        data = (hand_bench / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000, name


def test_every_step_plot_numbers_steps_from_0_as_the_log_does(hand_bench, monkeypatch):
    """reward_over_steps.png numbered answered steps from 1 (1, 2, 3, 4) while the other plots,
    the tables and rizz view use the log's step index, from 0."""
    from matplotlib.figure import Figure

    drawn: dict[str, tuple[str, dict[str, list[float]]]] = {}
    save = Figure.savefig

    def record(fig, name, *a, **kw):
        ax = fig.axes[0]
        drawn[Path(name).name] = (ax.get_xlabel(), {str(l.get_label()).split(" (")[0]: list(l.get_xdata()) for l in ax.get_lines()})
        return save(fig, name, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", record)
    _build(hand_bench)
    label, xs = drawn["reward_over_steps.png"]
    assert label == "step (#)" and xs == {p: [0, 1, 3, 4] for p in POLICIES}, drawn  # step 2 is context-only
    assert drawn["prompt_tokens.png"][0] == drawn["branches_over_steps.png"][0] == "step (#)"
    assert drawn["prompt_tokens.png"][1]["default"] == [0, 1, 3, 4] and drawn["branches_over_steps.png"][1]["default"] == [0, 1, 2, 3, 4]
    assert "drawn at each answered step's index in the log (from 0" in (hand_bench / "report.md").read_text()


def test_label_quality_hand_values():
    from rizz.lab.labels import label_quality

    def rec(task, branch):
        return {"task": task, "route": {"branch": branch}, "verdict": {"reward": 0.0}}

    recs = [rec("A", "b0"), rec("A", "b0"), rec("B", "b0"), rec("B", "b1"), rec("A", "b2"), {"task": "A", "route": {"branch": "b9"}}]
    lq = label_quality(recs, {"b0": {"label": "classify/x", "shape": "letter"}})
    assert lq["purity"] == round((2 + 1 + 1) / 5, 4)  # b0: 2 of 3 from A; b1, b2 pure; the unanswered step is left out
    assert lq["fragmentation"] == 2.0  # A in b0 and b2, B in b0 and b1
    assert lq["per_task"] == {"A": {"branches": 2, "top_share": round(2 / 3, 4)}, "B": {"branches": 2, "top_share": 0.5}}
    assert [(b["id"], b["label"], b["traffic"], b["majority_task"]) for b in lq["branches"]] == [
        ("b0", "classify/x", 3, "A"), ("b1", "?", 1, "B"), ("b2", "?", 1, "A")]


def test_wall_seconds_count_the_distillations_made_after_a_steps_clock(tmp_path):
    """A newcomer's demo: default's 'wall s' said 610.7 while its steps took 722 s, because its
    three distillations (8.8 + 64.1 + 38.8 s) run after a step's clock stops and a distill record
    has no wall_s. A cached distillation took no time now."""
    from rizz.engine.run import wall_seconds

    step = _rec(0, IDS[0], TASKS[0], 1.0)  # wall_s 0.5, one answer call of 0.1 s (inside the step's clock)
    distill = {"kind": "distill", "id": IDS[0], "step": 0, "rules": [],
               "calls": [{"kind": "distill", "prompt_tokens": 500, "completion_tokens": 20, "latency_s": 8.8, "cost_usd": None, "cached": False}]}
    again = {**distill, "calls": [{**distill["calls"][0], "latency_s": 64.1, "cached": True}]}
    assert wall_seconds([step]) == 0.5
    assert wall_seconds([step, distill, again]) == 9.3
    _write(tmp_path, "default", [step, distill])
    _write(tmp_path, "frozen", [_rec(0, IDS[0], TASKS[0], 0.0)])
    res = build_report(tmp_path, ["frozen", "default"], title="t", command="c")
    assert res["results"]["default"]["wall_s"] == 9.3 and res["results"]["frozen"]["wall_s"] == 0.5
