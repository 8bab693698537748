"""The ``rizz bench`` report: several RUN_DIRs of one stream, side by side.

A BENCH_DIR holds one RUN_DIR per policy (``BENCH_DIR/<policy>/log.jsonl`` and
``summary.json``, see :mod:`rizz.engine.run`). :func:`build_report` reads them and writes::

    BENCH_DIR/
      results.json             per-policy numbers, deltas vs baselines (whole stream and by
                               half), how CIs were made
      report.md                title, command, tables, embedded plots, how to read them
      reward_over_steps.png    moving average of reward over answered steps, at their step (from 0)
      prompt_tokens.png        answer-prompt tokens per step, token budget dashed
      branches_over_steps.png  distinct branches spawned so far
      per_task_reward.png      mean reward by task x policy, 95% CI error bars

Uncertainty (:mod:`rizz.lab.stats`): every interval is a percentile bootstrap (``N_RESAMPLES`` = 2000 resamples of
the answered steps with replacement, ``numpy.random.default_rng(seed)``), so the same
inputs and seed give the same numbers. A delta between two policies is a *paired*
bootstrap: the same resampled step ids for both, since every policy saw the same stream in
the same order (checked; a mismatch raises ValueError naming the policy).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rizz.engine.logfold import views
from rizz.engine.run import sent_prompt_tokens, token_totals, wall_seconds
from rizz.extras import extra_needed
from rizz.formats.wording import plural
from rizz.lab.labels import label_markdown, label_quality
from rizz.lab.overflow import overflow_by_task, overflow_tasks_text, refused_by_server
from rizz.lab.peers.report import peer_markdown, peer_results
from rizz.lab.stats import N_RESAMPLES, bootstrap_ci, paired_delta
from rizz.store.runlog import RunDir, write_json_atomic

__all__ = ["BASELINES", "PLOTS", "build_report", "format_table"]

BASELINES = ("frozen", "single-branch")  # deltas are reported against these when benched
PLOTS = ("reward_over_steps.png", "prompt_tokens.png", "branches_over_steps.png", "per_task_reward.png")


def _load(bench_dir: Path, policy: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    root = bench_dir / policy
    for p in (root / "log.jsonl", root / "summary.json"):
        if not p.exists():
            raise FileNotFoundError(f"{p}: missing — policy {policy!r} has no finished run in {bench_dir}")
    return views(list(RunDir(root).records())), json.loads((root / "summary.json").read_text(encoding="utf-8"))


def _skipped_lines(bench_dir: Path, policies: Sequence[str]) -> list[dict[str, Any]]:
    """The stream lines the policies' runs skipped as malformed (``--skip-bad``: each RUN_DIR's
    ``bad_lines.json``; the same stream's, so the same lines), once each, by line number."""
    lines: dict[int, dict[str, Any]] = {}
    for p in policies:
        path = bench_dir / p / "bad_lines.json"
        if path.is_file():
            for b in json.loads(path.read_text(encoding="utf-8")):
                lines.setdefault(int(b["line"]), b)
    return [lines[n] for n in sorted(lines)]


def _answered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "verdict" in r]


