"""Runs as Ray tasks: one (policy, stream) RUN_DIR per task, for ``rizz bench --ray`` and ``rizz sweep --ray``.

A task needs no shared file system, so the same code runs on a local ``ray.init()`` and on a
cluster (``ray.init(address=...)``). Everything travels as bytes through Ray's object store:

* in: the stream file's bytes, the resolved :class:`~rizz.core.Policy`, the RUN_DIR so far
  (a tar, empty for a new run: a partial run resumes exactly like ``rizz run``), and a
  snapshot of the bench's response cache (sqlite file bytes, shared by all tasks via
  ``ray.put``);
* out: the finished RUN_DIR (a tar), the response-cache rows the task added, and timings.

The task runs :func:`rizz.engine.run.run_stream` in a temporary folder on its worker with its
own response cache (a copy of the bench's), so the log, snapshots and digests equal a serial
run's. The driver unpacks each RUN_DIR as soon as its task finishes (a failure elsewhere
loses nothing finished; a ``summary.replay.json`` the task's run removed, as its log grew, is
removed from the driver's copy too: :func:`_install`) and merges the new cache rows into the bench's cache with
``INSERT OR IGNORE``, so a re-run pays for no prompt twice.

What differs from a serial bench: timings (``wall_s``, ``latency_s``), and the cache-hit
accounting (``cached`` per call, hence ``model_calls.uncached`` and ``cost_usd``): tasks that
run at once each miss a prompt the serial bench would have paid for once (serially, the
second policy hits the first's entry). Answers, rewards, prompts, token counts and digests
are the same (``tests/shell/test_ray_bench.py``).

Models and embedders are built inside the task by picklable factories (the CLI passes
:func:`model_from_spec` bound to ``--model``), so no model crosses the wire.
"""

from __future__ import annotations

import io
import json
import socket
import sqlite3
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from rizz.adapters.embedder import Embedder
from rizz.adapters.models import load_model
from rizz.adapters.models.cache import ResponseCache
from rizz.engine.run import run_stream
from rizz.formats.logrecord import opens_step
from rizz.formats.wording import plural
from rizz.store.runlog import RunDir, write_json_atomic

__all__ = ["RunSpec", "TaskResult", "driver_torch_threads", "merge_cache_rows", "model_from_spec", "pinned_embedder", "ray_session",
           "run_specs_on_ray"]

#: RUN_DIR entries never shipped back (the lock belongs to the worker's process).
_SKIP = {".lock", ".lock.pid"}


@attrs.frozen
class RunSpec:
    """One task: ``stream`` (path as recorded in run.json) through ``policy`` into ``out``.

    Attributes:
      label: shown in log lines and timings, e.g. the policy name.
      stream: the stream file on the driver; its bytes are shipped to the task.
      policy: the resolved policy record; ``policy_source`` is what run.json records.
      out: the RUN_DIR on the driver (unpacked there when the task ends).
      limit, rendering, budget: as :func:`rizz.engine.run.run_stream`.
    """

    label: str
    stream: Path
    policy: Any
    policy_source: str
    out: Path
    limit: int | None = None
    rendering: str | None = None
    budget: int | None = None


@attrs.frozen
class TaskResult:
    """What the driver keeps of a finished task (seconds are wall-clock on the worker)."""

    label: str
    summary: dict[str, Any]
    wall_s: float
    steps_run: int
    node: str
    new_cache_rows: int


def model_from_spec(spec: str, cache: str) -> Any:
    """``--model SPEC`` built on the worker with its own response cache file ``cache``."""
    return load_model(spec, cache=cache)


def pinned_embedder(torch_threads: int) -> Any:
    """The default :class:`~rizz.adapters.embedder.Embedder` with torch using ``torch_threads`` threads.

    A sentence's embedding depends, in its last bits, on torch's intra-op thread count
    (measured: one text at a time, 1 vs 2 threads give different float32 bytes), and Ray
    starts workers with ``OMP_NUM_THREADS=1``. Pinning the driver's count makes a task's
    embeddings, hence its digests, equal the serial bench's on the same kind of CPU.
    """
    import torch

    torch.set_num_threads(int(torch_threads))
    return Embedder()


