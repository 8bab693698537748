"""Do the examples a branch can retrieve carry evidence about the answer? No model is called.

Usage::

    python benchmarks/neighbour_labels.py STREAM [--k 4] [--bins 0.5,0.6,0.7,0.8,0.9]

RIZZ retrieves a branch's verified examples by the embedder's cosine (MiniLM, the shipped
``all-MiniLM-L6-v2``). For a letter task the model then reads them as a vote
(results/2026-12-03-examples-choice-train.md): whether that vote is worth more than the model's
own prior depends on whether an input's nearest neighbours share its answer more often than the
task's answers in general do. This reads every element of STREAM in order, with its **gold**
answer (an upper bound: a branch holds only the answers the model got right), and prints:

1. Per task and cosine bin of the nearest earlier element of the same task: how often that
   neighbour's gold answer is the element's gold answer ("nearest"), against how often the
   task's most frequent gold answer so far is ("majority"). "nearest" no higher than
   "majority" in every bin means no choice of examples by similarity, and no similarity
   threshold, gives the vote more than the task's prior.
2. Per pair of tasks that share a task line (the default policy's ``first_line`` label puts them
   in one branch): the share of an element's ``--k`` nearest earlier elements that come from the
   other task, and the share of elements whose nearest other-task element is at or above each
   bin's cosine against those whose nearest same-task element is (what
   ``retrieval.examples_min_similarity`` would keep).

Answers compare after ``strip()`` and, for multi-line references (ScienceQA's answer with its
explanation), on the first line. Needs the ``local`` extra (the embedder).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from rizz.adapters.embedder import Embedder


def _answer(ref: object) -> str:
    return str(ref).strip().split("\n", 1)[0].strip()


def _task_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stream", type=Path)
    ap.add_argument("--k", type=int, default=4, help="examples per prompt (default policy: retrieval.examples_k 4)")
    ap.add_argument("--bins", default="0.5,0.6,0.7,0.8,0.9", help="cosine bin edges")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.stream.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if not r.get("context_only") and isinstance(r.get("input"), str)]
    edges = [-1.0] + [float(x) for x in args.bins.split(",")] + [1.01]
    x = Embedder().embed([r["input"] for r in rows])
    task = [r["metadata"]["task"] for r in rows]
    gold = [_answer(r["reference"]) for r in rows]
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(task):
        by_task[t].append(i)

    print("1. nearest earlier same-task neighbour's gold = the element's gold, by its cosine")
    print(f"{'task':<14} {'cosine':<11} {'n':>4} {'nearest':>8} {'majority':>9}")
    for t, idx in by_task.items():
        cells: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
        for pos in range(1, len(idx)):
            k = idx[pos]
            sims = x[idx[:pos]] @ x[k]
            j = int(np.argmax(sims))
            b = int(np.searchsorted(edges, float(sims[j]), side="right")) - 1
            majority = Counter(gold[i] for i in idx[:pos]).most_common(1)[0][0]
            c = cells[b]
            c[0] += 1
            c[1] += gold[idx[j]] == gold[k]
            c[2] += majority == gold[k]
        for b in sorted(cells):
            n, near, maj = cells[b]
            print(f"{t:<14} [{max(edges[b], 0):.1f}, {min(edges[b + 1], 1):.1f}) {n:>4} {near / n:>8.2f} {maj / n:>9.2f}")

    lines: dict[str, set[str]] = defaultdict(set)
    for r, t in zip(rows, task, strict=True):
        lines[_task_line(r["input"])].add(t)
    shared = [sorted(ts) for ts in lines.values() if len(ts) > 1]
    if not shared:
        print("\n2. no two tasks share a task line")
        return
    print(f"\n2. tasks sharing a task line: top-{args.k} earlier neighbours from the other task(s), and nearest cosines")
    for group in shared:
        members = [i for i, t in enumerate(task) if t in group]
        for t in group:
            other_share, best_same, best_other = [], [], []
            for pos, k in enumerate(members):
                if task[k] != t or pos < args.k:
                    continue
                earlier = members[:pos]
                sims = x[earlier] @ x[k]
                top = np.argsort(-sims)[: args.k]
                other_share.append(np.mean([task[earlier[j]] != t for j in top]))
                same = [s for s, j in zip(sims, earlier, strict=True) if task[j] == t]
                other = [s for s, j in zip(sims, earlier, strict=True) if task[j] != t]
                if same and other:
                    best_same.append(max(same))
                    best_other.append(max(other))
            s, o = np.array(best_same), np.array(best_other)
            print(f"{t:<14} n={len(other_share)} top-{args.k} from the other task {np.mean(other_share):.2f}; "
                  f"nearest same-task cosine median {np.median(s):.2f}, nearest other-task {np.median(o):.2f}")
            for e in edges[1:-1]:
                print(f"{'':<14} cosine >= {e:.1f}: other-task nearest {np.mean(o >= e):.2f}, same-task nearest {np.mean(s >= e):.2f}")


if __name__ == "__main__":
    main()
