"""RAM and prompt speed of the peers' llama.cpp server with and without every token's logits.

Usage::

    python benchmarks/peer_server_memory.py [--model NAME] [--prompt-tokens 4000] [--prompts 3]

For ``logits_all`` False (rizz's setting) and True (``llama_cpp.server``'s own default), a
fresh child process starts :class:`rizz.lab.peers.server.LlamaServer` on the shipped model
``--model`` (default: the default embedded model), sends ``--prompts`` chat requests of about
``--prompt-tokens`` tokens each (distinct texts built from the words of the shipped demo
stream, so no prompt shares a prefix beyond the chat template's; ``max_tokens`` 16, greedy), and
reports: the child's peak RSS (``ru_maxrss``) and its RSS after the last request, the prompt
tokens per second over all requests, and a hash of the replies, which must be equal for both
settings (the sampled token's logits are computed either way). Needs ``rizz[peers]``; the
model is assembled from its package as ``rizz run`` does. No network.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import resource
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _prompts(n: int, tokens: int) -> list[str]:
    """``n`` distinct texts of about ``tokens`` tokens (≈ 0.75 words a token) from the demo stream's words."""
    words = " ".join(json.loads(l)["input"] for l in (ROOT / "data/trace-mini/test.jsonl").read_text().splitlines()).split()
    size = int(tokens * 0.75)
    return [f"Text {i}: " + " ".join(words[(i * 7919 + j) % len(words)] for j in range(size)) + "\nSummarise it in one line."
            for i in range(n)]


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _child(model: str, logits_all: bool, prompts: list[str], out: mp.Queue) -> None:
    from rizz.adapters.models.shipped import gguf_of_spec
    from rizz.lab.peers.server import MODEL_ALIAS, LlamaServer

    gguf, _ = gguf_of_spec(model)
    with LlamaServer(gguf, logits_all=logits_all) as srv:
        replies, sent, t0 = [], 0, time.perf_counter()
        for p in prompts:
            body = json.dumps({"model": MODEL_ALIAS, "max_tokens": 16, "messages": [{"role": "user", "content": p}]}).encode()
            req = urllib.request.Request(srv.url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=3600) as r:
                reply = json.loads(r.read())
            replies.append(reply["choices"][0]["message"]["content"])
            sent += reply["usage"]["prompt_tokens"]
        wall = time.perf_counter() - t0
        out.put({"logits_all": logits_all, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                 "rss_after_gb": _rss_kb() / 2**20, "prompt_tokens": sent, "prompt_tok_per_s": sent / wall,
                 "replies_sha": hashlib.sha256(json.dumps(replies).encode()).hexdigest()[:16]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="embedded", help="a shipped model spec (embedded[:NAME])")
    ap.add_argument("--prompt-tokens", type=int, default=4000)
    ap.add_argument("--prompts", type=int, default=3)
    a = ap.parse_args()
    prompts = _prompts(a.prompts, a.prompt_tokens)
    ctx = mp.get_context("spawn")
    rows = []
    for logits_all in (False, True):
        q: mp.Queue = ctx.Queue()
        p = ctx.Process(target=_child, args=(a.model, logits_all, prompts, q))
        p.start()
        rows.append(q.get())
        p.join()
    print(f"{'logits_all':>10}  {'peak RSS GB':>11}  {'RSS after GB':>12}  {'prompt tokens':>13}  {'prompt tok/s':>12}  replies")
    for r in rows:
        print(f"{str(r['logits_all']):>10}  {r['peak_rss_gb']:>11.2f}  {r['rss_after_gb']:>12.2f}  {r['prompt_tokens']:>13}  "
              f"{r['prompt_tok_per_s']:>12.1f}  {r['replies_sha']}")
    print("same replies:", rows[0]["replies_sha"] == rows[1]["replies_sha"])


if __name__ == "__main__":
    main()
