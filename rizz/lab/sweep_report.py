"""The ``rizz sweep`` report: every policy's steps pooled over the sweep's cells.

Writes into SWEEP/::

    results.json        per policy: pooled mean reward + bootstrap 95% CI, per-cell means,
                        tokens, branches; paired Δ vs the reference; each grid field's marginal
    report.md           the command, the table, the marginals, the plots, how to read them
    sweep_rewards.png   mean reward of every policy, 95% CI error bars
    sweep_<field>.png   marginal mean reward by value of each grid field (dots: grid points)

Intervals: :func:`rizz.lab.stats.bootstrap_ci` / :func:`~rizz.lab.stats.paired_delta`
(percentile bootstrap, 2000 resamples, seed 0) over the pooled answered steps; a Δ pairs
steps by (cell, step id), since every policy ran every cell's stream in the same order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rizz.extras import extra_needed
from rizz.lab.stats import N_RESAMPLES, bootstrap_ci, paired_delta
from rizz.store.runlog import RunDir, write_json_atomic

__all__ = ["write_sweep_report"]


def _rewards(run_dir: Path) -> dict[str, float]:
    return {r["id"]: float(r["verdict"]["reward"]) for r in RunDir(run_dir).records() if "verdict" in r}


def write_sweep_report(out: Path, spec: Any, policies: Sequence[tuple[str, Any, dict[str, Any]]], cells: Sequence[str], *,
                       command: str = "", seed: int = 0) -> dict[str, Any]:
    """Pool ``out/cells/<cell>/<policy>/`` over ``cells``; write the files above; return results.json.

    Args:
      spec: the :class:`~rizz.lab.sweep.SweepSpec`; ``policies``: ``[(source, Policy, grid fields)]``
        as :func:`rizz.lab.sweep.expand` returns (grid points first, then baselines).
    Raises FileNotFoundError when a run is missing its log.
    """
    out = Path(out)
    names = [p.name for _, p, _ in policies]
    rew = {n: {c: _rewards(out / "cells" / c / n) for c in cells} for n in names}
    summ = {n: {c: json.loads((out / "cells" / c / n / "summary.json").read_text(encoding="utf-8")) for c in cells} for n in names}
    ref = next((p.name for _, p, f in policies if not f), None)  # the first baseline
    results: dict[str, Any] = {}
    for source, pol, fields in policies:
        n = pol.name
        pooled = [v for c in cells for v in rew[n][c].values()]
        results[n] = {
            "source": source, "fields": fields, "n_answered": len(pooled),
            "mean_reward": round(float(np.mean(pooled)), 6) if pooled else 0.0, "ci95": bootstrap_ci(pooled, seed=seed),
            "per_cell": {c: {"n": len(rew[n][c]), "mean_reward": summ[n][c]["mean_reward"], "state_digest": summ[n][c]["state_digest"],
                             "branches": summ[n][c]["branches"]} for c in cells},
            "prompt_tokens": sum(summ[n][c]["prompt_tokens"] for c in cells),
            "model_calls": sum(summ[n][c]["model_calls"] for c in cells),
        }
    deltas: dict[str, Any] = {}
    if ref is not None:
        for n in names:
            if n == ref:
                continue
            ids = [(c, i) for c in cells for i in rew[ref][c] if i in rew[n][c]]
            deltas[n] = paired_delta([rew[n][c][i] for c, i in ids], [rew[ref][c][i] for c, i in ids], seed=seed)
    marginals: dict[str, Any] = {}
    for key, values in spec.grid:
        marginals[key] = []
        for v in values:
            members = [p.name for _, p, f in policies if f and f.get(key) == v]
            pooled = [x for m in members for c in cells for x in rew[m][c].values()]
            marginals[key].append({"value": v, "policies": members, "n": len(pooled),
                                   "mean_reward": round(float(np.mean(pooled)), 6) if pooled else 0.0,
                                   "ci95": bootstrap_ci(pooled, seed=seed)})
    data = {
        "title": f"rizz sweep: {Path(spec.source).name}", "command": command, "spec": spec.source, "base": spec.base,
        "grid": {k: list(v) for k, v in spec.grid}, "streams": [str(s) for s in spec.streams],
        "seeds": [s for s in spec.seeds if s is not None], "cells": list(cells), "policies": names, "reference": ref,
        "bootstrap": {"method": "percentile bootstrap over pooled answered steps; deltas paired by (cell, step id)",
                      "resamples": N_RESAMPLES, "level": 0.95, "seed": seed, "rng": "numpy.random.default_rng"},
        "results": results, "deltas": deltas, "marginals": marginals,
    }
    write_json_atomic(out / "results.json", data)
    _plots(out, data)
    (out / "report.md").write_text(_markdown(data), encoding="utf-8")
    return data


def _ci(ci: list[float] | None, fmt: str) -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if ci else "[–]"


def _table(headers: Sequence[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"] + ["| " + " | ".join(r) + " |" for r in rows]


def format_sweep_table(data: dict[str, Any]) -> list[list[str]]:
    """Rows (header first) of the sweep's main table, for report.md and the terminal."""
    ref = data["reference"]
    rows = [["policy", "mean reward [95% CI]", f"Δ vs {ref} (pp)" if ref else "Δ (pp)", "answered", "model calls", "prompt tokens"]]
    for n in data["policies"]:
        r = data["results"][n]
        d = data["deltas"].get(n)
        delta = "(reference)" if n == ref else f"{d['delta_pp']:+.1f} {_ci(d['ci95_pp'], '+.1f')}" if d else "–"
        rows.append([n, f"{r['mean_reward']:.3f} {_ci(r['ci95'], '.3f')}", delta, str(r["n_answered"]), str(r["model_calls"]),
                     str(r["prompt_tokens"])])
    return rows


