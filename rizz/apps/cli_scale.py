"""``rizz sweep`` and ``rizz serve`` (docs/ray.md, docs/serve.md); :func:`register` adds them to the ``rizz`` app."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

from rizz.extras import MissingExtraError, extra_needed

with extra_needed("cli", "the rizz command"):
    import typer

from rizz.adapters.models import ModelError, ModelUnavailableError, load_model
from rizz.adapters.models.spec import spec_help
from rizz.apps.cli_errors import check_out, check_rendering, fail, load_policy_or_exit
from rizz.apps.cli_help import Command
from rizz.apps.serve.app import load_keys
from rizz.apps.serve.run import is_loopback, serve as do_serve
from rizz.formats.policy_file import PolicyError
from rizz.formats.streams import StreamError
from rizz.lab.sweep_report import format_sweep_table
from rizz.store.runlog import RunDirBusy, RunDirMismatch

__all__ = ["register", "serve", "sweep"]

#: ``--model`` help (``\\[`` keeps rich from reading ``[#MODEL]`` as markup).
MODEL_HELP = spec_help().replace("[", "\\[")


def register(app: typer.Typer) -> None:
    """Add ``sweep`` and ``serve`` to ``app``."""
    app.command(cls=Command)(sweep)
    app.command(cls=Command)(serve)


def sweep(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML): base, grid, streams, seeds, baselines, limit, budget, model (rizz/lab/sweep.py)."),
    out: Path = typer.Option(..., "--out", "-o", metavar="SWEEP_DIR", help="SWEEP_DIR: `cells/STREAM[.SEED]/POLICY/` runs, report.md, results.json, plots."),
    model: str | None = typer.Option(None, "--model", "-m", metavar="SPEC", help=MODEL_HELP + " (default: the spec's model, else embedded)"),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, metavar="N", help="First N elements of each stream (overrides the spec's limit)."),
    ray: str | None = typer.Option(None, "--ray", metavar="[ADDRESS]",
                                      help="Run each (policy, cell) as a Ray task: a local Ray by default (local), or a cluster (auto | HOST:PORT | ray://HOST:10001)."),
) -> None:
    """A grid over policy fields x streams x seeds: validated policies, run (optionally on Ray), one report.

    Every grid point is validated before anything runs; rerunning the same command resumes.
    """
    # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz serve` do not need
    from rizz.lab.sweep import SweepError, expand, load_sweep, run_sweep

    try:
        parsed = load_sweep(spec)
        if limit is not None:
            parsed = attrs.evolve(parsed, limit=limit)
        expand(parsed)  # every grid point valid before anything is written
    except (SweepError, PolicyError) as e:
        fail(str(e))
    check_out(out, "results.json", "SWEEP_DIR", also=("responses.sqlite", "cells", "streams"))
    try:
        data = run_sweep(parsed, out, model=model, ray_address=ray, command="rizz " + " ".join(sys.argv[1:]),
                         log=lambda m: typer.echo(m, err=True))
    except (SweepError, PolicyError, StreamError, RunDirBusy, RunDirMismatch, ModelError, ValueError, RuntimeError) as e:
        fail(str(e))
    except KeyboardInterrupt:
        fail(f"interrupted; finished runs are in {out}/cells/; run the same command again to resume", 130)
    rows = format_sweep_table(data)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    typer.echo(f"\nreport: {out / 'report.md'}   plots: {out}/sweep_*.png   results: {out / 'results.json'}")


def serve(
    data: Path = typer.Option(..., "--data", metavar="DATA", help="Folder of tenants: one durable live session per tenant in `DATA/TENANT/`."),
    policy: str = typer.Option("default", "--policy", "-p", metavar="POLICY", help="Policy YAML file or shipped name, for every tenant."),
    model: str = typer.Option("embedded", "--model", "-m", metavar="SPEC", help=MODEL_HELP + " (one instance, queued fairly between tenants)"),
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST", help="Address to listen on; without --keys only loopback is accepted."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, metavar="PORT", help="TCP port."),
    keys: Path | None = typer.Option(None, "--keys", metavar="FILE", help="YAML file: tenant -> API key (or list of keys), sent as 'Authorization: Bearer KEY'."),
    queue_timeout: float = typer.Option(300.0, "--queue-timeout", min=0.1, metavar="SECONDS", help="Longest wait (s) for the shared model before 504."),
    max_body_kib: int = typer.Option(1024, "--max-body-kib", min=1, metavar="KIB", help="Largest request body (KiB); a larger one gets 413 unread."),
    rendering: str | None = typer.Option(None, metavar="MODE", help="raw | chat | chat-turns (default: chat for the shipped Qwen models and the API backends, raw for SmolLM2 and a gguf:PATH); "
                                            "a one-line question to a GGUF model needs chat for an answer. Fixed per tenant folder once it exists."),
) -> None:
    """Serve one durable live session per tenant over HTTP (FastAPI): answer, verdict, state, branches, /metrics, /docs.

    Each id is answered once per tenant: an answer for an id already answered (pending,
    folded or expired) is refused with 409.
    """
    pol = load_policy_or_exit(policy)
    check_rendering(rendering)
    if keys is None and not is_loopback(host):
        fail(f"--host {host}: without --keys rizz serve listens on loopback only (127.0.0.1, ::1, localhost)")
    if keys is not None:
        try:
            load_keys(str(keys))
        except ValueError as e:
            fail(str(e))
    if data.exists() and not data.is_dir():
        fail(f"--data {data}: is a file; give a folder")
    data.mkdir(parents=True, exist_ok=True)
    try:
        backend = load_model(model)
        do_serve(data, pol, backend, host=host, port=port, keys_file=str(keys) if keys else None, queue_timeout_s=queue_timeout,
                 say=lambda m: typer.echo(m, err=True), max_body_bytes=max_body_kib * 1024, rendering=rendering)
    except ImportError as e:  # a MissingExtraError names its extra itself
        fail(str(e) if isinstance(e, MissingExtraError) else f"rizz serve needs the serve extra (pip install 'rizz[serve]'): {e}")
    except (ValueError, ModelUnavailableError, RuntimeError) as e:
        fail(str(e))