def driver_torch_threads() -> int:
    """torch's intra-op thread count in this process (what a serial bench's embedder uses)."""
    import torch

    return int(torch.get_num_threads())


def _steps_logged(log: Path) -> int:
    """Answered/stepped elements in a log (distill and other record kinds not counted)."""
    if not log.exists():
        return 0
    n = 0
    for line in log.read_bytes().splitlines():
        try:
            n += opens_step(json.loads(line))
        except ValueError:
            pass  # a torn last line: not a record
    return n


def _tar_dir(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if root.is_dir():
            for p in sorted(root.rglob("*")):
                rel = p.relative_to(root)
                if rel.parts[0] in _SKIP or p.suffix == ".tmp":
                    continue
                tar.add(p, arcname=str(rel), recursive=False)
    return buf.getvalue()


def _untar(data: bytes, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(root, filter="data")


def _install(data: bytes, root: Path) -> None:
    """Unpack a finished task's RUN_DIR over the driver's copy: its files replace theirs, and a
    ``summary.replay.json`` the task's run removed (the first record it appended does:
    :meth:`~rizz.store.runlog.RunDir.append`) is removed here too, as it no longer describes
    the run."""
    _untar(data, root)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        shipped = set(tar.getnames())
    if "summary.replay.json" not in shipped:
        (root / "summary.replay.json").unlink(missing_ok=True)


def _cache_keys(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with sqlite3.connect(str(path)) as db:
        try:
            return {k for (k,) in db.execute("SELECT key FROM responses")}
        except sqlite3.OperationalError:  # no table yet
            return set()


def _cache_rows(path: Path, skip: set[str]) -> list[tuple[str, str, str, float]]:
    if not path.exists():
        return []
    with sqlite3.connect(str(path)) as db:
        rows = db.execute("SELECT key, model, generation, created FROM responses").fetchall()
    return [r for r in rows if r[0] not in skip]


def _snapshot_cache(path: Path) -> bytes:
    """The cache's content as one sqlite file (WAL folded in), or b"" when there is none."""
    if not path.exists():
        return b""
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "c.sqlite"
        src = sqlite3.connect(str(path))
        out = sqlite3.connect(str(dst))
        with out:
            src.backup(out)
        src.close()
        out.close()
        return dst.read_bytes()


def merge_cache_rows(path: Path, rows: Sequence[tuple[str, str, str, float]]) -> int:
    """Add ``rows`` (key, model, generation JSON, created) to the cache at ``path``; keep existing keys.

    Returns the number of rows added. The cache's schema is made by
    :class:`~rizz.adapters.models.cache.ResponseCache` when the file is new.
    """
    with ResponseCache(path) as cache:
        cache.create()  # the file and its table, if not there yet
    with sqlite3.connect(str(path), timeout=30.0) as db:
        before = db.total_changes
        db.executemany("INSERT OR IGNORE INTO responses (key, model, generation, created) VALUES (?, ?, ?, ?)", rows)
        return db.total_changes - before


def _run_task(spec: RunSpec, stream_bytes: bytes, run_tar: bytes, cache_bytes: bytes,
              model_factory: Callable[[str], Any], embedder_factory: Callable[[], Any]) -> dict[str, Any]:
    """Body of one Ray task (also callable in-process): see the module docstring."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rizz-task-") as tmp:
        tmp_p = Path(tmp)
        stream = tmp_p / "stream" / spec.stream.name
        stream.parent.mkdir()
        stream.write_bytes(stream_bytes)
        run_dir = tmp_p / "run"
        _untar(run_tar, run_dir)
        steps_before = _steps_logged(run_dir / "log.jsonl")
        cache = tmp_p / "responses.sqlite"
        if cache_bytes:
            cache.write_bytes(cache_bytes)
        known = _cache_keys(cache)
        model = model_factory(str(cache))
        summary = run_stream(stream, spec.policy, spec.policy_source, run_dir, model, embedder_factory(), limit=spec.limit,
                             rendering=spec.rendering, budget=spec.budget, log=lambda m: print(f"[{spec.label}] {m}", file=sys.stderr))
        meta_path = run_dir / "run.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("stream") != str(spec.stream):  # record the driver's path, as a serial run does
            meta["stream"] = str(spec.stream)
            write_json_atomic(meta_path, meta)
        getattr(getattr(model, "cache", None), "close", lambda: None)()
        rows = _cache_rows(cache, known)
        return {"run_tar": _tar_dir(run_dir), "rows": rows, "summary": summary, "wall_s": time.perf_counter() - t0,
                "steps_run": summary["steps"] - steps_before, "node": socket.gethostname()}


def ray_session(address: str | None, num_cpus: int | None = None):  # noqa: ANN201
    """Context manager: an initialised Ray for the block.

    ``address``: ``"local"`` (or None) starts a local Ray on this machine (``num_cpus``: default
    all cores); anything else (``auto``, ``HOST:PORT``, ``ray://HOST:10001``) joins that cluster.
    A Ray already initialised by the caller is used as it is and left running.
    Raises RuntimeError when the ``ray`` package is missing (``pip install 'rizz[ray]'``).
    """
    from contextlib import contextmanager

    @contextmanager
    def cm():  # noqa: ANN202
        try:
            import ray
        except ImportError as e:
            raise RuntimeError("--ray needs the 'ray' package: pip install 'rizz[ray]'") from e
        if ray.is_initialized():
            yield ray
            return
        kw: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
        if address in (None, "local"):
            kw["num_cpus"] = num_cpus
        else:
            kw["address"] = address
        ray.init(**kw)
        try:
            yield ray
        finally:
            ray.shutdown()

    return cm()


def run_specs_on_ray(specs: Sequence[RunSpec], cache: Path, *, model_factory: Callable[[str], Any],
                     embedder_factory: Callable[[], Any], address: str | None = None, num_cpus: int | None = None,
                     task_cpus: float = 1.0, log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> list[TaskResult]:
    """Run each spec as a Ray task; unpack each RUN_DIR into ``spec.out`` as it finishes.

    Args:
      cache: the bench's response cache (sqlite); read before, merged into after each task.
      model_factory: picklable ``cache_path -> backend`` (e.g. ``partial(model_from_spec, "embedded")``).
      embedder_factory: picklable ``() -> embedder`` (e.g. :class:`rizz.adapters.embedder.Embedder`).
      address, num_cpus: see :func:`ray_session`; ``task_cpus``: CPUs Ray reserves per task.
    Returns:
      One :class:`TaskResult` per spec, in the order of ``specs``.
    Raises:
      The first task's own exception (RunDirMismatch, StreamError, ModelError, ...) after every
      other task has finished and been saved.
    """
    from contextlib import ExitStack

    cache = Path(cache)
    with ExitStack() as locks, ray_session(address, num_cpus) as ray:
        for spec in specs:  # the driver holds each RUN_DIR while its task runs elsewhere (RunDirBusy otherwise)
            locks.enter_context(RunDir(spec.out))
        remote = ray.remote(num_cpus=task_cpus, max_retries=0)(_run_task)
        cache_ref = ray.put(_snapshot_cache(cache))
        refs = {}
        for spec in specs:
            run_tar = _tar_dir(spec.out) if spec.out.is_dir() else b""
            refs[remote.remote(spec, spec.stream.read_bytes(), run_tar, cache_ref, model_factory, embedder_factory)] = spec
        results: dict[str, TaskResult] = {}
        first_error: BaseException | None = None
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            spec = refs[done[0]]
            try:
                out = ray.get(done[0])
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None) or e
                log(f"{spec.label}: task failed: {cause}")
                first_error = first_error or cause
                continue
            _install(out["run_tar"], spec.out)
            added = merge_cache_rows(cache, out["rows"])
            results[spec.label] = TaskResult(spec.label, out["summary"], round(out["wall_s"], 3), out["steps_run"], out["node"], added)
            log(f"{spec.label}: {plural(out['summary']['steps'], 'step')} ({out['steps_run']} run here) in {out['wall_s']:.1f} s on {out['node']}")
        if first_error is not None:
            raise first_error
    return [results[s.label] for s in specs]