def _markdown(data: dict[str, Any]) -> str:
    rows = format_sweep_table(data)
    out = [f"# {data['title']}", "", "Command:", "", "```", data["command"], "```", "",
           f"Base policy `{data['base']}`; cells (stream[.seed]): {', '.join(data['cells'])}.", "",
           "## Policies (pooled over cells)", ""] + _table(rows[0], rows[1:]) + [""]
    for key, ms in data["marginals"].items():
        out += [f"## Marginal: `{key}`", ""] + _table(["value", "mean reward [95% CI]", "answered steps", "grid points"],
                                                     [[str(m["value"]), f"{m['mean_reward']:.3f} {_ci(m['ci95'], '.3f')}", str(m["n"]),
                                                       str(len(m["policies"]))] for m in ms]) + [""]
    cells = data["cells"]
    out += ["## Per cell (mean reward)", ""] + _table(["policy", *cells], [
        [n, *(f"{data['results'][n]['per_cell'][c]['mean_reward']:.3f}" for c in cells)] for n in data["policies"]]) + [""]
    out += ["## Plots", "", "![rewards](sweep_rewards.png)", ""] + [f"![{k}](sweep_{k}.png)" for k in data["marginals"]] + [""]
    b = data["bootstrap"]
    out += ["## How to read this", "",
            f"- Rewards (0–1) pool every answered step of every cell; brackets are {b['level']:.0%} percentile-bootstrap intervals "
            f"({b['resamples']} resamples, seed {b['seed']}) that treat steps as independent (steps of one cell share a memory, so "
            "read them as a lower bound on the uncertainty).",
            "- Δ is paired by (cell, step id) against the reference (the first baseline); an interval excluding 0 is beyond resampling noise.",
            "- A marginal pools all grid points that share a field's value; each cell's own bench report is in `cells/<cell>/report.md`.",
            "- Machine-readable numbers: `results.json`.", ""]
    return "\n".join(out)


def _plots(out: Path, data: dict[str, Any]) -> None:
    with extra_needed("lab", "the sweep plots"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    def fig_ax(width: float) -> tuple[Any, Any]:
        fig = Figure(figsize=(width, 4.5))
        FigureCanvasAgg(fig)
        return fig, fig.subplots()

    names = data["policies"]
    res = data["results"]
    fig, ax = fig_ax(max(6.0, 0.9 * len(names) + 2))
    means = np.array([res[n]["mean_reward"] for n in names])
    err = np.array([[m - res[n]["ci95"][0], res[n]["ci95"][1] - m] if res[n]["ci95"] else [0.0, 0.0] for n, m in zip(names, means)]).T
    ax.bar(np.arange(len(names)), means, yerr=np.clip(err.reshape(2, len(names)), 0, None), capsize=3, color="tab:blue")
    ax.set_xticks(np.arange(len(names)), [n.replace(",", ",\n") for n in names], fontsize=7, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_title("Mean reward per policy, pooled over cells (95% CI)")
    ax.set_ylabel("mean reward (0–1)")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out / "sweep_rewards.png", dpi=110)
    for key, ms in data["marginals"].items():
        fig, ax = fig_ax(6.0)
        xs = np.arange(len(ms))
        m = np.array([x["mean_reward"] for x in ms])
        e = np.array([[v - x["ci95"][0], x["ci95"][1] - v] if x["ci95"] else [0.0, 0.0] for x, v in zip(ms, m)]).T.reshape(2, len(ms))
        ax.errorbar(xs, m, yerr=np.clip(e, 0, None), fmt="o-", capsize=4, color="tab:blue", label="marginal (95% CI)")
        for i, x in enumerate(ms):
            pts = [res[p]["mean_reward"] for p in x["policies"]]
            ax.scatter([i] * len(pts), pts, color="tab:gray", s=12, zorder=3, label="grid points" if i == 0 else None)
        ax.set_xticks(xs, [str(x["value"]) for x in ms])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Mean reward by {key}")
        ax.set_xlabel(key)
        ax.set_ylabel("mean reward (0–1)")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(out / f"sweep_{key}.png", dpi=110)
