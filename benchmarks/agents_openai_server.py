"""Agent episodes through llama.cpp's OpenAI-compatible server with ``tools`` / ``tool_calls``.

Starts ``llama_cpp.server`` in-process on 127.0.0.1 (:class:`rizz.lab.peers.server.LlamaServer`,
the embedded SmolLM2-135M GGUF, ``chat_format="chatml-function-calling"``, greedy decoding
pinned) and runs ``rizz bench`` with the ``openai:`` backend on it, so every agent step goes
through the API's native tool calling (:class:`rizz.engine.native_agent.NativeToolAgent`). Prints
the bench table and the episodes per category (reward, agent calls, tool errors, prompt tokens).

Usage::

    RIZZ_THREADS=1 python benchmarks/agents_openai_server.py STREAM OUT [--policies frozen,default]
        [--limit N] [--n-ctx 4096] [--port P]

The same as running the server yourself::

    python -m llama_cpp.server --model GGUF --model_alias smollm2 --chat_format chatml-function-calling
    rizz bench STREAM -P frozen,default --model openai:http://127.0.0.1:8000#smollm2 --out OUT

(except that the in-process server pins greedy decoding and resets the KV cache per request,
so reruns are repeatable).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stream")
    ap.add_argument("out")
    ap.add_argument("--policies", default="frozen,default")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--port", type=int, default=None, help="fixed port: the model spec (and so a resume) names it")
    args = ap.parse_args(argv)

    from rizz.adapters.embedder import Embedder
    from rizz.adapters.models.openai_backend import OpenAICompatModel
    from rizz.lab.bench import run_bench
    from rizz.lab.peers.server import MODEL_ALIAS, LlamaServer
    from rizz.lab.report import format_table

    t0 = time.perf_counter()
    with LlamaServer(n_ctx=args.n_ctx, chat_format="chatml-function-calling", port=args.port) as srv:
        model = OpenAICompatModel(srv.url, MODEL_ALIAS, context_window=args.n_ctx)
        results = run_bench(args.stream, [p for p in args.policies.split(",") if p], args.out, model, Embedder(),
                            limit=args.limit, command="python benchmarks/agents_openai_server.py " + " ".join(argv),
                            title="agents through llama.cpp's OpenAI server (tools / tool_calls)", log=lambda m: None)
    print(format_table(results))
    for pol, res in results["results"].items():
        for task, row in sorted((res.get("episodes") or {}).items()):
            print(pol, task, json.dumps(row, sort_keys=True))
    print(f"wall {time.perf_counter() - t0:.0f} s; report: {Path(args.out) / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
