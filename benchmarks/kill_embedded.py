"""``kill -9`` a real embedded-model ``rizz run`` at 20 seeded random points; every resume must reach
the uninterrupted run's state digest (issue #12 §7 "Crashes", specs/reliability.md).

Usage (from the checkout; the embedded model, so minutes, not a CI test)::

    RIZZ_THREADS=1 python benchmarks/kill_embedded.py OUT [--elements 24] [--kills 20]
        [--seed 20261201] [--budget 2048] [--snapshot-every 3] [--share-cache]
        [--stream data/trace-mini/test.jsonl] [--exclude-task 20Minuten]

1. ``OUT/stream.jsonl``: the first ``--elements`` lines of ``--stream`` whose ``metadata.task`` is
   not ``--exclude-task`` (20Minuten: German news summaries, the slowest prompts), bytes unchanged.
2. Reference: ``rizz run OUT/stream.jsonl --out OUT/ref --budget B --snapshot-every S`` runs
   uninterrupted; its ``summary.json`` gives the digest to reach. An unfinished ``OUT/ref`` left
   by an earlier call is resumed, a finished one only read.
3. Killed: on a fresh ``OUT/killed``, the same command runs ``--kills`` times under
   ``RIZZ_FAULT=SITE:N`` (:func:`rizz.store.durable.fault_point`, the mechanism the stub test
   ``tests/shell/test_durability.py`` uses): the process SIGKILLs itself the N-th time it reaches
   SITE. ``random.Random(--seed)`` draws, up front, a target step for each kill (sorted, in
   0 .. elements-2, so the kills spread over the run and it is unfinished after the last one)
   and a SITE from :data:`SITES` (``log.append``, ``snapshot.write`` and ``embedding.write`` once
   each at random places, the snapshot one in the first half); N = 1 + round(steps still to go
   to the target × SITE's visits per step in the reference run). A snapshot kill jumps to the
   next snapshot (3-12 steps on, as snapshots grow), so one drawn once half the steps are done
   is replaced by the next drawn site. Then the command runs once with no fault to the end.
4. Checks (verdict PASS only if all hold): each of the ``--kills`` processes died by SIGKILL; a
   kill inside a write left that write's half-done trace (``log.append``: a partial last log
   line; ``snapshot.write``: a ``snapshots/*.json.tmp``, newer than the process's start;
   ``embedding.write`` and ``prompt.write`` are inside the store's transaction (issue #27:
   ``store.sqlite``), which a kill rolls back and leaves no trace of, so none is asked for
   there; in a RUN_DIR of the ``embeddings/``/``prompts/`` layout: an ``embeddings/*/.tmp-*.npy``
   or a ``prompts/*.tmp``); the final run's ``state_digest`` and ``rizz replay OUT/killed`` equal the
   reference's, and so does its log, record for record (timings and cache flags aside); with
   ``--share-cache``, the killed run sent no prompt the reference had not sent.

``--share-cache``: both runs use ``OUT/responses.sqlite`` (``--cache``). The reference runs first,
so every answer the killed run reads was the model's in an uninterrupted run; a resume that
compiled a different prompt would miss the cache (counted: ``uncached calls``). ``cache.put`` is
then never reached in the killed run and is left out of the sites. Without it, each RUN_DIR has
its own cache and the killed run calls the model again (about twice the time).

Prints one row per kill: kill #, fault point (``RIZZ_FAULT``), steps done when killed, the trace
the kill left, the next process's resume time (its launch to ``resuming ... after N finished
steps``: Python, torch and model loading, log repair and refold; ``-`` when no step was done),
the killed process's wall time; then kills per site and the verdict. Exit status 0 on PASS, 1 on
FAIL. Time: the reference run is ~2-4 s per element on an idle core; each killed process pays
~10-20 s of start-up (torch, MiniLM, GGUF), so 24 elements and 20 kills take ~10-20 min idle.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rizz.store.durable import FAULT_ENV, FAULT_SITES as SITES  # noqa: E402  (the first three: hit at least once)

TRACES = {"log.append": "partial log line", "snapshot.write": "snapshot .tmp", "embedding.write": "vector .tmp",
          "prompt.write": "prompt .tmp"}


def build_stream(src: Path, out: Path, n: int, exclude: str) -> Path:
    """Write the first ``n`` lines of ``src`` not of task ``exclude`` to ``out/stream.jsonl``."""
    keep = [ln for ln in src.read_bytes().splitlines(keepends=True)
            if ln.strip() and json.loads(ln).get("metadata", {}).get("task") != exclude][:n]
    path = out / "stream.jsonl"
    if path.exists() and path.read_bytes() != b"".join(keep):
        sys.exit(f"{path}: exists with other contents; give a new OUT")
    path.write_bytes(b"".join(keep))
    return path


def launch(cmd: list[str], fault: str | None) -> dict:
    """Run ``cmd`` to its end; returns returncode, wall s, seconds to the "resuming" line, stderr tail."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", RIZZ_THREADS=os.environ.get("RIZZ_THREADS", "1"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: dict = {"resume_s": None, "tail": []}

    def read() -> None:
        for line in proc.stderr:
            if seen["resume_s"] is None and "resuming " in line:
                seen["resume_s"] = time.time() - t0
            seen["tail"] = (seen["tail"] + [line])[-20:]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    rc = proc.wait()
    reader.join(timeout=10)
    return {"rc": rc, "wall_s": time.time() - t0, "resume_s": seen["resume_s"], "tail": "".join(seen["tail"]), "t0": t0}


def steps_done(run_dir: Path) -> int:
    """Step records wholly written to ``run_dir/log.jsonl`` (a partial last line is not counted)."""
    log = run_dir / "log.jsonl"
    if not log.exists():
        return 0
    return sum(json.loads(ln).get("kind") == "step" for ln in log.read_bytes().split(b"\n")[:-1] if ln.strip())


def trace_left(run_dir: Path, site: str, since: float) -> bool:
    """Whether the kill left ``site``'s half-done write behind (files newer than ``since``)."""
    if site == "log.append":
        log = run_dir / "log.jsonl"
        return log.exists() and not log.read_bytes().endswith(b"\n")
    if site in ("embedding.write", "prompt.write") and (run_dir / "store.sqlite").exists():
        return True  # killed inside the store's transaction: rolled back, nothing to see (module docstring)
    pattern = {"snapshot.write": "snapshots/*.json.tmp", "embedding.write": "embeddings/*/.tmp-*.npy",
               "prompt.write": "prompts/*.tmp"}.get(site)
    return pattern is not None and any(p.stat().st_mtime >= since - 1 for p in run_dir.glob(pattern))


def visits_per_step(ref: Path, cache: Path) -> dict[str, float]:
    """How often the reference run reached each site per step (files and records it left)."""
    steps = max(1, steps_done(ref))
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT count(*) FROM responses").fetchone()[0]
    count = {"log.append": (ref / "log.jsonl").read_bytes().count(b"\n"),
             "snapshot.write": sum(p.stem.isdigit() for p in (ref / "snapshots").glob("*.json")),
             **store_commits(ref), "cache.put": rows, "step": steps}
    return {k: v / steps for k, v in count.items()}


def store_commits(ref: Path) -> dict[str, int]:
    """Visits of ``embedding.write`` and ``prompt.write`` in the reference run: in ``store.sqlite``
    one per commit that holds new vectors / a new prompt (a record naming a key not seen before);
    in the ``embeddings/``/``prompts/`` layout one per file."""
    if not (ref / "store.sqlite").exists():
        return {"embedding.write": sum(1 for _ in (ref / "embeddings").glob("*/*.npy")),
                "prompt.write": sum(1 for _ in (ref / "prompts").glob("*.txt"))}
    seen: set[str] = set()
    vecs = prompts = 0
    for ln in (ref / "log.jsonl").read_bytes().splitlines():
        r = json.loads(ln)
        keys = [(r.get("input") or {}).get("embedding"), (r.get("judge") or {}).get("label_embedding")]
        keys += [k for _, _, k in r.get("rules") or ()]
        new = {k for k in keys if k and k not in seen}
        vecs += bool(new)
        sha = (r.get("prompt") or {}).get("sha256")
        prompts += bool(sha) and sha not in seen
        seen |= new | ({sha} if sha else set())
    return {"embedding.write": vecs, "prompt.write": prompts}


def uncached_calls(run_dir: Path) -> int:
    """Model calls in ``run_dir``'s log that the response cache did not answer."""
    recs = [json.loads(ln) for ln in (run_dir / "log.jsonl").read_bytes().splitlines() if ln.strip()]
    return sum(not c.get("cached") for r in recs for c in r.get("calls") or ())


def log_diff(ref: Path, killed: Path) -> list[int]:
    """Indices of the records where the two logs differ, timings and cache flags aside (the
    step's ``wall_s``, each call's ``latency_s`` and ``cached``); a missing record differs too."""
    def recs(run_dir: Path) -> list[dict]:
        out = []
        for ln in (run_dir / "log.jsonl").read_bytes().split(b"\n")[:-1]:
            rec = json.loads(ln)
            rec.pop("wall_s", None)
            for call in rec.get("calls") or ():
                call.pop("latency_s", None), call.pop("cached", None)
            out.append(rec)
        return out

    a, b = recs(ref), recs(killed)
    return [i for i in range(max(len(a), len(b))) if i >= len(a) or i >= len(b) or a[i] != b[i]]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--stream", type=Path, default=ROOT / "data" / "trace-mini" / "test.jsonl")
    ap.add_argument("--elements", type=int, default=24)
    ap.add_argument("--exclude-task", default="20Minuten")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--budget", type=int, default=2048)
    ap.add_argument("--snapshot-every", type=int, default=3)
    ap.add_argument("--share-cache", action="store_true")
    args = ap.parse_args(argv)
    if args.kills < 3:
        ap.error("--kills must be at least 3 (one per write kind)")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    stream = build_stream(args.stream, out, args.elements, args.exclude_task)
    shared = out / "responses.sqlite" if args.share_cache else None

    def cmd(run_dir: Path) -> list[str]:
        return [sys.executable, "-m", "rizz.apps.cli", "run", str(stream), "--out", str(run_dir), "--budget",
                str(args.budget), "--snapshot-every", str(args.snapshot_every), *(["--cache", str(shared)] if shared else [])]

    if not (out / "ref" / "summary.json").exists():
        ref = launch(cmd(out / "ref"), None)
        if ref["rc"] != 0:
            sys.exit(f"reference run failed ({ref['rc']}):\n{ref['tail']}")
        print(f"reference run: {ref['wall_s']:.0f} s")
    want = json.loads((out / "ref" / "summary.json").read_text())
    print(f"reference: {want['steps']} steps, digest {want['state_digest']} "
          f"({uncached_calls(out / 'ref')} model calls not from the cache)", flush=True)
    rate = visits_per_step(out / "ref", shared or out / "ref" / "responses.sqlite")
    rng = random.Random(args.seed)
    sites = [s for s in SITES if not (shared and s == "cache.put")]
    n_el = want["steps"]
    targets = sorted(rng.randrange(max(1, n_el - 1)) for _ in range(args.kills))
    drawn = [rng.choice(sites) for _ in range(args.kills + 1)]  # one spare, for a late snapshot draw
    first = rng.randrange(args.kills // 2)  # the snapshot kill: in the first half
    forced = [first, *rng.sample([k for k in range(args.kills) if k != first], 2)]
    for k, site in zip(forced, ("snapshot.write", "log.append", "embedding.write")):
        drawn[k] = site

    def plan_for(k: int, done: int) -> str:
        site = drawn[k]
        if site == "snapshot.write" and k not in forced and done >= n_el // 2:
            site = next(s for s in drawn[k + 1:] + ["log.append"] if s != "snapshot.write")
        return f"{site}:{1 + max(0, round((targets[k] - done) * rate[site]))}"

    killed, rows, ok = out / "killed", [], True
    if killed.exists():
        sys.exit(f"{killed}: exists; give a new OUT (or remove it) so the killed run starts fresh")
    for k in range(1, args.kills + 1):
        plan = plan_for(k - 1, steps_done(killed))
        res = launch(cmd(killed), plan)
        if rows:
            rows[-1]["resume_s"] = res["resume_s"]
        site = plan.rpartition(":")[0]
        trace = trace_left(killed, site, res["t0"]) if site in TRACES else None
        rows.append({"k": k, "plan": plan, "site": site, "steps": steps_done(killed), "trace": trace,
                     "rc": res["rc"], "wall_s": res["wall_s"], "resume_s": None})
        if res["rc"] != -signal.SIGKILL:
            ok = False
            print(f"kill {k} ({plan}): the process was not killed (exit {res['rc']})\n{res['tail']}")
            break
    final = launch(cmd(killed), None) if ok else None
    if final is not None and rows:
        rows[-1]["resume_s"] = final["resume_s"]

    print("\n| kill | fault point (RIZZ_FAULT) | steps done when killed | trace left | resume s (next process) | process s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        trace = "-" if r["trace"] is None else (TRACES[r["site"]] if r["trace"] else "NONE")
        resume = "-" if r["resume_s"] is None else f"{r['resume_s']:.1f}"
        print(f"| {r['k']} | {r['plan']} | {r['steps']} | {trace} | {resume} | {r['wall_s']:.1f} |")
    per_site = {s: sum(r["site"] == s for r in rows) for s in SITES}
    print("kills per site: " + ", ".join(f"{s} {n}" for s, n in per_site.items()))
    checks = {f"{args.kills} processes died by SIGKILL": ok and len(rows) == args.kills,
              "a kill inside each of log.append, snapshot.write, embedding.write": all(per_site[s] for s in SITES[:3]),
              "every kill inside a write left its trace": all(r["trace"] is not False for r in rows)}
    if final is not None:
        got = json.loads((killed / "summary.json").read_text()) if final["rc"] == 0 else {}
        rep = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "replay", str(killed)], capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        print(f"final run: exit {final['rc']}, {got.get('steps')} steps, digest {got.get('state_digest')}, {final['wall_s']:.0f} s")
        checks["final digest == reference digest"] = got.get("state_digest") == want["state_digest"]
        checks["rizz replay digest == reference digest"] = rep.stdout.strip() == want["state_digest"]
        diff = log_diff(out / "ref", killed)
        print(f"log records that differ from the reference's (timings and cache flags aside): {diff or 'none'}")
        checks["killed log == reference log, record for record"] = not diff
        if shared:
            n = uncached_calls(killed)
            print(f"killed run: {n} model calls not from the cache")
            checks["killed run sent no prompt the reference had not"] = n == 0
    for name, held in checks.items():
        print(f"{'ok  ' if held else 'FAIL'} {name}")
    verdict = all(checks.values()) and final is not None
    print(f"verdict: {'PASS' if verdict else 'FAIL'}")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
