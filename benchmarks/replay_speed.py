"""Replay and resume speed of a RUN_DIR beside the core step alone (issue #27 §2).

Usage::

    python benchmarks/replay_speed.py [--sizes 1000,100000] [--steps 1200] [--full-log 1000]
        [--snapshot-every 50] [--dir DIR] [--blas-threads N]

A stub model and a stub embedder (``benchmarks/shell_overhead.py``: replies and vectors at once)
stand in for the real ones: this measures the store, the log and the fold, which is all a
replay or a resume does (neither calls a model).

For each size N:

1. The state of ``benchmarks/core_overhead.py`` with N verified episodes (24 branches, rules,
   anti-patterns, scoped context, history) is built and written as snapshot 0 of a fresh
   RUN_DIR (an incremental snapshot: its large parts as chunks in ``store.sqlite``).
2. A forked child runs ``--steps`` elements on it as ``rizz run`` does (``Session.run_element``:
   one ``step`` record per element, ``distill`` records when due; durability ``os``;
   ``--snapshot-every`` as the floor of Session's snapshot rule, the newest 3 kept), records
   its digest, and kills itself with SIGKILL (no close, no final snapshot: what ``kill -9``
   leaves).
3. Replay: the log's step records are refolded on snapshot 0 (a copy kept in ``DIR/nN-snap0``;
   loaded, not timed) as ``rizz
   replay`` refolds (:func:`rizz.engine.logfold.refold`): each line decoded as ``RunDir.records``
   decodes it (:func:`rizz.formats.logrecord.load_line`) and parsed, its
   vectors read from the store (a few batched queries per 512 records), folded. "core" times the same fold with the inputs
   already built in memory (no JSON, no store): the floor a replay can reach. Steps/s are
   per element (step record; its distillation included).
4. Resume: :func:`rizz.engine.logfold.restore_fold` on the killed RUN_DIR, timed end to end
   (read the log, load the newest sound snapshot, refold the records after it); the digest
   must equal the child's. "snapshot load s" is the newest snapshot's load alone; "tail" the
   records refolded after it; "snap every" the interval Session's rule had reached (the
   worst-case tail: at most ``SNAPSHOT_TAIL_MAX``), "worst s" the resume that tail would cost
   (snapshot load + "snap every" records at the replay rate), and "snap ms" the mean wall
   time of the child's snapshot writes after snapshot 0 (incremental ones).

``--full-log L`` (0: skip): a real log of L elements from an empty state is also written the
same way and replayed whole with :func:`rizz.engine.run.replay` (what ``rizz replay`` runs:
every record, summary, digest), reported as steps/s beside its core-only fold.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_overhead import build_events, make_layout, make_world, members  # noqa: E402
from shell_overhead import StubModel, bench_elements  # noqa: E402

from rizz.core import CandidateRule, Policy, digest, rizz  # noqa: E402
from rizz.core.apply import fold  # noqa: E402
from rizz.engine.codec import decode_step  # noqa: E402
from rizz.engine.logfold import LogFold, refold, restore_fold, save_inflight  # noqa: E402
from rizz.engine.session import Session  # noqa: E402
from rizz.formats.logrecord import load_line, parse  # noqa: E402
from rizz.formats.policy_file import policy_data  # noqa: E402
from rizz.formats.streams import element_from_json  # noqa: E402
from rizz.store.durable import read_snapshot  # noqa: E402
from rizz.store.runlog import RunDir  # noqa: E402


def write_run(root: Path, policy: Policy, world, state0, steps: int, every: int, seed: int) -> dict:
    """In a forked child: snapshot 0 = ``state0`` (if any), ``steps`` elements as ``rizz run``,
    then SIGKILL. Returns what the child wrote to ``root/child.json``."""
    rng = np.random.default_rng([seed, steps])
    where = rng.choice(len(world.labels), size=steps, p=world.weights).tolist()
    emb, elements = bench_elements(world, where, members(world, np.asarray(where), rng), 384)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            rd = RunDir(root, durability="os").__enter__()
            rd.check_or_write_meta({"stream": None, "stream_sha256": None, "policy": "default", "policy_data": policy_data(policy),
                                    "model": StubModel.name, "embedder": "stub:vectors", "embedder_dim": 384, "rendering": "chat"})
            snaps: list[float] = []
            real = rd.save_snapshot

            def timed(n: int, state) -> int:
                t = time.perf_counter()
                size = real(n, state)
                snaps.append(time.perf_counter() - t)
                return size

            rd.save_snapshot = timed  # type: ignore[method-assign]
            fold0 = LogFold(policy, rd.embeddings, state=state0, answers=state0.steps if state0 is not None else 0)
            if state0 is not None:
                save_inflight(rd.inflight_path(0), fold0)
                rd.save_snapshot(0, state0)
            s = Session(policy, StubModel({lab.application: lab.function for lab in world.labels}), emb, rendering="chat",
                        run_dir=rd, embed_cache=rd.embeddings, fold=fold0, snapshot_every=every, keep_snapshots=3)
            t0 = time.perf_counter()
            for el in elements:
                s.run_element(element_from_json(el))
            wall = time.perf_counter() - t0
            rd.sync()
            (root / "child.json").write_text(json.dumps({"digest": s.digest(), "run_ms": wall / steps * 1e3, "snap_ms": snaps,
                                                         "interval": s._snap_interval, "records": s._fold.folded}))
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    return json.loads((root / "child.json").read_text())


def replay_rates(root: Path, policy: Policy, from_snapshot: bool) -> tuple[float, float, int]:
    """(shell steps/s, core-only steps/s, steps) refolding the log on snapshot 0 (or from empty)."""
    rd = RunDir(root)
    lines = (root / "log.jsonl").read_bytes().splitlines()
    steps = sum(b'"kind": "step"' in ln for ln in lines)

    def load0() -> LogFold:
        if not from_snapshot:
            return LogFold(policy, rd.embeddings)
        side = RunDir(root.with_name(root.name + "-snap0"))  # snapshot 0 kept apart: the run keeps only its newest 3
        data, why = read_snapshot(side.snap_dir / "00000000.json")
        assert why is None, why
        state = side.chunks.load(data)
        return LogFold(policy, rd.embeddings, state=state, answers=state.steps)

    f = load0()
    gc.collect()
    t0 = time.perf_counter()
    refold(f, [load_line(ln) for ln in lines])  # what rizz replay and a resume run: RunDir.records' decode, vectors read ahead in batches
    shell = time.perf_counter() - t0
    want = digest(f.state)
    del f
    f = load0()
    recs = [parse(json.loads(ln)) for ln in lines]
    given = []
    for rec in recs:
        if rec.kind == "step":
            given.append({"inp": decode_step(rec, rd.embeddings)[0]})
        else:
            given.append({"rules": tuple(CandidateRule(a, s, rd.embeddings.get(k).tobytes()) for a, s, k in rec.rules or ())})
    gc.collect()
    t0 = time.perf_counter()
    for rec, kw in zip(recs, given):
        f.apply(rec, **kw)
    core = time.perf_counter() - t0
    assert digest(f.state) == want
    return steps / shell, steps / core, steps


def files_in(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Figures swing with load on a shared machine: run it on quiet cores, several times "
        "(results/2026-12-04-replay-speed-quiet.md ran 15 rounds of --sizes 1000).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--sizes", default="1000,100000",
                    help="stored episodes in the starting state, comma-separated (one table row each)")
    ap.add_argument("--steps", type=int, default=1200,
                    help="elements the killed run writes on top of that state; replay and resume refold them")
    ap.add_argument("--full-log", type=int, default=1000,
                    help="also write a log of this many elements from an empty state and time `rizz replay` on it (0: skip)")
    ap.add_argument("--snapshot-every", type=int, default=50,
                    help="floor of the run's snapshot interval, in elements")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic world and state")
    ap.add_argument("--dir", default=None, help="where the RUN_DIRs are written (None: a new temporary folder)")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="limit numpy's BLAS threads (threadpoolctl; None: no limit); 1 measures one core")
    args = ap.parse_args()
    if args.blas_threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)
    policy = Policy()
    r = rizz(policy)
    base = Path(args.dir or tempfile.mkdtemp(prefix="rizz-replay-"))
    print(f"stub model and stub embedder (benchmarks/shell_overhead.py): the store, log and fold are measured, no model. "
          f"load average {os.getloadavg()[0]:.2f}, dir {base}")
    if args.full_log:
        rng = np.random.default_rng([args.seed, 1])
        world = make_world(24, 384, 1, rng)
        root = base / f"full{args.full_log}"
        child = write_run(root, policy, world, None, args.full_log, args.snapshot_every, args.seed)
        from rizz.engine.run import replay

        t0 = time.perf_counter()
        got = replay(root, write_summary=False)
        whole = time.perf_counter() - t0
        assert got["state_digest"] == child["digest"], (got["state_digest"], child["digest"])
        shell, core, steps = replay_rates(root, policy, from_snapshot=False)
        print(f"\nwhole log from an empty state ({steps} elements written as `rizz run` at {child['run_ms']:.2f} ms/element; "
              f"{files_in(root)} files in the RUN_DIR):")
        print(f"  rizz replay (read, parse, refold, summary, digest): {steps / whole:8.0f} steps/s  ({whole:.2f} s)")
        print(f"  refold of the log alone:                           {shell:8.0f} steps/s")
        print(f"  core alone (inputs in memory):                     {core:8.0f} steps/s  (refold at {shell / core:.0%} of the core)")
    print(f"\n{'stored':>9} {'steps':>6} {'replay st/s':>11} {'core st/s':>10} {'of core':>7} {'resume s':>8} {'snap load s':>11} "
          f"{'tail':>5} {'snap every':>10} {'worst s':>7} {'snap ms':>8} {'run ms/el':>9} {'files':>5}")
    for n in [int(x) for x in args.sizes.split(",")]:
        rng = np.random.default_rng([args.seed, n])
        world = make_world(24, 384, 1, rng)
        state0 = fold(r.init(), build_events(world, make_layout(world, n, rng)))
        gc.collect()
        root = base / f"n{n}"
        with RunDir(base / f"n{n}-snap0") as side:  # snapshot 0 as the replay's start (the run prunes its own)
            side.save_snapshot(0, state0)
        child = write_run(root, policy, world, state0, args.steps, args.snapshot_every, args.seed)
        del state0
        gc.collect()
        shell, core, steps = replay_rates(root, policy, from_snapshot=True)
        gc.collect()
        rd = RunDir(root)
        t0 = time.perf_counter()
        rd.repair()
        f, records = restore_fold(rd, policy)
        resume = time.perf_counter() - t0
        assert digest(f.state) == child["digest"]
        newest = max(rd.snapshot_steps())
        del f
        gc.collect()
        t0 = time.perf_counter()
        rd2 = RunDir(root)
        rd2.latest_snapshot(len(records))
        load = time.perf_counter() - t0
        snap_ms = float(np.mean(child["snap_ms"][1:])) * 1e3 if len(child["snap_ms"]) > 1 else float("nan")
        worst = load + child["interval"] / shell
        print(f"{n:>9,} {steps:>6} {shell:>11.0f} {core:>10.0f} {shell / core:>7.0%} {resume:>8.2f} {load:>11.2f} "
              f"{len(records) - newest:>5} {child['interval']:>10} {worst:>7.2f} {snap_ms:>8.1f} {child['run_ms']:>9.2f} {files_in(root):>5}",
              flush=True)


if __name__ == "__main__":
    main()