def _policy_stats(records: list[dict[str, Any]], summary: dict[str, Any], seed: int) -> dict[str, Any]:
    """The ``results.json`` entry of one policy (rewards in [0, 1], tokens, seconds, USD)."""
    answered = _answered(records)
    rewards = [float(r["verdict"]["reward"]) for r in answered]
    by_task: dict[str, list[float]] = {}
    for r in answered:
        by_task.setdefault(r.get("task") or "-", []).append(float(r["verdict"]["reward"]))
    calls = [c for r in records for c in r.get("calls", [])]
    costs = [c["cost_usd"] for c in calls if c.get("cost_usd") is not None]
    prompts = [r["prompt"] for r in records if "prompt" in r]
    peer = str(summary.get("policy") or "").startswith("peer:")  # a peer's kinds are its own (ACE: answer, reflect, curate)
    kinds = sorted({c["kind"] for c in calls} | (set() if peer else {"judge", "answer", "distill"}))
    over = overflow_by_task(answered)  # steps scored 0 without reaching the model: a task's count only when any
    return {
        "steps": len(records),
        "n_answered": len(answered),
        "mean_reward": round(float(np.mean(rewards)), 6) if rewards else 0.0,
        "ci95": bootstrap_ci(rewards, seed=seed),
        "per_task": {t: {"n": len(v), "mean_reward": round(float(np.mean(v)), 6), "ci95": bootstrap_ci(v, seed=seed),
                         **({"overflow": over[t]} if t in over else {})}
                     for t, v in sorted(by_task.items())},
        "model_calls": {"total": len(calls), "uncached": sum(1 for c in calls if not c.get("cached")),
                        "by_kind": {k: sum(1 for c in calls if c["kind"] == k) for k in kinds}},
        "calls_per_answered_step": round(len(calls) / len(answered), 4) if answered else 0.0,
        **token_totals(calls),
        # the largest answer prompt as sent (chat template and format line included), what the budget bounds;
        # a peer has no compiled prompt: its largest answer call, as the server counted it; its other calls (ACE's reflector) are not answer prompts
        "max_prompt_tokens": max((sent_prompt_tokens(r) for r in records if "prompt" in r),
                                 default=max((int(c["prompt_tokens"]) for c in calls if c["kind"] == "answer"), default=0)),
        "budget": max((int(p["budget"]) for p in prompts), default=None),
        "budget_exceeded": sum(1 for r in records if "prompt" in r and sent_prompt_tokens(r) > r["prompt"]["budget"]),
        "overflow": sum(1 for r in records if r.get("overflow")),
        # of those, the steps whose prompt an OpenAI-compatible server refused as too long (sent; "refused" call)
        **({"overflow_refused": n} if (n := sum(1 for r in records if r.get("overflow") and refused_by_server(r))) else {}),
        "wall_s": wall_seconds(records),  # distillations included
        "branches": dict(summary.get("branches") or {"total": None, "active": None}),
        "cost_usd": round(sum(costs), 6) if costs else None,
        "model": summary.get("model"),
        "policy_file": summary.get("policy"),
        **({"episodes": summary["episodes"]} if summary.get("episodes") else {}),
        "labels": label_quality(records, summary.get("branch_labels")),
    }


def _check_same_stream(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Raise ValueError naming the first policy whose step ids differ from the first's."""
    names = list(runs)
    ref = [r["id"] for r in runs[names[0]]]
    for name in names[1:]:
        ids = [r["id"] for r in runs[name]]
        if ids == ref:
            continue
        if len(ids) != len(ref):
            why = f"{plural(len(ids), 'step')} vs {len(ref)}"
        else:
            i = next(i for i, (a, b) in enumerate(zip(ids, ref)) if a != b)
            why = f"step {i} is {ids[i]!r} vs {ref[i]!r}"
        raise ValueError(f"policy {name!r}: step ids differ from policy {names[0]!r} ({why}); "
                         "a bench compares policies over the same stream in the same order")


#: ``{baseline: {policy: (rewards, baseline_rewards, log step numbers)}}``: :func:`_pairs`.
_Pairs = dict[str, dict[str, tuple[list[float], list[float], list[int]]]]


def _pairs(runs: dict[str, list[dict[str, Any]]]) -> _Pairs:
    """``{baseline: {policy: (rewards, baseline_rewards, steps)}}`` over the steps both answered,
    in stream order, for each benched baseline in BASELINES; ``steps``: those steps' numbers in
    the log (from 0, as ``rizz diff``, ``rizz inspect`` and ``rizz view`` number them)."""
    rew = {p: {r["id"]: float(r["verdict"]["reward"]) for r in _answered(recs)} for p, recs in runs.items()}
    first = next(iter(runs.values()))
    order = [r["id"] for r in first]
    step_of = {r["id"]: int(r["step"]) for r in first}  # the same in every run (_check_same_stream)
    out: _Pairs = {}
    for base in (b for b in BASELINES if b in runs):
        out[base] = {}
        for p in (p for p in runs if p != base):
            ids = [i for i in order if i in rew[p] and i in rew[base]]
            out[base][p] = ([rew[p][i] for i in ids], [rew[base][i] for i in ids], [step_of[i] for i in ids])
    return out


def _changes(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, int]]]:
    """``{baseline: {policy: {"n", "answers_changed", "up", "down"}}}`` over the steps both
    answered: how many extracted answers differ from the baseline's, and on how many steps the
    reward rose or fell. A Δ near zero can hide many changes that cancel (memory that moves
    answers without carrying the task: results/2026-12-03-examples-choice-train.md)."""
    got = {p: {r["id"]: (str((r.get("answer") or {}).get("extracted")), float(r["verdict"]["reward"])) for r in _answered(recs)}
           for p, recs in runs.items()}
    out: dict[str, dict[str, dict[str, int]]] = {}
    for base in (b for b in BASELINES if b in runs):
        out[base] = {}
        for p in (p for p in runs if p != base):
            both = [(got[p][i], got[base][i]) for i in got[p] if i in got[base]]
            out[base][p] = {"n": len(both), "answers_changed": sum(a[0] != b[0] for a, b in both),
                            "up": sum(a[1] > b[1] for a, b in both), "down": sum(a[1] < b[1] for a, b in both)}
    return out


