"""What τ-bench agents did, counted from a bench's logged transcripts (no model).

    python benchmarks/tau_episode_counts.py runs/tau10b runs/tau10c

For each RUN_DIR of a ``rizz bench`` over τ-bench elements and each of its policies (every
folder holding a ``summary.json``, in name order) one line: episodes passed (reward 1),
model calls per episode (``summary.json``), tool errors, tool calls that ran (a tool result
without an error), of them lookups (names starting ``find_``, ``get_``, ``search_`` or ``list_``,
τ-bench's read-only tools), episodes with a call that ran, prompt tokens sent, and episodes whose
first prompt showed an examples block. Used in results/2026-12-05-tau-opening-request.md, results/2026-12-05-tau-routed-qwen15.md and
results/2026-12-05-tau-procedure-qwen15.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

LOOKUPS = ("find_", "get_", "search_", "list_")


def counts(policy_dir: Path) -> dict[str, float]:
    """The figures of one policy's RUN_DIR (``log.jsonl`` and ``summary.json``)."""
    records = [json.loads(line) for line in (policy_dir / "log.jsonl").open(encoding="utf-8")]
    episodes = [r for r in records if r.get("episode")]
    ran = lookups = with_ran = errors = passed = examples = 0
    for r in episodes:
        ep = r["episode"]
        errors += ep.get("tool_errors", 0)
        ok = [t for t in ep["transcript"] if t.get("role") == "tool" and not t.get("error")]
        ran += len(ok)
        lookups += sum(t.get("name", "").startswith(LOOKUPS) for t in ok)
        with_ran += bool(ok)
        passed += (r.get("verdict") or {}).get("reward", 0) >= 1
        examples += "examples" in ((r.get("prompt") or {}).get("blocks") or ())
    summary = json.loads((policy_dir / "summary.json").read_text(encoding="utf-8"))
    return {"episodes": len(episodes), "passed": passed, "calls_per_episode": summary["calls_per_answered_step"],
            "tool_errors": errors, "ran": ran, "lookups": lookups, "episodes_with_a_call_that_ran": with_ran,
            "prompt_tokens": summary["prompt_tokens"], "examples_shown": examples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="bench RUN_DIRs (each holds one folder per policy)")
    args = ap.parse_args()
    for run in args.runs:
        for folder in sorted(p.parent for p in run.glob("*/summary.json")):
            c = counts(folder)
            print(f"{run.name} {folder.name}: " + ", ".join(f"{k} {v}" for k, v in c.items()))


if __name__ == "__main__":
    main()
