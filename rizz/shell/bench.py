"""``rizz bench``: several policies over the same stream and model, side by side.

Every policy sees the same stream order, model, verifiers and budget. One response cache
(``BENCH_DIR/responses.sqlite``) is shared by all policies, so an identical prompt (e.g. the
judge's question about an input, or any prompt before memory differs) is paid for once.
Each policy's RUN_DIR is ``BENCH_DIR/<policy name>/``; a crash or Ctrl-C resumes like
``rizz run`` when the same command is run again.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from rizz.shell.policy_file import load_policy
from rizz.shell.progress import StepProgress
from rizz.shell.run import run_stream

__all__ = ["DEMO_POLICIES", "run_bench"]

#: The policies of the README's main job.
DEMO_POLICIES = ("frozen", "default")


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
) -> dict[str, Any]:
    """Run ``policies`` over ``stream`` into ``out`` and write the report; returns results.

    Args:
      policies: policy files or shipped names; each run goes to ``out/<policy name>``.
      model: a backend, already wrapped in the shared response cache by the caller.
      budget: prompt-budget cap in tokens, the same for every policy.
      progress: optional ``rich.progress.Progress``; one bar per policy.
      peer_model: a :class:`rizz.shell.peers.setup.PeerModel` when ``policies`` has ``peer:NAME``
        entries (run by :func:`rizz.shell.peers.run_peer.run_peer` into ``out/peer:NAME``,
        their calls through a recording proxy whose replies are cached in
        ``out/peer-responses.sqlite``).
    Raises:
      PolicyError, StreamError, RunDirBusy, RunDirMismatch, ValueError (two policies with one name).
    """
    from rizz.shell.streams import read_stream

    from rizz.shell.peers.run_peer import is_peer

    out = Path(out)
    loaded = [(p, None if is_peer(p) else load_policy(p)) for p in policies]
    names = [p if pol is None else pol.name for p, pol in loaded]
    if any(pol is None for _, pol in loaded) and peer_model is None:
        raise ValueError("peer entries need the bench's peer model path (see rizz.shell.peers.setup)")
    if len(set(names)) != len(names):
        raise ValueError(f"policy names must differ (they name the run folders): {names}")
    total = len(read_stream(stream, skip_bad=False).elements)
    total = min(total, limit) if limit is not None else total
    proxy = None
    for source, pol in loaded:
        if pol is None:
            from rizz.shell.peers.proxy import CallProxy
            from rizz.shell.peers.run_peer import run_peer
            from rizz.shell.policy_file import load_policy as _lp

            proxy = proxy or CallProxy(peer_model.upstream, cache=out / "peer-responses.sqlite")
            on_peer = StepProgress(progress, f"{source:>22}", total, echo=log)
            default = _lp("default")
            try:
                from rizz.shell.embed import _bundled_model_dir

                emb_path = str(_bundled_model_dir())
            except RuntimeError:
                emb_path = None
            summary = run_peer(stream, source.partition(":")[2], out / source, model, proxy, peer_model.model_id, limit=limit,
                               rendering=rendering or peer_model.rendering, write_threshold=default.write_threshold,
                               embedder_path=emb_path, on_step=lambda rec: on_peer(rec, None), log=log)
            on_peer.finish(summary["steps"])
            continue
        on_step = StepProgress(progress, f"{pol.name:>22}", total, echo=log)
        summary = run_stream(stream, pol, source, out / pol.name, model, embedder, limit=limit,
                             rendering=rendering or (peer_model.rendering if peer_model is not None else None),
                             budget=budget, on_step=on_step, log=log)
        on_step.finish(summary["steps"])
    if proxy is not None:
        proxy.close()
    from rizz.shell.report import build_report

    return build_report(out, names, title=title or f"rizz bench: {Path(stream).name}", command=command)
