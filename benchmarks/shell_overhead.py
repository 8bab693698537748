"""Per-element cost of the shell (a live Session) beside the core step, model and embedder stubbed.

Usage::

    python benchmarks/shell_overhead.py [--sizes 1000,10000,100000] [--repeats 200] [--seed 0]
        [--blas-threads N] [--dir DIR] [--snapshot-every 50]

For each size N the state of ``benchmarks/core_overhead.py`` is built (N verified episodes over
24 branches, rules, anti-patterns, scoped context; folded from the core's own events). Then, on
fresh inputs from the same clusters, six things are timed per element, interleaved in chunks of
25 on the same kind of input (each advancing its own copy of the state):

1. core: ``plan`` → ``compile_prompt`` → ``step`` (exactly the timed path of core_overhead.py);
2. ``mem``: a live Session in memory, ``Session.answer(element)`` then ``Session.fold(id,
   Verdict(1.0))``: element checks, embedding (a dict lookup of precomputed vectors), judge (a
   stub reply), route round, retrieval, compile, render, model (a stub reply), extraction, the
   typed log record, the feedback round, the distillation check (and, every ``distill_every``
   successes of a branch, the stub distillation and its record), the pending-answer bookkeeping;
3. ``live``: the same on a RUN_DIR with durability ``"disk"`` (the default): each call returns
   once its records are on disk — per element one ``fdatasync`` of the log for the answer, one
   for the verdict (and the distillation it makes due), and one commit of ``store.sqlite`` for
   the answer's new vectors and prompt (and one for a distillation's new rule vectors), made
   before the record naming them is written;
4. ``live-os``: the same with durability ``"os"`` (records handed to the OS, no sync per call);
5. ``run``: ``Session.run_element`` as ``rizz run`` does it (answer, exact-match verify, fold: one
   ``step`` record and any ``distill`` record under one ``fdatasync``), durability ``"disk"``;
6. ``run-os``: the same with durability ``"os"``.

"syncs/el": ``os.fsync`` + ``os.fdatasync`` calls per element (every thread) on paths 3 and 5
(paths 4 and 6 are checked to make none), plus the commits of ``store.sqlite`` (issue #27: each
one an fsync of its WAL that SQLite makes in C, out of sight of the counter; vectors and the
prompt of a record are one commit, made before the record is written). "fsync ms": the disk's floor, the median time to
append and fdatasync one 1 KiB line in the same directory after the size's run. No snapshots
while timing; instead "snap ms" is one snapshot of the ``live`` session's state (state and
answers in flight, serialised, checksummed, written, fsynced), "snap every" the records between
two snapshots under ``Session``'s rule (``--snapshot-every`` 50 as a floor, at most
``SNAPSHOT_RECORD_BYTES`` snapshot bytes per record), and "snap ms/el" its share per element.
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
import threading
import time
from pathlib import Path

import attrs
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_overhead import SESSIONS, build_events, count_tokens, make_layout, make_world, members  # noqa: E402

from rizz.adapters.models import Generation  # noqa: E402
from rizz.core import Policy, StepInput, Verdict, compile_prompt, prompt_blocks, rizz  # noqa: E402
from rizz.core.apply import fold  # noqa: E402
from rizz.engine.logfold import LogFold, save_inflight  # noqa: E402
from rizz.engine.session import Session  # noqa: E402
from rizz.formats.streams import element_from_json  # noqa: E402
from rizz.store.runlog import RunDir  # noqa: E402

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


def bench_elements(world, where: list[int], vecs: np.ndarray, dim: int) -> tuple[StubEmbedder, list[dict]]:
    """Stream elements (dicts) for the branches ``where`` of ``world`` and a stub embedder that
    maps their texts to ``vecs`` (len(where), dim) and each label to its branch's label vector."""
    emb = StubEmbedder(dim)
    for b, lab in enumerate(world.labels):
        emb.known[lab.application.replace("-", " ")] = world.label_vecs[b]
    elements = []
    for i, w in enumerate(where):
        lab = world.labels[w]
        el = {"id": f"bench-{i}", "input": f"{lab.application} bench question {i}: what is the answer?",
              "instruction": "Answer with the label only.", "reference": "bench answer",
              "metadata": {"shape": world.shapes[w], "scope": f"session-{i % SESSIONS}" if i % 2 else None}}
        emb.known[f"{el['instruction']}\n\n{el['input']}"] = vecs[i]
        elements.append(el)
    return emb, elements


def _fsync_ms(root: Path, n: int = 50) -> float:
    """Median wall time of appending one 1 KiB line and fdatasyncing it, in ``root`` (the disk's floor)."""
    times = []
    with open(root / "fsync-probe", "ab") as f:
        for _ in range(n):
            t0 = time.perf_counter()
            f.write(b"x" * 1023 + b"\n")
            f.flush()
            getattr(os, "fdatasync", os.fsync)(f.fileno())
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


