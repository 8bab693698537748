"""Per-element cost of the shell (a live Session) beside the core step, model and embedder stubbed.

Usage::

    python benchmarks/shell_overhead.py [--sizes 1000,10000,100000] [--repeats 200] [--seed 0]
        [--blas-threads N] [--dir DIR]

For each size N the state of ``benchmarks/core_overhead.py`` is built (N verified episodes over
24 branches, rules, anti-patterns, scoped context; folded from the core's own events). Then, on
fresh inputs from the same clusters, three things are timed per element, interleaved in chunks
of 25 on the same kind of input (each advancing its own copy of the state):

1. core: ``plan`` → ``compile_prompt`` → ``step`` (exactly the timed path of core_overhead.py);
2. shell, in memory: ``Session.answer(element)`` then ``Session.fold(id, Verdict(1.0))``: element
   checks, embedding (a dict lookup of precomputed vectors), judge (a stub reply), route round,
   retrieval, compile, render, model (a stub reply), extraction, the typed log record, the
   feedback round, the distillation check (and, every ``distill_every`` successes of a branch,
   the stub distillation and its record), the pending-answer bookkeeping;
3. shell, durable: the same with a RUN_DIR: the embedding store's files and the log records
   written and fsynced before each call returns (two records per element, more when a
   distillation is due; "records/el", "files/el" count them). No snapshots while timing.
   "fsync ms" is the disk's floor: the median time to append and fsync one 1 KiB line there.

The model and embedder stubs cost microseconds (a fixed reply; a dict lookup), so columns 2 and
3 are the shell's own overhead. Token counting is ``len(text) // 4`` everywhere, as in
core_overhead.py. Wall-time medians (``time.perf_counter``); the first 5 elements are warm-up.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import attrs
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_overhead import SESSIONS, build_events, count_tokens, make_layout, make_world, members  # noqa: E402

from rizz.core import Policy, StepInput, Verdict, compile_prompt, prompt_blocks, rizz  # noqa: E402
from rizz.core.apply import fold  # noqa: E402
from rizz.shell.logfold import LogFold  # noqa: E402
from rizz.shell.models import Generation  # noqa: E402
from rizz.shell.runlog import RunDir  # noqa: E402
from rizz.shell.session import Session  # noqa: E402

CHUNK = 25


class StubModel:
    """Replies at once: the judge's label for the input's application, else a fixed answer."""

    name = "stub:bench"
    context_window = 1 << 20
    temperature = 0.0

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def generate(self, messages, *, max_tokens, stop=(), rendering="chat") -> Generation:
        text = messages[-1].content
        if '"function"' in text:
            app = next((a for a in self.labels if a in text), "unknown")
            out = f'{{"function": "{self.labels.get(app, "unknown")}", "application": "{app}"}}'
        elif any("IF-THEN" in m.content for m in messages):
            out = "IF the question names a label THEN answer with that label"
        else:
            out = "bench answer"
        return Generation(out, 10, 2, 0.0, None, self.name, "stop")


class StubEmbedder:
    """Precomputed vectors by text (a dict lookup); unseen texts get a hash-seeded unit vector."""

    name = "stub:vectors"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.known: dict[str, np.ndarray] = {}

    def embed(self, texts):
        out = []
        for t in texts:
            v = self.known.get(t)
            if v is None:
                rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
                v = rng.standard_normal(self.dim).astype(np.float32)
                v /= np.linalg.norm(v)
            out.append(v)
        return np.stack(out)


def _fsync_ms(root: Path, n: int = 50) -> float:
    """Median wall time of appending one 1 KiB line and fsyncing it, in ``root`` (the disk's floor)."""
    times = []
    with open(root / "fsync-probe", "ab") as f:
        for _ in range(n):
            t0 = time.perf_counter()
            f.write(b"x" * 1023 + b"\n")
            f.flush()
            os.fsync(f.fileno())
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--branches", type=int, default=24)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=None, help="where the durable session writes (default: a temp dir)")
    ap.add_argument("--blas-threads", type=int, default=None, help="limit BLAS threads (threadpoolctl) for the whole run")
    args = ap.parse_args()
    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)
    policy = Policy()
    r = rizz(policy)
    print(f"python {platform.python_version()}, numpy {np.__version__}, cpus {len(os.sched_getaffinity(0))}, "
          f"load average {os.getloadavg()[0]:.2f}; repeats {args.repeats}, branches {args.branches}, dim {args.dim}")
    head = (f"{'memories':>9} {'core ms':>8} {'shell mem ms':>12} {'ratio':>6} {'shell disk ms':>13} {'ratio':>6} "
            f"{'records/el':>10} {'files/el':>8} {'fsync ms':>8}")
    print(head)
    print("-" * len(head))
    for n in [int(s) for s in args.sizes.split(",")]:
        rng = np.random.default_rng([args.seed, n])
        world = make_world(args.branches, args.dim, 1, rng)
        lay = make_layout(world, n, rng)
        state0 = fold(r.init(), build_events(world, lay))
        del lay
        gc.collect()
        total = args.repeats + 5
        where = rng.choice(len(world.labels), size=total, p=world.weights).tolist()
        vecs = members(world, np.asarray(where), rng)
        labels = {lab.application: lab.function for lab in world.labels}
        emb = StubEmbedder(args.dim)
        for b, lab in enumerate(world.labels):
            emb.known[lab.application.replace("-", " ")] = world.label_vecs[b]
        elements = []
        for i in range(total):
            lab = world.labels[where[i]]
            el = {"id": f"bench-{i}", "input": f"{lab.application} bench question {i}: what is the answer?",
                  "instruction": "Answer with the label only.",
                  "metadata": {"shape": world.shapes[where[i]], "scope": f"session-{i % SESSIONS}" if i % 2 else None}}
            emb.known[f"{el['instruction']}\n\n{el['input']}"] = vecs[i]
            elements.append(el)
        model = StubModel(labels)
        mem = Session(policy, model, emb, state=state0, step=state0.steps, rendering="chat")
        tmp = Path(args.dir or tempfile.mkdtemp(prefix="rizz-shell-bench-")) / f"n{n}"
        rd = RunDir(tmp).__enter__()
        disk = Session(policy, model, emb, rendering="chat", run_dir=rd, embed_cache=rd.embeddings,
                       fold=LogFold(policy, rd.embeddings, state=state0, answers=state0.steps))
        core_state = state0
        t_core, t_mem, t_disk = [], [], []
        verdict = Verdict(1.0, "exact_match")
        for lo in range(0, total, CHUNK):
            chunk = range(lo, min(lo + CHUNK, total))
            for i in chunk:  # 1. the core's step path (as core_overhead.py)
                b = where[i]
                lab = world.labels[b]
                el = elements[i]
                x = StepInput(step=core_state.steps, item_id=el["id"], text=el["input"], embedding=vecs[i].tobytes(),
                              instruction=el["instruction"], scope=el["metadata"]["scope"], shape=world.shapes[b], label=lab,
                              label_embedding=world.label_vecs[b].tobytes(), answer="bench answer")
                t0 = time.perf_counter()
                plan = r.plan(core_state, x)
                prompt = compile_prompt(prompt_blocks(plan.retrieved, x.text, x.instruction, x.evidence), policy.compiler,
                                        count_tokens, policy.compiler.token_budget)
                x = attrs.evolve(x, prompt_rule_ids=prompt.item_ids("rules"), prompt_episode_keys=prompt.item_ids("examples"),
                                 prompt_tokens=prompt.token_count, completion_tokens=2, dropped=len(prompt.dropped))
                core_state = r.step(core_state, x, verdict)
                if i >= 5:
                    t_core.append(time.perf_counter() - t0)
            for s, out in ((mem, t_mem), (disk, t_disk)):
                for i in chunk:
                    t0 = time.perf_counter()
                    p = s.answer(elements[i])
                    s.fold(p.id, verdict)
                    if i >= 5:
                        out.append(time.perf_counter() - t0)
        records = sum(1 for _ in rd.records())
        files = sum(1 for _ in (tmp / "embeddings").rglob("*.npy"))
        rd.__exit__(None, None, None)
        c, m, d = (statistics.median(t) * 1e3 for t in (t_core, t_mem, t_disk))
        print(f"{n:>9,} {c:>8.3f} {m:>12.3f} {m / c:>6.2f} {d:>13.3f} {d / c:>6.2f} {records / total:>10.2f} "
              f"{files / total:>8.2f} {_fsync_ms(tmp):>8.3f}", flush=True)
        assert mem.step_index == disk.step_index == state0.steps + total and not mem.pending_ids()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
