"""What rizz adds around the frozen model, policy by policy: one table (issue #27 §5).

Usage::

    python benchmarks/cost.py STREAM --model SPEC [--limit N] [--policies frozen,default]
        [--out DIR] [--budget TOKENS] [--rendering raw|chat] [--durability disk|os]

    python benchmarks/cost.py data/trace-mini/test.jsonl --model embedded --limit 3 --budget 2048

Each policy runs ``STREAM`` as ``rizz run`` does (:func:`rizz.engine.run.run_stream`) into
``OUT/<policy>/``, with its own response cache (so every call is a real call; a run already in
``OUT`` is resumed, and its finished steps are not run again). ``--model stub`` uses
``benchmarks/stub_model.py`` (answers from a hash of the prompt, no model) and a hash
embedder: it measures the shell alone, and says so. ``--model stub-verified`` answers every
input with its reference (every answer verifies: the regime where the most is written and
distilled) with the real MiniLM embedder: it measures the calls rizz adds around a model that
is always right. Any other SPEC is a real model
(``embedded`` = the shipped Qwen2.5-Coder 1.5B, ~5-15 s per step on 2 cores) with the
bundled MiniLM embedder.

Columns, per policy (from the run's ``summary.json`` and log unless said):

- ``calls``: model calls / those the response cache did not answer;
- ``sent tok`` / ``eval tok``: prompt tokens sent to the backend and, of those, evaluated by
  it (``prompt_tokens_sent`` / ``prompt_tokens_evaluated``: a backend's prompt or KV cache
  evaluates fewer; with the embedded model's default reset they are equal);
- ``s/step``: wall seconds per element (``wall_s`` / steps: embedding, judge, compile, model,
  verify, log; the model dominates with a real one);
- ``files``: files in the RUN_DIR once the run has ended (the store keeps it to a few; a
  RUN_DIR written before issue #27 had about two per step);
- ``replay st/s``: :func:`rizz.engine.run.replay` of the RUN_DIR (no model), elements per second;
- ``resume s``: :func:`rizz.engine.logfold.restore_fold` as a resume after ``kill -9`` runs it
  (read the log, load the newest snapshot, refold the records after it), in this process;
  loading the model and the embedder, which a resumed ``rizz run`` also does, is not included.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rizz.engine.logfold import restore_fold  # noqa: E402
from rizz.engine.run import replay, run_stream  # noqa: E402
from rizz.formats.policy_file import load_policy  # noqa: E402
from rizz.store.runlog import RunDir  # noqa: E402


class HashEmbedder:
    """``--model stub``: 384-d unit vectors seeded by a text's sha256 (no torch)."""

    name = "stub:hash-embedder"
    dim = 384

    def embed(self, texts):  # noqa: ANN001, ANN201
        import hashlib

        import numpy as np

        out = []
        for t in texts:
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
            v = rng.standard_normal(self.dim).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out) if out else np.zeros((0, self.dim), dtype=np.float32)


def backend(spec: str, cache: Path, stream: Path):  # noqa: ANN201
    """(model, embedder, note) for ``spec`` with its response cache at ``cache`` (``stream``: for ``stub-verified``)."""
    if spec == "stub":
        from stub_model import cached_stub

        return cached_stub(str(cache)), HashEmbedder(), "stub model and hash embedder: the shell alone, no model"
    if spec == "stub-verified":
        from stub_model import VerifiedStub

        from rizz.adapters.embedder import Embedder
        from rizz.adapters.models import CachedModel, ResponseCache
        from rizz.formats.streams import read_stream

        refs = {el.input: (el.references or ("",))[0] for el in read_stream(stream).elements}
        return (CachedModel(VerifiedStub(refs), ResponseCache(str(cache))), Embedder(),
                "stub that answers every input with its reference (every answer verifies) and the MiniLM embedder")
    from rizz.adapters.embedder import Embedder
    from rizz.adapters.models import load_model

    return load_model(spec, cache=cache), Embedder(), "real model"