def _deltas(pairs: _Pairs, seed: int) -> dict[str, dict[str, Any]]:
    """``{baseline: {policy: paired_delta}}`` over the whole stream."""
    return {base: {p: paired_delta(a, b, seed=seed) for p, (a, b, _) in d.items()} for base, d in pairs.items()}


def _deltas_by_half(pairs: _Pairs, seed: int) -> dict[str, dict[str, Any]]:
    """``{baseline: {policy: [first, second]}}``: :func:`paired_delta` over the first and the
    second half of the paired answered steps (the first gets the smaller half when odd),
    each with ``"steps": [first, last]``: the half's first and last step, numbered from 0 as the
    log, report.md, the plots, ``rizz diff``, ``rizz inspect`` and ``rizz view`` number steps
    (None for an empty half); ``"log_steps"`` is the same pair, its earlier name.
    Memory grows along a stream, so a gain can show late (results/2026-11-30-trace240.md measured one)."""
    out: dict[str, dict[str, Any]] = {}
    for base, d in pairs.items():
        out[base] = {}
        for p, (a, b, steps) in d.items():
            k = len(a) // 2
            halves = [(lo, hi, [steps[lo], steps[hi - 1]] if hi > lo else None) for lo, hi in ((0, k), (k, len(a)))]
            out[base][p] = [{**paired_delta(a[lo:hi], b[lo:hi], seed=seed), "steps": span, "log_steps": span} for lo, hi, span in halves]
    return out


def build_report(bench_dir: Path, policies: Sequence[str], *, title: str, command: str, window: int = 10, seed: int = 0) -> dict[str, Any]:
    """Read ``bench_dir/<policy>/`` for each policy; write results.json, report.md and PLOTS.

    Args:
      bench_dir: the BENCH_DIR; ``policies``: RUN_DIR names inside it, in table order.
      title, command: shown at the top of report.md (``command`` verbatim).
      window: moving-average window (answered steps) of ``reward_over_steps.png``.
      seed: bootstrap seed (same seed, same intervals).
    Returns:
      The ``results.json`` dict: ``{"title", "command", "policies", "bootstrap", "deltas":
      {baseline: {policy: {"delta_pp", "ci95_pp", "n"}}}, "deltas_by_half": {baseline:
      {policy: [first, second]}} (each also with ``"steps": [first, last]``, from 0, and the
      same as ``"log_steps"``, :func:`_deltas_by_half`), "changes":
      {baseline: {policy: {"n", "answers_changed", "up", "down"}}} (steps, :func:`_changes`),
      "other_runs": [names] (only when the folder holds RUN_DIRs of policies not given),
      "skipped_lines": [{"line", "field", "message"}] (only when the runs skipped malformed stream
      lines, ``--skip-bad``),
      "results": {policy: {...}}}``;
      rewards in [0, 1], deltas in points (x100), tokens, seconds, USD.
    Raises:
      ValueError: no policies, or a policy's step ids differ from the first policy's.
      FileNotFoundError: a policy directory lacks log.jsonl or summary.json.
    """
    bench_dir = Path(bench_dir)
    if not policies:
        raise ValueError("build_report needs at least one policy")
    loaded = {p: _load(bench_dir, p) for p in policies}
    runs = {p: recs for p, (recs, _) in loaded.items()}
    _check_same_stream(runs)
    pairs = _pairs(runs)
    results = {
        "title": title, "command": command, "policies": list(policies),
        "bootstrap": {"method": "percentile bootstrap over answered steps; deltas paired by step id",
                      "resamples": N_RESAMPLES, "level": 0.95, "seed": seed, "rng": "numpy.random.default_rng"},
        "window": window,
        "results": {p: _policy_stats(recs, summ, seed) for p, (recs, summ) in loaded.items()},
        "deltas": _deltas(pairs, seed),
        "deltas_by_half": _deltas_by_half(pairs, seed),
        "changes": _changes(runs),
    }
    others = sorted(d.name for d in bench_dir.iterdir() if d.is_dir() and d.name not in policies and (d / "run.json").exists())
    if others:  # earlier bench commands' runs in the same folder: named, so a reader knows the table is not all of it
        results["other_runs"] = others
    if skipped := _skipped_lines(bench_dir, policies):
        results["skipped_lines"] = skipped
    if any(p.startswith("peer:") for p in policies):
        results["peers"] = peer_results(runs, seed)
    write_json_atomic(bench_dir / "results.json", results)
    _plots(bench_dir, runs, results, window)
    (bench_dir / "report.md").write_text(_markdown(results), encoding="utf-8")
    return results


