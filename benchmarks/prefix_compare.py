"""Compare runs of one stream over the steps all of them have finished (issue #10, results §11).

Usage::

    python benchmarks/prefix_compare.py NAME=RUN_DIR [NAME=RUN_DIR ...]

Runs may be unfinished and may live in different bench folders (they must share the stream
order). Over the common prefix of answered steps: mean reward with a bootstrap interval, calls
per answered step by kind, the largest compiled prompt and prompts over the budget, label
quality (:mod:`rizz.lab.labels`; labels from refolding each log, so unfinished runs work),
the blocks evidence withholds at the end of the run (evidence policies), per-task means, and the
paired Δ (:func:`rizz.lab.stats.paired_delta`) against ``frozen`` and ``single-branch`` for
all tasks and for the letter tasks (C-STANCE, FOMC, ScienceQA) alone. Reads logs only.
"""
import json
import sys
from pathlib import Path

from rizz.engine.logfold import views
from rizz.lab.diff import inspect_run
from rizz.lab.labels import label_quality
from rizz.lab.stats import bootstrap_ci, paired_delta

runs = {a.split("=")[0]: Path(a.split("=")[1]) for a in sys.argv[1:]}
# one record per answered element, any log version (distill / live verdict records joined by views)
recs = {p: views([json.loads(l) for l in (d / "log.jsonl").read_text().splitlines()]) for p, d in runs.items()}
n = min(len(r) for r in recs.values())
ids = [r["id"] for r in recs[next(iter(recs))][:n]]
for p, r in recs.items():
    assert [x["id"] for x in r[:n]] == ids, p
    recs[p] = r[:n]
print(f"common prefix: {n} steps")
rew = {p: [x["verdict"]["reward"] for x in r] for p, r in recs.items()}
for p, r in recs.items():
    calls = [c for x in r for c in x["calls"]]
    kinds = {k: sum(1 for c in calls if c["kind"] == k) for k in ("judge", "answer", "distill")}
    mx = max((x["prompt"]["tokens"] for x in r if "prompt" in x), default=0)
    over = sum(1 for x in r if "prompt" in x and x["prompt"]["tokens"] > x["prompt"]["budget"])
    ci = bootstrap_ci(rew[p])
    rows = inspect_run(runs[p])
    bl = {row["branch"]: {"label": row["label"], "shape": row["shape"]} for row in rows}
    lq = label_quality(r, bl)
    print(f"{p}: mean {sum(rew[p])/n:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] calls/step {len(calls)/n:.2f} {kinds} max_prompt {mx} over {over} "
          f"branches {len(rows)} purity {lq['purity']} frag {lq['fragmentation']} "
          f"per_task {json.dumps({t: v['branches'] for t, v in lq['per_task'].items()})}")
    for b in lq["branches"]:
        print(f"    {b['id']} {b['label']} {b['shape']} traffic {b['traffic']} {b['majority_task']} {b['purity']}")
    if any("withheld" in row for row in rows):
        print("    withheld:", {row["branch"]: row["withheld"] for row in rows})
tasks = sorted({x["task"] for x in recs[next(iter(recs))]})
print("per task:", " | ".join(tasks))
for p, r in recs.items():
    cells = []
    for t in tasks:
        v = [x["verdict"]["reward"] for x in r if x["task"] == t]
        cells.append(f"{sum(v)/len(v):.3f} (n={len(v)})")
    print(f"  {p}: " + " | ".join(cells))
pols = list(recs)
letters = {"C-STANCE", "FOMC", "ScienceQA"}
for base in ("frozen", "single-branch"):
    if base not in rew:
        continue
    for p in pols:
        if p == base:
            continue
        d = paired_delta(rew[p], rew[base])
        li = [i for i, x in enumerate(recs[p]) if x["task"] in letters]
        dl = paired_delta([rew[p][i] for i in li], [rew[base][i] for i in li])
        print(f"Δ {p} − {base}: {d['delta_pp']:+.1f} {d['ci95_pp']}  letters only: {dl['delta_pp']:+.1f} {dl['ci95_pp']} (n={len(li)})")
