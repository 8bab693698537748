"""File-system calls per element of the shell on a RUN_DIR, counted with ``strace`` (Linux).

Usage::

    python benchmarks/shell_syscalls.py [--elements 30] [--durability disk|os]

Builds the 10^3-episode state of ``benchmarks/core_overhead.py``, then runs ``--elements`` live
``Session.answer`` + ``Session.fold`` pairs and as many ``Session.run_element`` calls (what
``rizz run`` does) on two fresh RUN_DIRs with the stub model and embedder of
``shell_overhead.py``, under ``strace -f`` (every thread: the embedding store fsyncs on a pool
thread). Each call is bracketed by a marker written to ``/dev/null``; the table gives the mean
number of each system call per call of each kind (``answer``, ``fold``, ``run``). Needs
``strace`` on the PATH.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLS = "openat,close,fsync,fdatasync,rename,renameat,renameat2,mkdir,unlink,ftruncate,write,newfstatat,statx,lseek"


def child(elements: int, durability: str, out: Path) -> None:
    sys.path.insert(0, str(HERE))
    import numpy as np
    from core_overhead import build_events, make_layout, make_world, members
    from shell_overhead import StubModel, bench_elements

    from rizz.core import Policy, Verdict, rizz
    from rizz.core.apply import fold
    from rizz.engine.logfold import LogFold
    from rizz.engine.session import Session
    from rizz.formats.streams import element_from_json
    from rizz.store.runlog import RunDir

    null = os.open(os.devnull, os.O_WRONLY)

    def mark(tag: str) -> None:
        os.write(null, f"@@{tag}".encode())

    policy = Policy()
    rng = np.random.default_rng(0)
    world = make_world(24, 384, 1, rng)
    state0 = fold(rizz(policy).init(), build_events(world, make_layout(world, 1000, rng)))
    where = rng.choice(len(world.labels), size=2 * elements, p=world.weights).tolist()
    vecs = members(world, np.asarray(where), rng)
    emb, els = bench_elements(world, where, vecs, 384)
    model = StubModel({lab.application: lab.function for lab in world.labels})
    v = Verdict(1.0, "exact_match")
    for name in ("live", "run"):
        rd = RunDir(out / name, durability=durability).__enter__()
        s = Session(policy, model, emb, rendering="chat", run_dir=rd, embed_cache=rd.embeddings,
                    fold=LogFold(policy, rd.embeddings, state=state0, answers=state0.steps))
        for i in range(elements) if name == "live" else range(elements, 2 * elements):
            if name == "live":
                mark("answer")
                p = s.answer(els[i])
                mark("fold")
                s.fold(p.id, v)
            else:
                mark("run")
                s.run_element(element_from_json(dict(els[i])))
            mark("end")
        s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=30)
    ap.add_argument("--durability", default="disk", choices=("disk", "os"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.elements, args.durability, Path(args.child))
        return
    if shutil.which("strace") is None:
        sys.exit("strace is not on the PATH")
    with tempfile.TemporaryDirectory(prefix="rizz-syscalls-") as tmp:
        trace = Path(tmp) / "trace.txt"
        subprocess.run(["strace", "-f", "-o", str(trace), "-e", f"trace={CALLS}", sys.executable, __file__,
                        "--elements", str(args.elements), "--durability", args.durability, "--child", tmp], check=True)
        counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        seen: collections.Counter = collections.Counter()
        cur = None
        for line in trace.read_text(errors="replace").splitlines():
            m = re.search(r'write\(\d+, "@@(\w+)"', line)
            if m:
                cur = None if m.group(1) == "end" else m.group(1)
                seen[cur] += cur is not None
                continue
            m = re.match(r"\d+\s+(\w+)\(", line)
            if cur is not None and m:
                counts[cur][m.group(1)] += 1
    names = sorted({k for c in counts.values() for k in c})
    print(f"durability {args.durability}; system calls per call (mean over {args.elements} calls of each kind, every thread)")
    print(f"{'call':>7} " + " ".join(f"{n:>10}" for n in names))
    for tag in ("answer", "fold", "run"):
        print(f"{tag:>7} " + " ".join(f"{counts[tag][n] / max(seen[tag], 1):>10.2f}" for n in names))


if __name__ == "__main__":
    main()