# -- plots -----------------------------------------------------------------------------------
def _moving_average(x: list[float], window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values (fewer at the start)."""
    c = np.cumsum(np.concatenate([[0.0], np.asarray(x, dtype=np.float64)]))
    i = np.arange(1, len(x) + 1)
    lo = np.maximum(i - max(window, 1), 0)
    return (c[i] - c[lo]) / (i - lo)


def _plots(bench_dir: Path, runs: dict[str, list[dict[str, Any]]], results: dict[str, Any], window: int) -> None:
    with extra_needed("lab", "the bench plots"):
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure  # no pyplot: no global backend or figure state is touched

    def new(width: float = 8.0) -> tuple[Any, Any]:
        fig = Figure(figsize=(width, 4.5))
        FigureCanvasAgg(fig)
        return fig, fig.subplots()

    colors = {p: matplotlib.colormaps["tab10"](i % 10) for i, p in enumerate(runs)}
    styles = {p: ("-", "--", ":", "-.")[i % 4] for i, p in enumerate(runs)}  # overlapping lines stay visible

    def save(fig: Any, ax: Any, name: str, title: str, xlabel: str, ylabel: str) -> None:
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=9)
        fig.tight_layout()
        fig.savefig(bench_dir / name, dpi=110)

    fig, ax = new()
    for p, recs in runs.items():
        answered = _answered(recs)
        rw = [float(r["verdict"]["reward"]) for r in answered]
        if rw:  # at each answered step's index in the log (from 0), the x of the other plots and of rizz view's
            ax.plot([r["step"] for r in answered], _moving_average(rw, window), color=colors[p], ls=styles[p], lw=1.8,
                    label=f"{p} (mean {results['results'][p]['mean_reward']:.3f})")
    ax.set_ylim(-0.02, 1.02)
    save(fig, ax, PLOTS[0], f"Reward over the stream (trailing mean, window {window})",
         "step (#)", f"reward, mean of last {window} answered (0–1)")

    fig, ax = new()
    budgets: set[int] = set()
    for p, recs in runs.items():
        pts = [(r["step"], r["prompt"]["tokens"]) for r in recs if "prompt" in r]
        budgets |= {int(r["prompt"]["budget"]) for r in recs if "prompt" in r}
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, color=colors[p], ls=styles[p], lw=1.2, marker=".", ms=4, label=f"{p} (max {max(ys)})")
    for b in sorted(budgets):
        ax.axhline(b, color="black", ls="--", lw=1.2, label=f"token budget ({b})")
    ax.set_ylim(bottom=0)
    save(fig, ax, PLOTS[1], "Answer prompt size per step", "step (#)", "answer prompt (tokens)")

    fig, ax = new()
    for p, recs in runs.items():
        seen: set[str] = set()
        ys = []
        for r in recs:
            if r.get("route", {}).get("spawned"):
                seen.add(r["route"]["branch"])
            ys.append(len(seen))
        b = results["results"][p]["branches"]
        ax.step([r["step"] for r in recs], ys, where="post", color=colors[p], ls=styles[p], lw=1.8,
                label=f"{p} (final {b.get('total')} total / {b.get('active')} active)")
    ax.set_ylim(bottom=0)
    ax.yaxis.get_major_locator().set_params(integer=True)
    save(fig, ax, PLOTS[2], "Branches spawned so far", "step (#)", "distinct branches spawned (count)")

    tasks = sorted({t for p in runs for t in results["results"][p]["per_task"]})
    fig, ax = new(max(6.0, 0.6 * len(tasks) * len(runs) + 3))
    width = 0.8 / max(1, len(runs))
    for k, p in enumerate(runs):
        pt = results["results"][p]["per_task"]
        xs = np.arange(len(tasks)) + (k - (len(runs) - 1) / 2) * width
        means = [pt[t]["mean_reward"] if t in pt else np.nan for t in tasks]
        err = np.array([[m - pt[t]["ci95"][0], pt[t]["ci95"][1] - m] if t in pt and pt[t]["ci95"] else [0.0, 0.0]
                        for t, m in zip(tasks, means)]).T.reshape(2, len(tasks))
        ax.bar(xs, means, width, yerr=np.clip(err, 0, None), capsize=3, color=colors[p], label=p)
    ax.set_xticks(np.arange(len(tasks)), [f"{t}\n(n={_task_n(results, t)})" for t in tasks])
    ax.set_ylim(0, 1.05)
    save(fig, ax, PLOTS[3], "Mean reward by task (error bars: bootstrap 95% CI)", "task", "mean reward (0–1)")


def _task_n(results: dict[str, Any], task: str) -> int:
    return max((r["per_task"][task]["n"] for r in results["results"].values() if task in r["per_task"]), default=0)


# -- tables ----------------------------------------------------------------------------------
def _task_overflow(r: dict[str, Any]) -> dict[str, int]:
    """``{task: overflowed steps}`` of a policy's results entry (tasks with none left out)."""
    return {t: int(v["overflow"]) for t, v in r["per_task"].items() if v.get("overflow")}


def _over(r: dict[str, Any], task: str) -> dict[str, int]:
    """``{"overflow": k}`` for ``task`` of a policy's results entry when k > 0, else {}."""
    k = _task_overflow(r).get(task)
    return {"overflow": k} if k else {}


def _n(cell: dict[str, Any]) -> str:
    """``n=4``, or ``n=4, 4 overflowed`` when some of the cell's steps did not fit the prompt budget."""
    return f"n={cell['n']}" + (f", {cell['overflow']} overflowed" if cell.get("overflow") else "")


_HEADERS = ("policy", "mean reward [95% CI]", "Δ vs frozen (pp)", "calls/answered step", "prompt tokens",
            "evaluated prompt tokens", "max prompt tokens", "branches total/active", "wall s")


def _fmt_ci(ci: list[float] | None, fmt: str) -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if ci else "[–]"


def _overflowed(results: dict[str, Any]) -> bool:
    """Whether any policy has a step that did not fit the prompt budget (its tables then count them)."""
    return any(results["results"][p].get("overflow") for p in results["policies"])


def _headers(results: dict[str, Any]) -> list[str]:
    """``_HEADERS``, and ``overflowed steps`` when any policy has one."""
    return list(_HEADERS) + (["overflowed steps"] if _overflowed(results) else [])


def _rows(results: dict[str, Any]) -> list[list[str]]:
    """One row of strings per policy, columns as :func:`_headers`."""
    vs = results.get("deltas", {}).get("frozen", {})
    rows = []
    for p in results["policies"]:
        r = results["results"][p]
        if p == "frozen":
            delta = "(baseline)"
        elif p in vs:
            delta = f"{vs[p]['delta_pp']:+.1f} {_fmt_ci(vs[p]['ci95_pp'], '+.1f')}"
        else:
            delta = "–"
        b = r["branches"]
        rows.append([p, f"{r['mean_reward']:.3f} {_fmt_ci(r['ci95'], '.3f')}", delta, f"{r['calls_per_answered_step']:.2f}",
                     f"{r['prompt_tokens']}", f"{r.get('prompt_tokens_evaluated', '–')}", f"{r['max_prompt_tokens']}",
                     "/".join("–" if b.get(k) is None else str(b[k]) for k in ("total", "active")), f"{r['wall_s']:.1f}"]
                    + ([str(r.get("overflow") or 0)] if _overflowed(results) else []))
    return rows


def format_table(results: dict[str, Any]) -> str:
    """Plain-text, fixed-width side-by-side table of a :func:`build_report` result (one
    line per policy, columns as report.md's main table); for the terminal."""
    rows = [_headers(results)] + _rows(results)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(rows[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in rows[1:]])


def _md_table(headers: Sequence[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"] + ["| " + " | ".join(r) + " |" for r in rows]


def _markdown(results: dict[str, Any]) -> str:
    res, pols = results["results"], results["policies"]
    out = [f"# {results['title']}", "", "Command:", "", "```", results["command"], "```", ""]
    models = sorted({str(res[p]["model"]) for p in pols if res.get(p, {}).get("model")})
    if models:  # the resolved model, as summary.json names it ("embedded" alone does not say which)
        out += [("Model: " if len(models) == 1 else "Models: ") + ", ".join(f"`{m}`" for m in models), ""]
    out += ["## Side by side", ""] + _md_table(_headers(results), _rows(results)) + [""]
    over = [p for p in pols if res[p].get("overflow")]
    if over:  # scored 0 without reaching the model: not the model's failure
        by = "; ".join(f"{p} {res[p]['overflow']} of {res[p]['steps']}" + (f" ({overflow_tasks_text(t)})" if (t := _task_overflow(res[p])) else "")
                       + (f", {res[p]['overflow_refused']} of them refused by the model's server as too long for its window"
                          if res[p].get("overflow_refused") else "")
                       for p in over)
        out += [f"**Steps that did not fit the prompt budget** (overflowed: not sent to the model, or refused by its server, scored 0 "
                f"and counted as 0 in every mean): {by}. A larger prompt budget (`--budget`, up to the model's window) may let them run"
                + ("; a larger window on the server, the refused ones" if any(res[p].get("overflow_refused") for p in over) else "")
                + ".", ""]
    if skipped := results.get("skipped_lines"):
        out += ["**Stream lines skipped** (`--skip-bad`: malformed, left out of every policy's run; each RUN_DIR's `bad_lines.json` "
                "lists them): " + "; ".join(f"line {b['line']} ({b['message']})" for b in skipped) + ".", ""]
    if results.get("other_runs"):
        out += ["Also in this folder, not in this report (runs of other bench commands; name them in `-P` to compare): "
                + ", ".join(results["other_runs"]) + ".", ""]
    for base, d in results["deltas"].items():
        if base != "frozen":
            out += [f"Δ vs {base} (pp): " + "; ".join(f"{p} {v['delta_pp']:+.1f} {_fmt_ci(v['ci95_pp'], '+.1f')}" for p, v in d.items()), ""]
    halves = results.get("deltas_by_half", {})
    if any(halves.values()):
        first = next(v for d in halves.values() for v in d.values())
        # the halves' log step numbers (from 0), as rizz diff, inspect and view number steps
        cols = [f"{'first' if i == 0 else 'second'} half, " + (f"steps {h['log_steps'][0]}–{h['log_steps'][1]}" if h.get("log_steps") else "no steps")
                for i, h in enumerate(first)]
        # one row per pair of policies: "frozen vs single-branch" would only negate "single-branch vs frozen"
        rows = [[f"{p} vs {base}", *(f"{h['delta_pp']:+.1f} {_fmt_ci(h['ci95_pp'], '+.1f')}" for h in hs)]
                for base, d in halves.items() for p, hs in d.items()
                if not (p in BASELINES and BASELINES.index(p) < BASELINES.index(base))]
        out += ["## Δ by half of the stream (pp)", ""] + _md_table(["policy vs baseline", *cols], rows) + [""]
    changes = results.get("changes", {})
    if any(changes.values()):
        rows = [[f"{p} vs {base}", str(c["n"]), str(c["answers_changed"]), str(c["up"]), str(c["down"])]
                for base, d in changes.items() for p, c in d.items()
                if not (p in BASELINES and BASELINES.index(p) < BASELINES.index(base))]
        out += ["## Steps that changed", ""] + _md_table(
            ["policy vs baseline", "paired steps", "answers changed", "reward up", "reward down"], rows) + [""]
    bad = [p for p in pols if res[p]["budget_exceeded"]]
    if bad:
        over = ", ".join(f"{p} ({plural(res[p]['budget_exceeded'], 'step')})" for p in bad)
        out += [f"**Warning: the token budget was exceeded** by {over}.", ""]
    if results.get("peers"):
        out += peer_markdown(results["peers"])
    tasks = sorted({t for p in pols for t in res[p]["per_task"]})
    cell = lambda pt, t: f"{pt[t]['mean_reward']:.3f} ({_n(pt[t])})" if t in pt else "–"  # noqa: E731
    out += ["## Per task (mean reward)", ""] + _md_table(["task", *pols], [[t, *(cell(res[p]["per_task"], t) for p in pols)] for t in tasks]) + [""]
    eps = [(t, p, res[p]["episodes"][t]) for t in tasks for p in pols if t in res[p].get("episodes", {})]
    if eps:  # tool-using episodes: per category and policy
        out += ["## Episodes per category", ""] + _md_table(
            ["task", "policy", "reward", "turns/episode", "tool errors", "agent calls/episode", "prompt tokens/episode"],
            [[t, p, f"{e['mean_reward']:.3f} ({_n({**e, **_over(res[p], t)})})", f"{e['turns_per_episode']:.2f}", str(e["tool_errors"]),
              f"{e['model_calls_per_episode']:.2f}", f"{e['prompt_tokens_per_episode']:.0f}"] for t, p, e in eps]) + [""]
    out += label_markdown(res, pols)
    out += ["## Plots", ""] + [f"![{n[:-4].replace('_', ' ')}]({n})" for n in PLOTS] + [""]
    b = results["bootstrap"]
    out += ["## How to read this", "",
            "- *mean reward* is the verifier's reward (0–1) averaged over answered steps (context-only steps excluded); "
            f"the bracket is a {b['level']:.0%} percentile-bootstrap interval ({b['resamples']} resamples, seed {b['seed']}).",
            "- *Δ vs frozen* is the difference in mean reward in percentage points, with a paired bootstrap interval "
            "(the same steps resampled for both policies); an interval that excludes 0 is a difference beyond resampling noise.",
            "- *Δ by half* is the same paired difference over the first and the second half of the answered steps: "
            "memory accumulates along the stream, so a gain can appear late. Its columns give the log's step numbers, "
            "from 0 as `rizz diff`, `rizz inspect` and `rizz view` number steps.",
            "- *Steps that changed*: on how many paired steps the extracted answer differs from the baseline's, and on how many "
            "the reward rose or fell; a Δ near 0 made of many rises and as many falls is an answer-moving change, not a null one.",
            "- *calls/answered step* counts every model call (judge, answer, distill) per answered step; *prompt tokens* is their "
            "total prompt size; *evaluated prompt tokens* the part the model evaluated: not the calls the response cache answered, "
            "nor the tokens a backend read from its own prompt cache (Anthropic, an OpenAI-compatible server's prefix cache) or "
            "reused from its KV cache (the embedded model, a whole batch at a time); *max prompt tokens* is the largest answer prompt as sent "
            "(the compiled prompt with its answer-format line and the chat template), which must stay within the token budget "
            "(for a `peer:` entry, which compiles none: its largest answer call's prompt as the model server counted it).",
            *(["- *overflowed steps*: steps whose input (an agent episode's next prompt: tools, task, transcript) did not fit the "
               "prompt budget; they were not sent to the model (or, with an OpenAI-compatible server, sent and refused by it as "
               "too long for its window: a call marked `\"refused\": true`) and count as reward 0 (`\"overflow\": true` in the log); "
               "the per-task tables say how many of a cell's steps they are."] if over else []),
            "- *branches* is the branch bank's final size (total/active, after merges and prunes); the branch plot counts spawns.",
            f"- The reward plot is a trailing mean over the last {results['window']} answered steps, drawn at each answered step's "
            "index in the log (from 0, as the other plots; context-only steps have no point); early points average fewer steps.",
            "- Machine-readable numbers: `results.json`.", ""]
    return "\n".join(out)