def files_in(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


def measure(stream: Path, policy: str, out: Path, spec: str, args: argparse.Namespace) -> dict:
    """Run (or resume) one policy and measure its RUN_DIR."""
    pol = load_policy(policy)
    out.mkdir(parents=True, exist_ok=True)
    model, embedder, note = backend(spec, out / "responses.sqlite", stream)
    t0 = time.perf_counter()
    summary = run_stream(stream, pol, policy, out, model, embedder, limit=args.limit, rendering=args.rendering, budget=args.budget,
                         durability=args.durability, log=lambda m: print(f"  [{policy}] {m}", file=sys.stderr))
    run_s = time.perf_counter() - t0
    cache = getattr(model, "cache", None)
    if cache is not None:
        cache.close()  # the run is over: its WAL files go (as when rizz run exits)
    files = files_in(out)
    t0 = time.perf_counter()
    rep = replay(out, write_summary=False)
    replay_s = time.perf_counter() - t0
    assert rep["state_digest"] == summary["state_digest"], (rep["state_digest"], summary["state_digest"])
    rd = RunDir(out)
    t0 = time.perf_counter()
    fold, records = restore_fold(rd, pol)
    resume_s = time.perf_counter() - t0
    newest = max([n for n in rd.snapshot_steps() if n <= len(records)], default=0)
    steps = max(1, summary["steps"])
    return {"policy": pol.name, "note": note, "model": summary["model"], "steps": summary["steps"],
            "calls": summary["model_calls"], "uncached": summary["model_calls_uncached"],
            "sent": summary["prompt_tokens_sent"], "evaluated": summary["prompt_tokens_evaluated"],
            "s_per_step": summary["wall_s"] / steps, "this_run_s": run_s, "files": files,
            "replay_steps_s": summary["steps"] / replay_s if replay_s > 0 else float("inf"),
            "resume_s": resume_s, "refolded": len(records) - newest, "digest": summary["state_digest"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stream", type=Path)
    ap.add_argument("--model", required=True, help="a model spec (as rizz run --model), or 'stub' / 'stub-verified'")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--policies", default="frozen,default")
    ap.add_argument("--out", type=Path, default=None, help="default: a new folder under /tmp")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--rendering", default=None)
    ap.add_argument("--durability", default="disk", choices=("disk", "os"))
    args = ap.parse_args(argv)
    if not args.stream.is_file():
        ap.error(f"stream file not found: {args.stream}")
    import tempfile

    base = args.out or Path(tempfile.mkdtemp(prefix="rizz-cost-"))
    rows = [measure(args.stream, p, base / p, args.model, args) for p in args.policies.split(",")]
    print(f"{args.stream} --model {args.model}" + (f" --limit {args.limit}" if args.limit else "") +
          (f" --budget {args.budget}" if args.budget else "") + f"  ({rows[0]['note']}: {rows[0]['model']}; "
          f"load average {os.getloadavg()[0]:.2f}; RUN_DIRs in {base})")
    head = f"{'policy':<14} {'steps':>5} {'calls':>11} {'sent tok':>9} {'eval tok':>9} {'s/step':>7} {'files':>5} {'replay st/s':>11} {'resume s':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['policy']:<14} {r['steps']:>5} {str(r['calls']) + '/' + str(r['uncached']):>11} {r['sent']:>9} {r['evaluated']:>9} "
              f"{r['s_per_step']:>7.2f} {r['files']:>5} {r['replay_steps_s']:>11.0f} {r['resume_s']:>8.2f}")
    print("calls: all / not answered by the response cache. eval tok: prompt tokens the backend evaluated (fewer than sent "
          "when it read them from a prompt or KV cache). resume s: log read + newest snapshot + refold of the records after it "
          f"({', '.join(str(r['refolded']) for r in rows)} records here), no model load.")
    (base / "cost.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