class SyncCounter:
    """Counts ``os.fsync`` + ``os.fdatasync`` calls (every thread) while installed."""

    def __init__(self) -> None:
        self.n = 0
        lock = threading.Lock()

        def count(real):
            def wrapped(fd: int) -> None:
                with lock:
                    self.n += 1
                real(fd)
            return wrapped

        self._real = (os.fsync, getattr(os, "fdatasync", None))
        os.fsync = count(os.fsync)
        if self._real[1] is not None:
            os.fdatasync = count(self._real[1])

    def close(self) -> None:
        os.fsync = self._real[0]
        if self._real[1] is not None:
            os.fdatasync = self._real[1]


def _snapshot_ms(session: Session) -> tuple[float, int]:
    """One snapshot of ``session`` (state + answers in flight, as ``Session`` writes them): ms and bytes."""
    t0 = time.perf_counter()
    save_inflight(session.run_dir.inflight_path(10**8), session._fold)
    size = session.run_dir.save_snapshot(10**8, session.state)
    return (time.perf_counter() - t0) * 1e3, size


PATHS = ("mem", "live", "live-os", "run", "run-os")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--branches", type=int, default=24)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=None, help="where the durable sessions write (default: a temp dir)")
    ap.add_argument("--blas-threads", type=int, default=None, help="limit BLAS threads (threadpoolctl) for the whole run")
    ap.add_argument("--snapshot-every", type=int, default=50, help="the floor of the snapshot rule priced in 'snap ms/el' (rizz run's default)")
    args = ap.parse_args()
    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)
    policy = Policy()
    r = rizz(policy)
    print(f"python {platform.python_version()}, numpy {np.__version__}, cpus {len(os.sched_getaffinity(0))}, "
          f"load average {os.getloadavg()[0]:.2f}; repeats {args.repeats}, branches {args.branches}, dim {args.dim}")
    head = (f"{'memories':>9} {'core ms':>8} " + " ".join(f"{p + ' ms':>10} {'ratio':>5}" for p in PATHS)
            + f" {'syncs/el live':>13} {'syncs/el run':>12} {'fsync ms':>8} {'snap ms':>8} {'snap every':>10} {'snap ms/el':>10}")
    print(head)
    print("-" * len(head))
    root = Path(args.dir or tempfile.mkdtemp(prefix="rizz-shell-bench-"))
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
        emb, elements = bench_elements(world, where, vecs, args.dim)
        parsed = [element_from_json(dict(el)) for el in elements]
        model = StubModel(labels)
        sessions: dict[str, Session] = {"mem": Session(policy, model, emb, state=state0, step=state0.steps, rendering="chat")}
        dirs: dict[str, RunDir] = {}
        for name in PATHS[1:]:
            rd = dirs[name] = RunDir(root / f"n{n}" / name, durability="os" if name.endswith("-os") else "disk").__enter__()
            sessions[name] = Session(policy, model, emb, rendering="chat", run_dir=rd, embed_cache=rd.embeddings,
                                     fold=LogFold(policy, rd.embeddings, state=state0, answers=state0.steps))
        core_state = state0
        times: dict[str, list[float]] = {p: [] for p in ("core",) + PATHS}
        syncs = {name: 0 for name in PATHS[1:]}
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
                    times["core"].append(time.perf_counter() - t0)
            for name in PATHS:
                s, out = sessions[name], times[name]
                counter = SyncCounter() if name in syncs else None
                commits = getattr(s.embed_cache, "commits", 0)
                try:
                    for i in chunk:
                        t0 = time.perf_counter()
                        if name.startswith("run"):
                            s.run_element(parsed[i])
                        else:
                            p = s.answer(elements[i])
                            s.fold(p.id, verdict)
                        if i >= 5:
                            out.append(time.perf_counter() - t0)
                finally:
                    if counter is not None:
                        counter.close()
                        syncs[name] += counter.n
                        if dirs[name].durability == "disk":  # store.sqlite's commits: fsynced by SQLite itself, in C
                            syncs[name] += getattr(s.embed_cache, "commits", 0) - commits
        rd = dirs["live"]
        records = {name: sum(1 for _ in dirs[name].records()) for name in ("live", "run")}
        snap_ms, size = _snapshot_ms(sessions["live"])
        every = Session(policy, model, emb, run_dir=rd, snapshot_every=args.snapshot_every)._interval(size)
        fs = _fsync_ms(rd.root)
        for d in dirs.values():
            d.__exit__(None, None, None)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        c = med["core"]
        assert syncs["live-os"] == syncs["run-os"] == 0, syncs  # durability "os": nothing synced per element
        print(f"{n:>9,} {c:>8.3f} " + " ".join(f"{med[p]:>10.3f} {med[p] / c:>5.2f}" for p in PATHS)
              + f" {syncs['live'] / total:>13.2f} {syncs['run'] / total:>12.2f} {fs:>8.3f} {snap_ms:>8.1f} {every:>10,}"
              f" {snap_ms / every * records['live'] / total:>10.3f}", flush=True)
        assert all(s.step_index == state0.steps + total and not s.pending_ids() for s in sessions.values())
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
