"""Throughput of one live Session on a RUN_DIR with several threads answering and folding (group commit).

Usage::

    PYTHONPATH=.:tests/shell python benchmarks/shell_threads.py [--threads 8] [--pairs 200] [--durability disk]

Each thread runs ``pairs / threads`` answer + fold pairs (the stub model and hash embedder of
``tests/shell/livekit.py``, elements ``q<i>``); prints pairs per second and ``fdatasync`` calls
per Session call. With durability ``disk`` every call returns once its records are on disk; a
call syncs outside the Session's lock, so calls finishing together share one ``fdatasync``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "shell"))
from livekit import HashEmbedder, StubModel, element  # noqa: E402

from rizz import Session  # noqa: E402
from rizz.formats.policy_file import load_policy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--durability", default="disk", choices=("disk", "os"))
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="rizz-threads-"))
    s = Session.open(root / "session", policy=load_policy("default"), model=StubModel(), embedder=HashEmbedder(),
                     snapshot_every=0, durability=args.durability)
    count, lock, real = [0], threading.Lock(), os.fdatasync

    def counted(fd: int) -> None:
        with lock:
            count[0] += 1
        real(fd)

    os.fdatasync = counted
    per = args.pairs // args.threads

    def worker(k: int) -> None:
        for j in range(per):
            p = s.answer(element(k * per + j))
            s.fold(p, 1.0)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    os.fdatasync = real
    calls = 2 * per * args.threads
    print(f"threads {args.threads}, pairs {per * args.threads}, durability {args.durability}, load average "
          f"{os.getloadavg()[0]:.2f}: {wall:.2f} s, {per * args.threads / wall:.1f} pairs/s, "
          f"{count[0]} fdatasync for {calls} calls ({count[0] / calls:.2f} per call)")
    s.close()


if __name__ == "__main__":
    main()
