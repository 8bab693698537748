"""How much does the embedded model's own preference separate the options of a letter question?

Usage::

    python benchmarks/letter_prior.py [--stream data/trace-mini/train.jsonl] [--threads 1]

For every ``letter``-shaped element of the stream (TRACE train: FOMC, C-STANCE, ScienceQA),
renders the frozen prompt exactly as ``rizz`` does (``raw`` rendering, no memory), evaluates
it once, and reads the next-token logits of the option letters (`` A``, `` B``, … — the
letters the question offers). Prints, per task: n, the gold-letter counts, the argmax-letter
counts and the accuracy of that argmax (the best a constrained decoder could do with the
model's own preference), then a JSON summary on the last line.

This is a diagnostic of the model, not of rizz: if the argmax is one letter for every
question, memory that only stores verified answers cannot show the model any other letter.
"""

from __future__ import annotations

import argparse
import collections
import json
import re

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stream", default="data/trace-mini/train.jsonl")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import llama_cpp

    from rizz.adapters.models.base import render_raw
    from rizz.adapters.models.embedded import default_gguf_path
    from rizz.core.compiler import PromptItem, compile_prompt
    from rizz.engine.render import render
    from rizz.formats.policy_file import load_policy

    frozen = load_policy("frozen").compiler

    llm = llama_cpp.Llama(model_path=str(default_gguf_path()), n_ctx=2048, n_threads=args.threads,
                          n_threads_batch=args.threads, logits_all=True, verbose=False)
    rows = [json.loads(line) for line in open(args.stream, encoding="utf-8")]
    rows = [r for r in rows if r["metadata"].get("shape") == "letter"]
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in rows:
        task, x = r["metadata"]["task"], r["input"]
        gold = r["reference"].strip()[:1]
        offered = sorted(set(re.findall(r"(?<![A-Za-z])([A-E])[.．]", x))) or ["A", "B", "C"]
        compiled = compile_prompt({"input": [PromptItem("input", x, 0.0)]}, frozen, lambda t: len(t.split()))
        prompt = render_raw(render(compiled, "letter", "raw"))  # exactly the frozen policy's prompt
        llm.reset()
        toks = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=False)
        llm.eval(toks)
        logits = np.asarray(llm.scores[llm.n_tokens - 1])
        score = {L: float(logits[llm.tokenize((" " + L).encode(), add_bos=False, special=False)[0]]) for L in offered}
        pred = max(score, key=score.get)
        c = per[task]
        c["n"] += 1
        c[f"gold_{gold}"] += 1
        c[f"argmax_{pred}"] += 1
        c["correct"] += int(pred == gold)
    summary = {}
    for task, c in sorted(per.items()):
        gold = {k[5:]: v for k, v in sorted(c.items()) if k.startswith("gold_")}
        arg = {k[7:]: v for k, v in sorted(c.items()) if k.startswith("argmax_")}
        acc = c["correct"] / c["n"]
        print(f"{task:10s} n={c['n']:3d} gold={gold} argmax={arg} argmax accuracy={acc:.3f}")
        summary[task] = {"n": c["n"], "gold": gold, "argmax": arg, "argmax_accuracy": round(acc, 4)}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
