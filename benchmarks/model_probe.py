"""Probe the embedded model: load time, prompt and generation speed, RSS, determinism.

Usage::

    python benchmarks/model_probe.py [--spec embedded] [--repeats 5] [--gen-tokens 64]
                                     [--threads N]

Prints one line per figure and a JSON summary on the last line. Prompt speed is measured
on a raw prompt of about 400 tokens generating 1 token; generation speed on a short chat
prompt generating ``--gen-tokens`` tokens (wall time minus the prompt's share at the
measured prompt speed). RSS is the process's resident set (``/proc/self/status`` VmRSS)
after the runs; peak is ``ru_maxrss``.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from rizz.adapters.models import Message, load_model

_PARAGRAPH = (
    "The Federal Open Market Committee seeks to achieve maximum employment and inflation at "
    "the rate of two percent over the longer run. In support of its goals, the Committee "
    "decided to maintain the target range for the federal funds rate. "
)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="embedded")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="n_threads for GGUF specs")
    args = ap.parse_args()

    rss0 = _rss_mb()
    t0 = time.perf_counter()
    kwargs = {} if args.threads is None else {"n_threads": args.threads}
    model = load_model(args.spec, **kwargs)
    load_s = time.perf_counter() - t0
    print(f"model            {model.name}  (context {model.context_window} tokens)")
    print(f"load             {load_s:.2f} s")

    long_prompt = _PARAGRAPH * 9
    n_prompt = model.count_tokens(long_prompt)
    model.generate([Message("user", long_prompt)], max_tokens=1, rendering="raw")  # warm-up
    t0 = time.perf_counter()
    gen = model.generate([Message("user", long_prompt)], max_tokens=1, rendering="raw")
    prompt_tps = gen.prompt_tokens / (time.perf_counter() - t0)
    print(f"prompt           {prompt_tps:.0f} tok/s  ({n_prompt} tokens)")

    question = [Message("user", "Write a short story about a robot who learns to paint.")]
    gens = []
    for _ in range(args.repeats):
        gens.append(model.generate(question, max_tokens=args.gen_tokens))
    g = gens[0]
    decode_s = [x.latency_s - x.prompt_tokens / prompt_tps for x in gens]
    gen_tps = sorted(x.completion_tokens / s for x, s in zip(gens, decode_s))
    print(f"generate         {gen_tps[len(gen_tps) // 2]:.0f} tok/s median "
          f"({g.completion_tokens} tokens; min {gen_tps[0]:.0f}, max {gen_tps[-1]:.0f})")

    other = [Message("user", "List three fruits.")]
    texts = [x.text for x in gens]
    interleaved = []
    for _ in range(2):
        model.generate(other, max_tokens=16)
        interleaved.append(model.generate(question, max_tokens=args.gen_tokens).text)
    same = len(set(texts)) == 1
    same_interleaved = same and set(interleaved) == {texts[0]}
    print(f"deterministic    {same} ({args.repeats}x same prompt); "
          f"{same_interleaved} (interleaved with another prompt)")
    rss = _rss_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rss              {rss:.0f} MB now, {peak:.0f} MB peak (python+libs before load "
          f"{rss0:.0f} MB)")
    print(json.dumps(dict(
        model=model.name, load_s=round(load_s, 3), prompt_tok_s=round(prompt_tps, 1),
        gen_tok_s=round(gen_tps[len(gen_tps) // 2], 1), rss_mb=round(rss), peak_rss_mb=round(peak),
        deterministic=same, deterministic_interleaved=same_interleaved,
    )))


if __name__ == "__main__":
    main()
