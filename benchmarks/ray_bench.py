"""Wall time of a multi-policy ``rizz bench`` with the stub model: serial vs ``--ray`` (local Ray).

Usage::

    python benchmarks/ray_bench.py --out DIR [--policies frozen,default,single-branch,no-procedural]
        [--limit 40] [--latency 0.0] [--num-cpus 2]

Both benches run the same stream (``data/trace-mini/test.jsonl``, first ``--limit`` elements),
the same policies, the scripted :class:`stub_model.StubModel` (``--latency`` seconds per call
stand in for a model's time) and the real embedder, each from an empty folder (no cache
carried over). Printed: each bench's wall time, the Ray bench's per-task times (from
``ray.json``), Ray start-up, and whether digests and results.json (but timings and cache-hit
counts) agree. The scaling argument drawn from the per-task times is in results/2026-12-01-ray-bench.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stub_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = {"wall_s", "latency_s", "cached", "uncached", "cost_usd", "command"}


def _strip(x):  # noqa: ANN001, ANN202
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def main() -> None:
    from functools import partial

    import ray

    from rizz.adapters.embedder import Embedder
    from rizz.lab.bench import run_bench

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--policies", default="frozen,default,single-branch,no-procedural")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--num-cpus", type=int, default=2)
    a = ap.parse_args()
    pols = a.policies.split(",")
    stream = ROOT / "data" / "trace-mini" / "test.jsonl"
    for d in ("serial", "ray"):
        if (a.out / d).exists():
            raise SystemExit(f"{a.out / d} exists; give a new --out (each bench starts from an empty folder)")
    quiet = lambda m: None  # noqa: E731

    t0 = time.perf_counter()
    (a.out / "serial").mkdir(parents=True)
    serial = run_bench(stream, pols, a.out / "serial", stub_model.cached_stub(str(a.out / "serial" / "responses.sqlite"), a.latency),
                       Embedder(), limit=a.limit, log=quiet, title="serial", command="serial")
    t_serial = time.perf_counter() - t0

    ray.cloudpickle.register_pickle_by_value(stub_model)
    t0 = time.perf_counter()
    ray.init(num_cpus=a.num_cpus, include_dashboard=False, logging_level="WARNING")
    t_init = time.perf_counter() - t0
    (a.out / "ray").mkdir(parents=True)
    par = run_bench(stream, pols, a.out / "ray", None, None, limit=a.limit, log=quiet, title="serial", command="ray",
                    ray_address="local", model_factory=partial(stub_model.cached_stub, latency_s=a.latency))
    t_ray = time.perf_counter() - t0
    ray.shutdown()
    tasks = json.loads((a.out / "ray" / "ray.json").read_text())["tasks"]
    same = _strip(par) == _strip(serial)
    digests = all(json.loads((a.out / d / p / "summary.json").read_text())["state_digest"] ==
                  json.loads((a.out / "serial" / p / "summary.json").read_text())["state_digest"] for p in pols for d in ("ray",))
    out = {"policies": pols, "limit": a.limit, "latency_s": a.latency, "num_cpus": a.num_cpus,
           "serial_wall_s": round(t_serial, 2), "serial_per_policy_s": {p: serial["results"][p]["wall_s"] for p in pols},
           "ray_wall_s_incl_init": round(t_ray, 2), "ray_init_s": round(t_init, 2),
           "ray_tasks_s": {t["policy"]: t["wall_s"] for t in tasks},
           "results_equal_but_timings": same, "digests_equal": digests}
    print(json.dumps(out, indent=1))
    (a.out / "ray_bench.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
