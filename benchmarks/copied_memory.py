"""How often does the model copy a memory block instead of answering? (issue #10)

Usage::

    python benchmarks/copied_memory.py BENCH_DIR [--task NumGLUE-ds]

For every policy run in BENCH_DIR (each ``BENCH_DIR/<policy>/log.jsonl`` with its stored
prompts), and every answered step (of ``--task`` only, when given), reads the compiled prompt
and the model's raw answer and counts:

* ``mistakes_shown``: prompts with a "Mistakes to avoid:" block;
* ``examples_shown``: prompts with a "Solved examples:" block;
* ``mistakes_without_examples``: prompts with mistakes and no solved example;
* ``copied_header``: raw answers containing a block header ("Mistakes to avoid", "Wrong answer",
  "Solved examples", "Rules that helped");
* ``copied_wrong_answer``: extracted answers equal to one of the prompt's "Wrong answer: X" lines;
* ``copied_example_answer``: wrong extracted answers equal to one of the prompt's solved
  examples' "Answer: X" lines (issue #24: the Qwen 0.5B answered "10", a lone NumGLUE
  example's answer, to two other problems);
* ``reward``: mean reward of those steps.

Prints one table row per policy and a JSON summary on the last line. Reads logs only (no model).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from rizz.engine.logfold import views
from rizz.store.runlog import RunDir

HEADERS = ("Mistakes to avoid", "Wrong answer", "Solved examples", "Rules that helped")
WRONG = re.compile(r"^Wrong answer: (.*)$", re.M)
SOLVED = re.compile(r"^Answer: (.*)$", re.M)


def scan(run: Path, task: str | None) -> dict[str, float]:
    n = mistakes = examples = bare = header = copied = copied_example = 0
    reward = 0.0
    rd = RunDir(run)  # prompt texts: store.sqlite, or prompts/ in a RUN_DIR written before issue #27
    lines = (run / "log.jsonl").read_text(encoding="utf-8").splitlines()
    for rec in views([json.loads(line) for line in lines]):  # any log version (live answer + verdict joined)
        if "verdict" not in rec or (task and rec.get("task") != task):
            continue
        n += 1
        reward += rec["verdict"]["reward"]
        prompt = ""
        if "prompt" in rec:
            prompt = rd.prompt_text(rec["prompt"]["sha256"]) or ""
        has_m, has_e = "Mistakes to avoid:" in prompt, "Solved examples:" in prompt
        mistakes += has_m
        examples += has_e
        bare += has_m and not has_e
        ans = rec.get("answer") or {}
        raw, extracted = ans.get("raw") or "", (ans.get("extracted") or "").strip()
        header += any(h in raw for h in HEADERS)
        copied += bool(extracted) and extracted in {w.strip() for w in WRONG.findall(prompt)}
        solved = prompt.split("Solved examples:", 1)[1].split("\n\n\n", 1)[0] if has_e else ""
        copied_example += (bool(extracted) and rec["verdict"]["reward"] < 1.0
                           and extracted in {a.strip() for a in SOLVED.findall(solved)})
    return {"n": n, "reward": round(reward / n, 4) if n else 0.0, "mistakes_shown": mistakes, "examples_shown": examples,
            "mistakes_without_examples": bare, "copied_header": header, "copied_wrong_answer": copied,
            "copied_example_answer": copied_example}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench_dir", type=Path)
    ap.add_argument("--task", default=None)
    args = ap.parse_args()
    out = {}
    for run in sorted(d for d in args.bench_dir.iterdir() if (d / "log.jsonl").exists()):
        out[run.name] = scan(run, args.task)
    cols = ["n", "reward", "mistakes_shown", "examples_shown", "mistakes_without_examples", "copied_header", "copied_wrong_answer",
            "copied_example_answer"]
    print("| policy | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, row in out.items():
        print(f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |")
    print(json.dumps({"bench": str(args.bench_dir), "task": args.task, "policies": out}))


if __name__ == "__main__":
    main()
