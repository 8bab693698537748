"""What a resume pays per log record after a crash: refolding the log tail past the newest snapshot.

Usage::

    python benchmarks/shell_refold.py [--sizes 10000,100000] [--records 400]

For each size N the state of ``benchmarks/core_overhead.py`` is built and saved as snapshot 0 of
a fresh RUN_DIR (with its answers-in-flight file); a live Session (the stubs of
``shell_overhead.py``) then appends about ``--records`` records (answer, verdict, distill);
finally what ``restore_fold`` does is timed: loading snapshot 0, folding the first record
after it (which also builds what the loaded state derives lazily), and refolding the others
(reported per record; embeddings read back from the store, no model call, no
retrieval). With ``Session``'s snapshot rule a crash leaves at most "snap every" records
(``shell_overhead.py``) to refold, so the resume's worst case is that many times this figure.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_overhead import SESSIONS, build_events, make_layout, make_world, members  # noqa: E402
from shell_overhead import StubEmbedder, StubModel  # noqa: E402

from rizz.core import (  # noqa: E402
    Policy,
    Verdict,
    digest,  # noqa: E402
    rizz,
)
from rizz.core.apply import fold  # noqa: E402
from rizz.engine.logfold import LogFold, load_inflight, save_inflight  # noqa: E402
from rizz.engine.session import Session  # noqa: E402
from rizz.formats.logrecord import parse  # noqa: E402
from rizz.store.runlog import RunDir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--records", type=int, default=400)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    policy = Policy()
    r = rizz(policy)
    root = Path(args.dir or tempfile.mkdtemp(prefix="rizz-refold-"))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'memories':>9} {'records':>8} {'snapshot load s':>15} {'first record s':>15} {'refold ms/record':>16}")
    for n in [int(s) for s in args.sizes.split(",")]:
        rng = np.random.default_rng([0, n])
        world = make_world(24, 384, 1, rng)
        state0 = fold(r.init(), build_events(world, make_layout(world, n, rng)))
        gc.collect()
        total = args.records // 2
        where = rng.choice(len(world.labels), size=total, p=world.weights).tolist()
        vecs = members(world, np.asarray(where), rng)
        emb = StubEmbedder(384)
        for b, lab in enumerate(world.labels):
            emb.known[lab.application.replace("-", " ")] = world.label_vecs[b]
        rd = RunDir(root / f"n{n}", durability="os").__enter__()
        s = Session(policy, StubModel({lab.application: lab.function for lab in world.labels}), emb, rendering="chat",
                    run_dir=rd, embed_cache=rd.embeddings, fold=LogFold(policy, rd.embeddings, state=state0, answers=state0.steps))
        save_inflight(rd.inflight_path(0), s._fold)
        rd.save_snapshot(0, state0)
        for i in range(total):
            lab = world.labels[where[i]]
            el = {"id": f"r{i}", "input": f"{lab.application} refold question {i}?", "instruction": "Answer with the label only.",
                  "metadata": {"shape": world.shapes[where[i]], "scope": f"session-{i % SESSIONS}" if i % 2 else None}}
            emb.known[f"{el['instruction']}\n\n{el['input']}"] = vecs[i]
            s.fold(s.answer(el).id, Verdict(1.0, "exact_match"))
        want = s.digest()
        rd.__exit__(None, None, None)
        del s, state0
        gc.collect()
        rd2 = RunDir(root / f"n{n}")
        records = [parse(x) for x in rd2.records()]
        t0 = time.perf_counter()
        _, state = rd2.latest_snapshot(0)
        answers, inflight = load_inflight(rd2.snap_dir / f"{0:08d}.inflight.json")
        load_s = time.perf_counter() - t0
        fold2 = LogFold(policy, rd2.embeddings, state=state, inflight=inflight, answers=answers)
        t1 = time.perf_counter()
        fold2.apply(records[0])  # (the first record also builds what the loaded state derives lazily)
        t2 = time.perf_counter()
        for rec in records[1:]:
            fold2.apply(rec)
        t3 = time.perf_counter()
        assert digest(fold2.state) == want
        print(f"{n:>9,} {len(records):>8} {load_s:>15.1f} {(t2 - t1):>15.1f} {(t3 - t2) / (len(records) - 1) * 1e3:>16.2f}", flush=True)
        del state, fold2
        gc.collect()


if __name__ == "__main__":
    main()
