"""Seconds per answered step, per policy, of finished bench folders (issue #24 §2).

Usage::

    python benchmarks/step_seconds.py BENCH_DIR [BENCH_DIR ...]

Reads each policy's ``log.jsonl`` (``wall_s``: the step's wall time from answer to fold, model
calls included; a step served from the response cache is skipped, as its time is a lookup) and
prints, per policy, the model, the answered steps timed, the median and mean seconds per step,
the model calls per step and the prompt tokens per call. Load on the machine inflates these
figures: state it beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def rows(bench: Path) -> list[dict]:
    """One row per policy folder of ``bench`` with a log."""
    out = []
    for log in sorted(bench.glob("*/log.jsonl")):
        recs = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        steps = [r for r in recs if r.get("kind") == "step" and not r.get("context_only")]
        fresh = [r for r in steps if r.get("calls") and not any(c.get("cached") for c in r["calls"])]
        calls = [c for r in fresh for c in r["calls"]]
        meta = json.loads((log.parent / "run.json").read_text()) if (log.parent / "run.json").exists() else {}
        walls = [float(r["wall_s"]) for r in fresh if r.get("wall_s") is not None]
        out.append(dict(bench=str(bench), policy=log.parent.name, model=meta.get("model"), steps=len(steps), timed=len(walls),
                        median_s=round(statistics.median(walls), 2) if walls else None,
                        mean_s=round(statistics.fmean(walls), 2) if walls else None,
                        calls_per_step=round(len(calls) / len(fresh), 2) if fresh else None,
                        prompt_tokens_per_call=round(statistics.fmean(c["prompt_tokens"] for c in calls)) if calls else None))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", nargs="+", type=Path)
    args = ap.parse_args()
    table = [r for b in args.bench for r in rows(b)]
    print(f"{'bench':28s} {'policy':14s} {'model':46s} {'timed':>5s} {'median s':>8s} {'mean s':>7s} {'calls':>5s} {'tok/call':>8s}")
    for r in table:
        print(f"{Path(r['bench']).name[:28]:28s} {r['policy'][:14]:14s} {str(r['model'])[:46]:46s} {r['timed']:5d} "
              f"{r['median_s'] if r['median_s'] is not None else '-':>8} {r['mean_s'] if r['mean_s'] is not None else '-':>7} "
              f"{r['calls_per_step'] if r['calls_per_step'] is not None else '-':>5} {r['prompt_tokens_per_call'] or '-':>8}")
    print(json.dumps(table))


if __name__ == "__main__":
    main()
