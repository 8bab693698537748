"""``rizz bench``: several policies over the same stream and model, side by side.

Every policy sees the same stream order, model, verifiers and budget. One response cache
(``BENCH_DIR/responses.sqlite``) is shared by all policies, so an identical prompt (e.g. the
judge's question about an input, or any prompt before memory differs) is paid for once.
Each policy's RUN_DIR is ``BENCH_DIR/<policy name>/``; a crash or Ctrl-C resumes like
``rizz run`` when the same command is run again.

With ``ray_address`` (``rizz bench --ray [ADDRESS]``) each policy's run is a Ray task
(:mod:`rizz.lab.ray_tasks`): same RUN_DIRs, digests and results.json except timings and
cache-hit counts; each task's response cache is merged into ``BENCH_DIR/responses.sqlite``
afterwards, and ``BENCH_DIR/ray.json`` records each task's wall time and node.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rizz.adapters.embedder import bundled_model_dir
from rizz.engine.run import run_stream
from rizz.formats.policy_file import load_policy, policy_label
from rizz.formats.streams import read_stream
from rizz.lab.peers.proxy import CallProxy
from rizz.lab.peers.run_peer import is_peer, run_peer
from rizz.lab.progress import StepProgress
from rizz.lab.ray_tasks import RunSpec, driver_torch_threads, pinned_embedder, run_specs_on_ray
from rizz.lab.report import build_report
from rizz.store.runlog import write_json_atomic

__all__ = ["DEMO_POLICIES", "refused_run_options", "run_bench"]

#: The policies of the README's main job.
DEMO_POLICIES = ("frozen", "default")


def refused_run_options(stream: str | Path, policies: Sequence[str], *, ray: bool, skip_bad: bool, snapshot_every: int,
                        durability: str, user_model: bool = False) -> str | None:
    """Why a bench cannot take these ``rizz run`` options (one line), or None: ``skip_bad`` with
    ``peer:NAME`` entries (a peer reads the stream whole); ``skip_bad``, a ``snapshot_every``
    other than 50 or a ``durability`` other than ``disk`` on Ray (a task runs with the
    defaults); a ``user_model`` or peer entries on Ray. ``rizz bench`` asks before the model
    loads; :func:`run_bench` raises it."""
    if skip_bad and (peers := [p for p in policies if is_peer(p)]):
        return (f"--skip-bad cannot run with peer entries yet ({', '.join(peers)} read the stream whole); "
                f"fix the stream (rizz streams check {stream}) or leave them out")
    flags = [f for f, given in (("--skip-bad", skip_bad), ("--snapshot-every", snapshot_every != 50),
                                ("--durability", durability != "disk")) if given]
    if ray and flags:
        return f"{', '.join(flags)} cannot run with --ray yet (a Ray task runs with rizz run's defaults); run without --ray"
    if ray and user_model:
        return "--user-model cannot run with --ray yet (each Ray task builds only --model); run without --ray"
    if ray and any(is_peer(p) for p in policies):
        return "peer:NAME entries cannot run with --ray (they share one in-process model server); run them without --ray"
    return None


def run_bench(
    stream: str | Path,
    policies: Sequence[str],
    out: str | Path,
    model: Any,
    embedder: Any,
    *,
    limit: int | None = None,
    rendering: str | None = None,
    budget: int | None = None,
    command: str = "",
    title: str | None = None,
    progress: Any = None,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    peer_model: Any = None,
    ray_address: str | None = None,
    model_factory: Callable[[str], Any] | None = None,
    embedder_factory: Callable[[], Any] | None = None,
    num_cpus: int | None = None,
    user_model: Any = None,
    skip_bad: bool = False,
    snapshot_every: int = 50,
    durability: str = "disk",
    cache: str | Path | None = None,
    replace_unstarted: bool = False,
) -> dict[str, Any]:
    """Run ``policies`` over ``stream`` into ``out`` and write the report; returns results.

    Args:
      policies: policy files or shipped names; each run goes to ``out/<policy name>``.
      model: a backend, already wrapped in the shared response cache by the caller.
      budget: prompt-budget cap in tokens, the same for every policy.
      progress: optional ``rich.progress.Progress``; one bar per policy.
      peer_model: a :class:`rizz.lab.peers.setup.PeerModel` when ``policies`` has ``peer:NAME``
        entries (run by :func:`rizz.lab.peers.run_peer.run_peer` into ``out/peer:NAME``,
        their calls through a recording proxy whose replies are cached in
        ``out/peer-responses.sqlite``).
      ray_address: run each policy as a Ray task: ``"local"`` starts a local Ray
        (``num_cpus`` cores, default all), else a cluster address (``auto``, ``HOST:PORT``,
        ``ray://HOST:10001``). Then ``model`` is unused and ``model_factory``
        (picklable ``cache_path -> backend``) builds the model on each worker;
        ``embedder_factory`` defaults to :func:`rizz.lab.ray_tasks.pinned_embedder` with
        this process's torch thread count (so embeddings are bit-identical to a serial run's).
      user_model: τ-bench's simulated customer for every rizz policy (None: ``model``; see
        ``rizz run --user-model``); not with ``ray_address``.
      skip_bad, snapshot_every, durability: as :func:`rizz.engine.run.run_stream`, for every rizz
        policy's run (``rizz run``'s ``--skip-bad``, ``--snapshot-every``, ``--durability``): with
        ``skip_bad`` every policy skips the same bad lines, each RUN_DIR's ``bad_lines.json`` lists
        them and the report names them. Not with ``ray_address`` (a Ray task runs with the
        defaults); ``skip_bad`` not with ``peer:NAME`` entries (they read the stream whole).
      cache: with ``ray_address``, the response cache the tasks read and merge into (default
        ``out/responses.sqlite``); serially ``model`` is already wrapped in its cache.
      replace_unstarted: as :func:`rizz.engine.run.run_stream` (``rizz bench`` sets it): a rizz
        policy's folder started with other settings whose run recorded nothing is started anew
        with these instead of refused. Serial runs only (a Ray task runs with the defaults).
    Raises:
      PolicyError, StreamError, RunDirBusy, RunDirMismatch, ValueError (two policies with one name;
      :func:`refused_run_options`).
    """
    out = Path(out)
    loaded = [(p, None if is_peer(p) else load_policy(p)) for p in policies]
    # a run's folder and row: the policy's name (a copy of a shipped policy with a key changed: its file's stem)
    names = [p if pol is None else policy_label(p, pol) for p, pol in loaded]
    if any(pol is None for _, pol in loaded) and peer_model is None:
        raise ValueError("peer entries need the bench's peer model path (see rizz.lab.peers.setup)")
    if len(set(names)) != len(names):
        raise ValueError(f"policy names must differ (they name the run folders): {names}")
    if why := refused_run_options(stream, policies, ray=ray_address is not None, skip_bad=skip_bad, snapshot_every=snapshot_every,
                                  durability=durability, user_model=user_model is not None):
        raise ValueError(why)
    total = len(read_stream(stream, skip_bad=skip_bad).elements)
    total = min(total, limit) if limit is not None else total
    if ray_address is not None:
        _run_on_ray(stream, loaded, names, out, limit=limit, rendering=rendering, budget=budget, log=log, address=ray_address,
                    model_factory=model_factory, embedder_factory=embedder_factory, num_cpus=num_cpus,
                    cache=Path(cache) if cache is not None else out / "responses.sqlite")
    proxy = None
    width = max((len(name) for name in names), default=0)  # the bars' labels aligned
    for (source, pol), name in zip(loaded, names) if ray_address is None else ():
        if pol is None:
            proxy = proxy or CallProxy(peer_model.upstream, cache=out / "peer-responses.sqlite", backend=peer_model.answer_with)
            on_peer = StepProgress(progress, f"{source:>{width}}", total, echo=log)
            default = load_policy("default")
            try:
                emb_path = str(bundled_model_dir())
            except RuntimeError:
                emb_path = None
            summary = run_peer(stream, source.partition(":")[2], out / source, model, proxy, peer_model.model_id, limit=limit,
                               rendering=rendering or peer_model.rendering, write_threshold=default.write_threshold,
                               embedder_path=emb_path, budget=budget, on_step=lambda rec: on_peer(rec, None), log=log)  # noqa: B023 - run_peer returns first
            on_peer.finish(summary["steps"])
            continue
        on_step = StepProgress(progress, f"{name:>{width}}", total, echo=log)
        summary = run_stream(stream, pol, source, out / name, model, embedder, limit=limit,
                             rendering=rendering or (peer_model.rendering if peer_model is not None else None),
                             budget=budget, on_step=on_step, on_resume=on_step.resume, log=log, user_model=user_model,
                             skip_bad=skip_bad, snapshot_every=snapshot_every, durability=durability, replace_unstarted=replace_unstarted)
        on_step.finish(summary["steps"])
    if proxy is not None:
        proxy.close()
    return build_report(out, names, title=title or f"rizz bench: {Path(stream).name}", command=command)


def _run_on_ray(stream: str | Path, loaded: list, names: list[str], out: Path, *, limit: int | None, rendering: str | None, budget: int | None,
                log: Callable[[str], None], address: str, model_factory: Callable[[str], Any] | None,
                embedder_factory: Callable[[], Any] | None, num_cpus: int | None, cache: Path) -> None:
    """Each (policy, stream) as a Ray task, in the run folder ``out/<name>`` of ``names`` (the
    policies' labels, :func:`~rizz.formats.policy_file.policy_label`); writes ``out/ray.json`` (per-task wall s, node).
    ``cache``: the response cache each task reads and is merged into."""
    import time

    if model_factory is None:
        raise ValueError("a Ray bench needs model_factory (the model is built on each worker)")
    if embedder_factory is None:  # the default embedder, with this process's torch thread count
        from functools import partial

        embedder_factory = partial(pinned_embedder, driver_torch_threads())
    specs = [RunSpec(name, Path(stream), pol, source, out / name, limit, rendering, budget) for (source, pol), name in zip(loaded, names)]
    t0 = time.perf_counter()
    done = run_specs_on_ray(specs, cache, model_factory=model_factory, embedder_factory=embedder_factory,
                            address=address, num_cpus=num_cpus, log=log)
    write_json_atomic(out / "ray.json", {
        "address": address, "wall_s": round(time.perf_counter() - t0, 3),
        "tasks": [{"policy": r.label, "wall_s": r.wall_s, "steps": r.summary["steps"], "steps_run": r.steps_run,
                   "node": r.node, "new_cache_rows": r.new_cache_rows} for r in done]})
