"""Label quality of a run (results/2026-12-01-label-quality-train.md): how well the branches match the benchmark's tasks.

``metadata.task`` is never used for routing; here, after the run, it measures the routing:

* **purity** of a branch: the share of its answered traffic that comes from its majority
  task; the run's purity is the traffic-weighted mean (Σ_b max_task n_bt / Σ_b n_b), 1.0 when
  every branch serves one task.
* **fragmentation** of a task: the number of branches that served it; the run's is the mean
  over tasks, 1.0 when every task stayed in one branch.
* per branch: its label (``function/application``), output shape, answered traffic, its
  majority task and that task's share.

Branch ids are those of the step that routed the input (a later merge is not folded back).
Labels and shapes come from ``summary.json``'s ``branch_labels`` (older runs' summaries lack it);
runs written before show ``?``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["label_quality", "label_markdown"]


def label_quality(records: Sequence[Mapping[str, Any]], branch_labels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"purity", "fragmentation", "per_task": {task: {"branches", "top_share"}}, "branches":
    [{"id", "label", "shape", "traffic", "majority_task", "purity"}]}`` over answered steps."""
    info = branch_labels or {}
    by_branch: dict[str, Counter] = {}
    by_task: dict[str, Counter] = {}
    for r in records:
        if "verdict" not in r or "route" not in r:
            continue
        b, t = r["route"]["branch"], r.get("task") or "-"
        by_branch.setdefault(b, Counter())[t] += 1
        by_task.setdefault(t, Counter())[b] += 1
    total = sum(sum(c.values()) for c in by_branch.values())
    branches = []
    for b in sorted(by_branch, key=lambda i: (len(i), i)):
        c = by_branch[b]
        task, n = max(c.items(), key=lambda kv: (kv[1], kv[0]))
        meta = info.get(b) or {}
        branches.append({"id": b, "label": meta.get("label", "?"), "shape": meta.get("shape"), "traffic": sum(c.values()),
                         "majority_task": task, "purity": round(n / sum(c.values()), 4)})
    per_task = {t: {"branches": len(c), "top_share": round(max(c.values()) / sum(c.values()), 4)} for t, c in sorted(by_task.items())}
    return {
        "purity": round(sum(max(c.values()) for c in by_branch.values()) / total, 4) if total else None,
        "fragmentation": round(sum(len(c) for c in by_task.values()) / len(by_task), 4) if by_task else None,
        "per_task": per_task,
        "branches": branches,
    }


def label_markdown(results: Mapping[str, Any], policies: Sequence[str]) -> list[str]:
    """The report.md section "Label quality" (one summary table, then each policy's branches)."""
    rows = []
    for p in policies:
        lq = results[p].get("labels")
        if not lq or lq.get("purity") is None:  # a peer entry, or a run with no answered branch traffic
            continue
        frag = ", ".join(f"{t} {v['branches']}" for t, v in lq["per_task"].items())
        rows.append(f"| {p} | {lq['purity']:.3f} | {lq['fragmentation']:.2f} | {frag} |")
    if not rows:
        return []
    out = ["## Label quality", "",
           "purity: share of a branch's answered traffic from its majority task (traffic-weighted); "
           "fragmentation: branches per task (mean). Tasks are used here only, never for routing.", "",
           "| policy | purity | fragmentation | branches per task |", "|---|---|---|---|", *rows, ""]
    for p in policies:
        lq = results[p].get("labels")
        if not lq or len(lq["branches"]) <= 1:
            continue
        out += [f"Branches of `{p}`:", "", "| branch | label | shape | traffic | majority task (share) |", "|---|---|---|---|---|"]
        out += [f"| {b['id']} | {b['label']} | {b['shape'] or '–'} | {b['traffic']} | {b['majority_task']} ({b['purity']:.2f}) |"
                for b in lq["branches"]]
        out.append("")
    return out
