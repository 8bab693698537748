"""The ``rizz`` command line (specs/stream-format.md): run, replay, diff, inspect, convert, policy, streams, bench, sweep, serve, demo, view."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from rizz.extras import extra_needed

with extra_needed("cli", "the rizz command"):
    import typer

from rizz.adapters.embedder import Embedder
from rizz.adapters.models import ModelConnectionError, ModelRequestError, ModelUnavailableError, load_model
from rizz.adapters.models.cache import replies_held
from rizz.adapters.models.spec import backend_name, check_spec, spec_help
from rizz.apps.cli_errors import check_cache, check_durability_option, check_out, check_rendering, fail, load_policy_or_exit
from rizz.apps.cli_help import Command, Group
from rizz.apps.cli_streams import app as streams_app
from rizz.core import policy_schema
from rizz.core.policy import CompilerPolicy
from rizz.formats.policy_file import (
    POLICY_DIR,
    PolicyError,
    constants_markdown,
    dump_policy,
    load_policy,
    name_clash_note,
    policy_differences,
    policy_header,
    policy_label,
    shipped_policies,
)
from rizz.formats.streams import StreamError, read_stream
from rizz.formats.wording import plural
from rizz.lab.diff import branch_table, diff_run, inspect_run, label_from_legend
from rizz.lab.episode_view import episode_rows, episodes_text
from rizz.lab.overflow import overflow_note
from rizz.lab.peers.setup import peer_model
from rizz.lab.progress import StepProgress, busy_cores, new_progress, nothing_left, time_estimate
from rizz.lab.report import build_report, format_table
from rizz.store.convert import ConvertError, convert_run_dir, run_dirs_in
from rizz.store.durable import EXIT_DISK_FULL, disk_full
from rizz.store.runlog import RunDir, RunDirBusy, RunDirCorrupt, RunDirMismatch

__all__ = ["app", "main"]

#: Shipped real data slices (repository root ``data/``).
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
#: Demo stream length per policy: the first 60 elements of the interleaved slice (7-14 per task), about 7 minutes with the Qwen 1.5B on 2 idle cores (README).
DEMO_LIMIT = 60
#: Demo prompt budget (tokens): keeps a step of the embedded model on 2 cores to seconds.
DEMO_BUDGET = 2048
#: Seconds per demo step of each policy with the embedded model (the Qwen2.5-Coder 1.5B) on 2
#: cores: `make demo` in a fresh clone, results/2026-12-05-demo-fresh-clone.md (the policies'
#: wall times over the first 60 elements at --budget 2048, distillations included: frozen
#: 209.0 s, default 202.8 s; default answers a step whose prompt has no memory block from
#: frozen's cached reply).
DEMO_STEP_SECONDS = {"frozen": 209.0 / 60, "default": 202.8 / 60}
#: Seconds of that demo that were not its steps' (loading the model and the embedder): its
#: 6 min 57 s in all less the steps' 209.0 + 202.8 s (results/2026-12-05-demo-fresh-clone.md).
DEMO_LOAD_SECONDS = 417.0 - 209.0 - 202.8
#: ``rizz bench``'s policies when ``-P`` is not given: the baseline, RIZZ and the paper's ablations.
BENCH_POLICIES = "frozen,default,single-branch,no-procedural,no-anti-fragmentation"

#: ``--model`` help (``\\[`` keeps rich from reading ``[#MODEL]`` as markup).
MODEL_HELP = spec_help().replace("[", "\\[")  # every spec form and option (rizz/adapters/models/spec.py)
#: The shipped policy names, read from POLICY_DIR (docs/policies.md describes each).
POLICY_HELP = "Policy YAML file, or a shipped name (policies/): " + ", ".join(sorted(p.stem for p in POLICY_DIR.glob("*.yaml"))) + "."
RENDERING_HELP = "raw | chat | chat-turns (default: chat for the shipped Qwen models and the API backends, raw for SmolLM2 and a gguf:PATH)."
#: Smallest prompt budget a policy accepts (the ``compiler.token_budget`` minimum).
MIN_BUDGET = int(attrs.fields(CompilerPolicy).token_budget.metadata["min"])
#: The ``summary.json`` fields ``rizz run`` prints when it ends.
RUN_SUMMARY_KEYS = ("steps", "answered", "mean_reward", "model_calls", "branches", "state_digest")
#: The order of ``branches``' counts in the printed summary (``summary.json`` stores its keys sorted).
_BRANCH_KEYS = ("total", "active")


def _summary_text(summary: dict[str, Any]) -> str:
    """The JSON ``rizz run`` prints when it ends: :data:`RUN_SUMMARY_KEYS` of ``summary``, in
    that order, ``branches`` as ``total``, ``active``: the same for a run just made and for one
    read back from ``summary.json`` (an already finished run), whose keys are sorted."""
    shown = {k: summary[k] for k in RUN_SUMMARY_KEYS}
    branches = shown["branches"]
    if isinstance(branches, dict):
        shown["branches"] = {**{k: branches[k] for k in _BRANCH_KEYS if k in branches}, **branches}
    return json.dumps(shown, indent=1)

# A flag (a bool option that takes no value) is declared with metavar="": typer's rich help
# would print <bool> in its type column, as if it took one; every command and group is of
# rizz/apps/cli_help.py's classes, which do the same for typer's own --help.
app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    help="rizz: a frozen LLM that improves over a stream of mixed tasks through routed, verifier-gated memory (RIZZ).",
)
policy_app = typer.Typer(cls=Group, no_args_is_help=True, add_completion=False, help="List, check, show and compare YAML policies.")
app.add_typer(policy_app, name="policy")
app.add_typer(streams_app, name="streams")


def version_text() -> str:
    """``rizz --version``'s line: the version of the installed ``rizz`` distribution
    (:func:`importlib.metadata.version`; an editable install's too), else, for a source tree
    run without installing it, the version its ``pyproject.toml`` declares and where it is."""
    try:
        return f"rizz {metadata.version('rizz')}"
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            version = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, ValueError, KeyError):
            return f"rizz (version unknown: not installed, and no version in {pyproject})"
        return f"rizz {version} (not installed: the source tree at {pyproject.parent})"


def _say_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _rizz(version: bool = typer.Option(False, "--version", metavar="", is_eager=True, callback=_say_version,
                                        help="Print rizz's version and exit.")) -> None:
    """rizz: a frozen LLM that improves over a stream of mixed tasks through routed, verifier-gated memory (RIZZ)."""


# the names this module's commands call (public in cli_errors, shared with cli_scale and rizz view)
_fail, _check_out, _check_rendering, _load_policy_or_exit = fail, check_out, check_rendering, load_policy_or_exit


def _resume_hint(out: Path, per_policy: bool = False) -> str:
    """What a stopped run (``per_policy``: a bench's runs, ``out/<policy>/``) keeps and how to
    go on (the same words for every stop); names the log only once a step is in it."""
    logs = list(out.glob("*/log.jsonl")) if per_policy else [out / "log.jsonl"]
    if not any(p.is_file() and p.stat().st_size for p in logs):
        return "no step had finished, so there is nothing to keep; run the same command again to start"
    return f"every finished step is in {out / '<policy>' / 'log.jsonl' if per_policy else out / 'log.jsonl'}; run the same command again to resume"


def _discard_failed_start(out: Path, new_dir: bool, was_empty: bool) -> None:
    """After ``rizz run`` failed before its first step was recorded: a RUN_DIR that was not
    there (or was an empty folder) before is removed (emptied) when
    :func:`~rizz.engine.run.discard_unstarted` finds it unstarted and its cache unused."""
    # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s)
    from rizz.engine.run import discard_unstarted

    if was_empty and discard_unstarted(out) and not new_dir:
        out.mkdir(exist_ok=True)


@app.command(cls=Command)
def run(
    stream: Path = typer.Argument(..., help="Stream file (JSONL, specs/stream-format.md)."),
    policy: str = typer.Option("default", "--policy", "-p", metavar="POLICY", help=POLICY_HELP),
    out: Path = typer.Option(..., "--out", "-o", metavar="RUN_DIR", help="RUN_DIR; an unfinished one is resumed, a finished one extended by a larger --limit."),
    model: str = typer.Option("embedded", "--model", "-m", metavar="SPEC", help=MODEL_HELP),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, metavar="N", help="Only the first N elements."),
    skip_bad: bool = typer.Option(False, "--skip-bad", metavar="", help="Record malformed stream lines in RUN_DIR/bad_lines.json and go on."),
    rendering: str | None = typer.Option(None, metavar="MODE", help=RENDERING_HELP),
    cache: Path | None = typer.Option(None, metavar="FILE", help="Response cache (sqlite); default RUN_DIR/responses.sqlite. Share it between runs to pay once per prompt."),
    snapshot_every: int = typer.Option(50, min=1, metavar="N", help="Records between state snapshots (at least; more once a snapshot writes over N × 8 KiB; never over 1000 apart)."),
    budget: int | None = typer.Option(None, "--budget", min=MIN_BUDGET, metavar="TOKENS",
                                      help="Cap the prompt budget (tokens) below the policy's and the model window's, for every policy alike."),
    user_model: str | None = typer.Option(None, "--user-model", metavar="SPEC", help="Model SPEC of τ-bench's simulated customer (default: the same as --model)."),
    durability: str = typer.Option("disk", "--durability", metavar="MODE", help="disk: each step is fsynced before the next (survives a power loss); os: handed to the OS only, fsynced at the end (survives kill -9, not a power loss)."),
) -> None:
    """Run STREAM through RIZZ with POLICY; write RUN_DIR (log, snapshots, summary.json).

    Running the same command again on an unfinished RUN_DIR resumes it; with a larger --limit
    (or none) on a finished one, it goes on from where the run stopped; on a finished one with
    nothing left to run, it says so without loading the model.
    """
    # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz policy` do not need
    from rizz.engine.run import run_stream, unstarted
    from rizz.engine.session import check_resume, finished_run

    pol = _load_policy_or_exit(policy)
    label = policy_label(policy, pol)  # a copy of a shipped policy with a key changed: its file's stem, not the shipped name
    _check_run_options(model, user_model, rendering, durability, cache)  # every option value, before the stream is read
    if not stream.exists():
        _fail(f"stream file not found: {stream}")
    try:
        elements = read_stream(stream, skip_bad=skip_bad).elements  # refuse a bad stream before writing anything
    except StreamError as e:
        _fail(str(e))
    n = len(elements)
    _check_oracle(model, stream, elements, limit)
    _check_out(out, "run.json", "RUN_DIR", also=("responses.sqlite",))
    new_dir = not out.exists()
    was_empty = new_dir or (out.is_dir() and not any(out.iterdir()))  # a failed start leaves it as it was
    out.mkdir(parents=True, exist_ok=True)
    try:
        check_resume(out, stream, pol, budget, policy, limit, backend_name(model))  # before the model loads: refused at once
    except RunDirCorrupt as e:  # run.json or a log record that cannot be read: named, nothing written
        _fail(str(e))
    except RunDirMismatch as e:
        if not unstarted(out):  # a start that failed recorded nothing: run_stream starts it anew with these settings
            _fail(str(e))
    todo = n if limit is None else min(n, limit)
    if note := name_clash_note(policy, pol):
        typer.echo(f"rizz run: {note}", err=True)
    finished = finished_run(out, todo, model, rendering=rendering, user_model=user_model, embedder=Embedder)
    if finished is not None and all(k in finished for k in RUN_SUMMARY_KEYS):  # said before the model loads (up to a minute)
        typer.echo(f"{out}: already finished ({plural(finished['steps'], 'step')}); nothing to run", err=True)
        typer.echo(_summary_text(finished))
        _say_overflow(out, finished, label, None)
        return
    typer.echo(f"rizz run: {todo} of {n} elements of {stream}, policy {label}, into {out}; loading the model {model} ...", err=True)
    try:
        backend = load_model(model, cache=cache or out / "responses.sqlite")
        umodel = load_model(user_model, cache=cache or out / "responses.sqlite") if user_model else None
    except (ValueError, ModelUnavailableError, KeyboardInterrupt) as e:
        if new_dir and not any(out.iterdir()):  # a refused command leaves no RUN_DIR behind
            out.rmdir()
        if isinstance(e, KeyboardInterrupt):
            _fail(f"interrupted; {_resume_hint(out)}", 130)
        _fail(str(e))
    typer.echo(f"model: {backend.name}", err=True)
    try:  # outside the bar's `with`: the bar ends its line before any message is said
        embedder = Embedder()
        with new_progress() as prog:
            on_step = StepProgress(prog, label, min(n, limit) if limit is not None else n, echo=lambda m: typer.echo(m, err=True))
            summary = run_stream(stream, pol, policy, out, backend, embedder, limit=limit, skip_bad=skip_bad,
                                 rendering=rendering, snapshot_every=snapshot_every, on_step=on_step, on_resume=on_step.resume, budget=budget,
                                 user_model=umodel, durability=durability, replace_unstarted=True)
    except (StreamError, RunDirBusy, RunDirMismatch, RunDirCorrupt) as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _discard_failed_start(out, new_dir, was_empty)
        _fail(f"interrupted; {_resume_hint(out)}", 130)
    except (ModelRequestError, ModelConnectionError) as e:  # refused, or unreachable after the retries
        _discard_failed_start(out, new_dir, was_empty)
        _fail(f"{e}\n{_resume_hint(out)}")
    except Exception as e:  # a full disk stops cleanly (specs/reliability.md); anything else propagates
        full = e if isinstance(e, OSError) and "disk full" in str(e) else disk_full(e, "the run", out)
        if full is None:
            raise
        _fail(str(full), EXIT_DISK_FULL)
    typer.echo(_summary_text(summary))
    _say_overflow(out, summary, label, getattr(backend, "context_window", None))


@app.command(cls=Command)
def replay(
    run_dir: Path = typer.Argument(..., help="A RUN_DIR: written by `rizz run`, a live session, or one policy's folder of a `rizz bench`."),
    policy: str | None = typer.Option(None, "--policy", "-p", metavar="POLICY", help="Refold under this policy instead of the run's own (writes summary.replay.json)."),
) -> None:
    """Refold RUN_DIR's log with no model calls; print the final state's digest, and say
    whether it equals the digest the run recorded (summary.json); exit 1 when it does not
    (summary.json is then kept, and the refolded summary written to summary.replay.json).
    A replay that finds the recorded digest writes nothing (a read-only RUN_DIR replays too);
    nor does one of a run with no step yet, which is refused (exit 2).
    A summary.json of a shorter log (a resume that did not finish, a live session's later
    answers) is checked where it ends and, when its digest is found there, rewritten.

    Under another --policy the logged answers and rewards are refolded as they are: the
    memory and branches are that policy's, the rewards the run's (it is not a new run; use
    `rizz run` or `rizz bench` to measure a policy); it writes summary.replay.json and says
    what differs from the run's summary.json (branches, labels, digest).
    """
    # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz policy` do not need
    from rizz.engine.run import ReplayBusy, replay_differences, replay_run, summary_extent

    pol = _load_policy_or_exit(policy) if policy else None
    rd = RunDir(run_dir)
    try:
        nothing = rd.meta_path.is_file() and rd.finished_steps() == 0
    except (OSError, ValueError):  # an unreadable or corrupt log: replay_run names it
        nothing = False
    if nothing:  # as rizz diff words it; no summary is written for a run that holds no step
        _fail(f"the log of {run_dir} has no steps yet: nothing to replay")
    try:
        done = replay_run(run_dir, pol, policy)
    except (FileNotFoundError, ValueError) as e:  # ValueError: a corrupt or unfoldable record, named by log.jsonl:LINE
        _fail(str(e))
    except ReplayBusy as e:  # a replay that writes a summary takes the lock a running run or server holds
        why = {"unrecorded": "summary.json records no digest", "policy": f"the refold under {policy}",
               "differs": "the log refolds to another digest than summary.json's"}.get(e.outcome, "")
        _fail(f"{str(e).split(';')[0]}; replay it once that process has finished (this replay writes {e.path.name}: {why})")
    summary, recorded, stale = done.summary, done.recorded, done.stale
    unwritten = None if done.unwritten is None else str(done.unwritten)  # a RUN_DIR that cannot be written
    typer.echo(summary["state_digest"])  # stdout: the digest alone (scripts read it); what it means goes to stderr
    summary_json = run_dir / "summary.json"

    def say(message: str) -> None:
        typer.echo(message, err=True)

    if done.outcome == "unrecorded":
        say(f"no digest recorded to compare with: {summary_json} is missing, unreadable or holds no state_digest "
            "(a run that has not finished; a live session's directory until its first replay)"
            + ("; it now holds the refolded summary" if done.written else ""))
    elif done.outcome == "policy":
        if done.written:
            say(f"wrote {run_dir / 'summary.replay.json'}: the run's answers and rewards refolded under {summary['policy']}")
        if recorded is None:
            say(f"nothing to compare with: {summary_json} is missing or unreadable (a run that has not finished)")
        else:
            if stale is not None:
                was, now = summary_extent(recorded, summary, stale)
                say(f"{summary_json} is from {was}; the log has {now}: it is compared as it is "
                    f"(`rizz replay {run_dir}` without --policy rewrites it)")
            changed = replay_differences(recorded, summary)
            say(f"differs from the run's summary.json ({recorded.get('policy')}) in: " + "; ".join(changed) if changed
                else f"the same branches, labels and digest as the run's summary.json ({recorded.get('policy')})")
    elif done.outcome == "same":
        say(f"= the digest the run recorded in {summary_json}: its log replays to the same state")
    elif done.outcome == "stale":
        assert recorded is not None and stale is not None
        was, now = summary_extent(recorded, summary, stale)
        how = ("rewrote it" if done.written else "not rewritten" if done.busy is None
               else f"not rewritten while a rizz process ({done.busy.pid_words}) holds the RUN_DIR")
        say(f"{summary_json} is from {was}; the log has {now}: {how} (up to where it ends, the log replays to the "
            "digest it recorded; the rest came after it: a resume that did not finish, or a live session)")
    else:  # "differs": at the log's end, or where a stale summary.json ends
        assert recorded is not None
        if stale is not None:
            was, now = summary_extent(recorded, summary, stale)
            where = f"the log up to where it ends ({was}; the log has {now}) refolds to another state ({stale.digest})"
        else:
            where = "its log refolds to another state"
            counted = recorded.get("log_records")
            if isinstance(counted, int) and counted > summary["log_records"]:
                where += f" (it folded {counted} log records; the log has {summary['log_records']})"
        say(f"≠ the digest the run recorded in {summary_json} ({recorded.get('state_digest')}): {where} "
            f"(written by another version of rizz, or summary.json edited?); summary.json is kept as the run wrote it"
            + (f", the refolded summary is in {run_dir / 'summary.replay.json'}" if done.written else ""))
        if unwritten is not None:
            say(unwritten)
        raise typer.Exit(1)
    if unwritten is not None:
        say(unwritten)


@app.command(cls=Command)
def diff(
    run_dir: Path = typer.Argument(..., help="A RUN_DIR."),
    at: int | None = typer.Option(None, "--at", metavar="STEP", help="First step whose changes to show (default: the log's last step). Steps are numbered from 0: step 0 is the first element (progress counts steps done: 10/84 means steps 0..9)."),
    to: int | None = typer.Option(None, "--to", metavar="STEP", help="Last step to show (default: --at)."),
) -> None:
    """What changed in the state between steps: spawns, merges, writes, quarantine, counters, drops.

    Each step shows its prompt's tokens and budget, and which limit set the budget: the
    policy's compiler.token_budget, --budget, or the model's window less the reply's tokens.
    """
    try:
        typer.echo(diff_run(run_dir, at, to))
    except (ValueError, FileNotFoundError) as e:
        _fail(str(e))


@app.command(cls=Command)
def inspect(run_dir: Path = typer.Argument(..., help="A RUN_DIR."), as_json: bool = typer.Option(False, "--json", metavar="", help="Machine-readable rows (every field)."),
            episodes: bool = typer.Option(False, "--episodes", metavar="", help="The run's agent episodes: request → calls → results → final answer."),
            full: bool = typer.Option(False, "--full", metavar="", help="With --episodes: every event of long episodes."),
            wide: bool = typer.Option(False, "--wide", metavar="", help="Every column, however wide the table (by default columns are dropped to fit the terminal)."),
            at: int | None = typer.Option(None, "--at", metavar="STEP", help="The state after this step, as rizz diff --at counts (default: the final state; with --episodes, those up to this step). Steps are numbered from 0: step 0 is the first element (progress counts steps done: 10/84 means steps 0..9).")) -> None:
    """Branches of the run's final state (--at: after a step): label, where the label came from (judge, fallback, snapped, declared,
    context or placeholder, at which step), traffic, mean reward and memory sizes (--episodes: its episodes).

    The table fits the terminal: the least needed columns are left out and long labels fold
    onto more lines; the memory sizes stay, in one column (e/r/a/c/q: episodes, rules,
    anti-patterns, context, quarantined) where theirs do not fit. Rules are the live ones, as in
    rizz view; those retired by their counters get a column of their own where there is room
    ("retired rules"). --wide shows every column,
    including how the inputs reached each branch (by the judge's label, a snapped label, a
    declared one, or by anchor similarity alone).
    """
    from rich.console import Console

    if episodes:
        try:
            typer.echo(json.dumps(episode_rows(run_dir, at), indent=1) if as_json else episodes_text(run_dir, full=full, at=at))
        except (ValueError, FileNotFoundError) as e:
            _fail(str(e))
        return
    try:
        rows = inspect_run(run_dir, at)
    except (ValueError, FileNotFoundError) as e:
        _fail(str(e))
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    after = f" after step {at}" if at is not None else ""
    if not rows:
        typer.echo(f"{run_dir}: no branches{after}" if after else f"{run_dir}: no branches yet (no step has been folded)")
        return
    if full:
        typer.echo("(--full applies to --episodes only)", err=True)
    console = Console()
    table, dropped = branch_table(rows, console.width, wide=wide)
    console.print(f"branches of {run_dir}{after}", markup=False, highlight=False)
    (Console(width=10_000) if wide else console).print(table)
    legend = label_from_legend(run_dir, rows) if "label_from" not in dropped else None
    if legend:
        console.print(legend, markup=False, highlight=False)
    if dropped:  # wrapped to the terminal like the table
        console.print(f"(left out to fit {console.width} columns: {', '.join(dropped)}; --wide shows them, --json gives every field)",
                      markup=False, highlight=False)


@app.command(cls=Command)
def convert(
    run_dir: Path = typer.Argument(..., help="A RUN_DIR (or a bench folder: each of its runs)."),
    keep_files: bool = typer.Option(False, "--keep-files", metavar="", help="Leave the old embeddings/ and prompts/ folders in place (ignored from now on)."),
) -> None:
    """Move a RUN_DIR written before rizz kept one store (its embeddings/ and prompts/ folders: a
    file per vector and per compiled prompt) into RUN_DIR/store.sqlite, byte for byte.

    Not needed to replay or resume an old RUN_DIR (it is read as it is); it turns its ~2 files
    per step into one. Every entry is read back and compared with its file before the folders
    are removed; safe to interrupt (run it again). `rizz replay RUN_DIR` afterwards prints the
    same digest. Does nothing to a RUN_DIR already in one store.
    """
    try:
        targets = run_dirs_in(run_dir)
        for rd in targets:
            convert_run_dir(rd, keep_files=keep_files, log=lambda m: typer.echo(m, err=True))
    except (FileNotFoundError, ConvertError, RunDirBusy) as e:
        _fail(str(e))


def _say_overflow(run_dir: Path, summary: dict[str, Any], name: str, window: int | None) -> None:
    """On stderr: how many of the run's steps did not fit the prompt budget (scored 0 without
    reaching the model, or refused by an OpenAI-compatible server as too long), by task (:func:`~rizz.lab.overflow.overflow_note`); nothing when none."""
    note = overflow_note(run_dir, summary, name=name, window=window)
    if note:
        typer.echo(note, err=True)


def _say_bench_overflow(out: Path, results: dict[str, Any], window: int | None) -> None:
    """:func:`_say_overflow` for each policy of a bench (``window``: the model's, None when not loaded here)."""
    for p in results["policies"]:
        _say_overflow(out / p, results["results"][p], p, window)


def _drop_unrun(out: Path, new_runs: list[Path], made_out: bool, was_empty: bool) -> None:
    """After a bench failed before a run recorded a step: remove each folder of ``new_runs``
    (this command made them) that :func:`~rizz.engine.run.discard_unstarted` finds unstarted
    (settings, or only the lock a Ray task held, and no paid reply); then, when ``out`` was
    empty before (``made_out``: it was not there) and nothing but an unused response cache is
    left in it, that cache, and ``out`` itself when this command made it: a failed start leaves
    no more than it found."""
    import shutil

    # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s)
    from rizz.engine.run import discard_unstarted

    for folder in new_runs:
        discard_unstarted(folder)
    if not was_empty or not out.is_dir() or replies_held(out / "responses.sqlite", None):
        return
    left = list(out.iterdir())
    if all(f.name.startswith("responses.sqlite") for f in left):
        if made_out:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for f in left:
                f.unlink(missing_ok=True)


def _check_run_options(model: str, user_model: str | None, rendering: str | None, durability: str, cache: Path | None) -> None:
    """The option values ``rizz run`` and ``rizz bench`` share that are checked without the
    model or the stream, each refused in one line naming the option and the value: --rendering,
    --durability, --cache, --model and --user-model (the limits' ranges are typer's)."""
    _check_rendering(rendering)
    check_durability_option(durability)
    check_cache(cache)
    _check_model(model, user_model)


def _check_model(model: str, user_model: str | None) -> None:
    """A malformed --model or --user-model is refused with the other options, before anything
    is written and before "loading the model ..." is said (a local model takes up to a minute)."""
    for flag, spec in (("--model", model), ("--user-model", user_model)):
        if spec is not None:
            try:
                check_spec(spec)
            except ValueError as e:
                _fail(f"{flag}: {e}")


def _check_oracle(model: str, stream: Path, elements: Sequence[Any], limit: int | None) -> None:
    """``--model oracle`` only replays episodes' gold actions: refuse a stream whose (first
    ``limit``) elements include one that is not an episode (it would answer "" and score 0)."""
    if model.strip() != "oracle":
        return
    plain = [el for el in elements[:limit] if not el.is_episode]
    if plain:
        _fail(f"--model oracle replays each episode's gold actions (validation only), but {plural(len(plain), 'element')} of "
              f"{stream} {'is' if len(plain) == 1 else 'are'} not an episode (no 'tools'; the first: {plain[0].id!r}); "
              "use a model (e.g. --model embedded), or an episode stream (rizz streams build bfcl)")


def _bench(stream: Path, policies: list[str], out: Path, model: str, limit: int | None, rendering: str | None, command: str, title: str,
           budget: int | None = None, ray_address: str | None = None, user_model: str | None = None,
           elements: Sequence[Any] | None = None, *, skip_bad: bool = False, cache: Path | None = None, snapshot_every: int = 50,
           durability: str = "disk") -> None:
    """Run ``rizz bench``'s job; ``elements``: the stream's, when the caller has read it already. ``skip_bad``,
    ``cache``, ``snapshot_every``, ``durability``: ``rizz run``'s options, for each policy's run."""
    # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz policy` do not need
    from rizz.engine.run import restart_unstarted, unstarted, unstarted_note
    from rizz.engine.session import check_resume, finished_run
    from rizz.lab.bench import refused_run_options, run_bench
    from rizz.lab.peers.run_peer import PEERS, PeerError, env_options, is_peer, peer_python

    # every option value first (before the stream is read, the model loads or a folder is written)
    _check_run_options(model, user_model, rendering, durability, cache)
    if ray_address is not None and not _RAY_ADDRESS.match(ray_address):
        _fail(f"--ray {ray_address!r}: expected local, auto, HOST:PORT or ray://HOST:PORT")
    if not policies:
        _fail("-P/--policies: give at least one policy or peer:NAME (comma-separated)")
    if why := refused_run_options(stream, policies, ray=ray_address is not None, skip_bad=skip_bad, snapshot_every=snapshot_every,
                                  durability=durability, user_model=user_model is not None):
        _fail(why)
    if not stream.exists():
        _fail(f"stream file not found: {stream}")
    if elements is None:
        try:
            elements = read_stream(stream, skip_bad=skip_bad).elements  # refuse a bad stream before writing anything
        except StreamError as e:
            _fail(str(e))
    _check_oracle(model, stream, elements, limit)
    loaded = {}
    for p in policies:  # and a bad policy name or file too
        if is_peer(p):
            try:
                peer_python(p.partition(":")[2])
                env_options(p.partition(":")[2])  # RIZZ_PEER_MEM0_INFER / RIZZ_PEER_ACE_MODE, before the model loads
            except PeerError as e:
                _fail(str(e))
        else:
            try:
                loaded[p] = load_policy(p)
            except PolicyError as e:
                hint = f"\n(the peer {p.lower()} is the entry peer:{p.lower()})" if p.lower() in PEERS else ""
                _fail(f"{e}{hint}")
    labels = {p: policy_label(p, loaded[p]) for p in loaded}  # each run's folder and row (rizz.lab.bench: the same)
    names = list(labels.values())
    if len(set(names)) < len(names):  # before the model loads (run_bench says the same, later)
        copied = [f"{p} (name: {labels[p]})" for p in loaded if names.count(labels[p]) > 1]
        _fail(f"policy names must differ (they name the run folders): {', '.join(copied)}; a copied policy file keeps "
              f"the name: of the file it was copied from: give it its own")
    # the cache comes first; a bench that stopped before its first report holds only its runs' folders (and its cache)
    _check_out(out, "results.json", "BENCH_DIR", also=("responses.sqlite", "peer-responses.sqlite"),
               run_folders=(*labels.values(), *(p for p in policies if is_peer(p))))
    # the model's recorded name where it is known before loading (with peers, rizz's entries go through their server)
    expect_model = None if any(is_peer(p) for p in policies) else backend_name(model)
    restart = []  # runs started with other settings that recorded nothing (a start that failed): started anew
    for p in policies:  # a folder resumed with other settings or a smaller --limit: refused before the model loads
        try:
            if p in loaded:
                check_resume(out / labels[p], stream, loaded[p], budget, p, limit, expect_model)
            elif (out / p / "summary.json").exists():  # a finished peer run (an unfinished one starts again)
                RunDir(out / p).check_limit(limit)
        except RunDirCorrupt as e:
            _fail(str(e))
        except RunDirMismatch as e:
            if p not in loaded or not unstarted(out / labels[p]):
                _fail(str(e))
            restart.append((out / labels[p], e))
    todo = len(elements) if limit is None else min(len(elements), limit)
    for p in loaded:
        if note := name_clash_note(p, loaded[p]):
            typer.echo(f"rizz bench: {note}", err=True)
    # every policy's run already finished (a peer entry's folder is checked only by its run): the report, without the model
    finished = [f for p in policies if p in loaded and (f := finished_run(out / labels[p], todo, model, rendering=rendering,
                                                                           user_model=user_model, embedder=Embedder)) is not None]
    if len(finished) == len(policies):
        for p, f in zip(policies, finished):
            typer.echo(f"{out / labels[p]}: already finished ({plural(f['steps'], 'step')}); nothing to run", err=True)
        try:
            results = build_report(out, [labels[p] for p in policies], title=title, command=command)
        except (ValueError, FileNotFoundError) as e:
            _fail(str(e))
        typer.echo(format_table(results))
        _say_bench_overflow(out, results, None)
        typer.echo(f"\nreport: {out / 'report.md'}   plots: {out}/*.png   results: {out / 'results.json'}")
        return
    made_out = not out.exists()
    was_empty = made_out or not any(out.iterdir())
    new_runs = [out / labels.get(p, p) for p in policies if not (out / labels.get(p, p)).exists()]  # what a failed start may remove
    out.mkdir(parents=True, exist_ok=True)

    def fail_before_running(message: str, code: int = 2) -> None:  # nothing ran: leave no folder behind that this command made
        if made_out:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        _fail(message, code)

    if ray_address is not None:  # the model is built on each Ray worker, not here
        from functools import partial

        for folder, refused in restart:  # serially run_stream does this itself, also for settings known only once the model loads
            if restart_unstarted(folder):
                typer.echo(unstarted_note(folder, refused), err=True)

        # lazy: imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz policy` do not need
        from rizz.lab.ray_tasks import model_from_spec

        try:
            results = run_bench(stream, policies, out, None, None, limit=limit, rendering=rendering, budget=budget, command=command,
                                title=title, ray_address=ray_address, model_factory=partial(model_from_spec, model), cache=cache,
                                log=lambda m: typer.echo(m, err=True))
        except (PolicyError, StreamError, RunDirBusy, RunDirMismatch, ValueError, ModelUnavailableError, RuntimeError) as e:
            _drop_unrun(out, new_runs, made_out, was_empty)
            _fail(str(e))
        except KeyboardInterrupt:
            _drop_unrun(out, new_runs, made_out, was_empty)
            _fail(f"interrupted; finished policies are in {out}/<policy>/; run the same command again to resume", 130)
        typer.echo(format_table(results))
        _say_bench_overflow(out, results, None)
        typer.echo(f"\nreport: {out / 'report.md'}   plots: {out}/*.png   results: {out / 'results.json'}   Ray tasks: {out / 'ray.json'}")
        return
    import contextlib

    n = len(elements)
    typer.echo(f"rizz bench: {plural(len(policies), 'policy', 'policies')} ({', '.join(policies)}) over "
               f"{n if limit is None else min(n, limit)} of {n} elements of {stream}, into {out}; loading the model {model} ...", err=True)
    peers = any(is_peer(p) for p in policies)
    responses = cache or out / "responses.sqlite"  # every policy's response cache
    try:  # with peers, one OpenAI-compatible model path for every entry (rizz.lab.peers.setup)
        ctx = peer_model(model, responses) if peers else contextlib.nullcontext(None)
        pm = ctx.__enter__()
        backend = pm.backend if peers else load_model(model, cache=responses)
        umodel = load_model(user_model, cache=responses) if user_model else None
    except (ValueError, ModelUnavailableError, RuntimeError) as e:
        fail_before_running(str(e))
    except KeyboardInterrupt:
        fail_before_running(f"interrupted; {_resume_hint(out, per_policy=True)}", 130)
    typer.echo(f"model: {backend.name}", err=True)
    try:
        with new_progress() as prog:
            results = run_bench(stream, policies, out, backend, Embedder(), limit=limit, rendering=rendering, budget=budget,
                                command=command, title=title, progress=prog, peer_model=pm, user_model=umodel, skip_bad=skip_bad,
                                snapshot_every=snapshot_every, durability=durability, replace_unstarted=True)
    except (PolicyError, StreamError, RunDirBusy, RunDirMismatch, ValueError, PeerError) as e:
        _fail(str(e))
    except (ModelRequestError, ModelConnectionError) as e:  # refused, or unreachable after the retries
        _drop_unrun(out, new_runs, made_out, was_empty)
        _fail(f"{e}\n{_resume_hint(out, per_policy=True)}")
    except KeyboardInterrupt:
        _drop_unrun(out, new_runs, made_out, was_empty)
        _fail(f"interrupted; {_resume_hint(out, per_policy=True)}", 130)
    finally:
        ctx.__exit__(None, None, None)
    typer.echo(format_table(results))
    _say_bench_overflow(out, results, getattr(backend, "context_window", None))
    typer.echo(f"\nreport: {out / 'report.md'}   plots: {out}/*.png   results: {out / 'results.json'}")


@app.command(cls=Command)
def bench(
    stream: Path = typer.Argument(..., help="Stream file (JSONL, specs/stream-format.md)."),
    policies: str = typer.Option(BENCH_POLICIES, "--policies", "-P", show_default=False, metavar="LIST",
                                 help=f"Comma-separated policy files or shipped names; peer:ace and peer:mem0 run those packages (docs/peers.md). "
                                      f"Default: {BENCH_POLICIES.replace(',', ', ')}."),
    out: Path = typer.Option(..., "--out", "-o", metavar="BENCH_DIR", help="BENCH_DIR: one RUN_DIR per policy, report.md, results.json, plots."),
    model: str = typer.Option("embedded", "--model", "-m", metavar="SPEC", help=MODEL_HELP),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, metavar="N", help="Only the first N elements."),
    rendering: str | None = typer.Option(None, metavar="MODE", help="raw | chat | chat-turns (default by backend)."),
    budget: int | None = typer.Option(None, "--budget", min=MIN_BUDGET, metavar="TOKENS", help="Cap the prompt budget (tokens) below the policy's and the model window's, for every policy alike."),
    ray: str | None = typer.Option(None, "--ray", metavar="[ADDRESS]",
                                      help="Run each policy as a Ray task: a local Ray by default (local), or a cluster (auto | HOST:PORT | ray://HOST:10001). ADDRESS may follow --ray or be written --ray=ADDRESS."),
    user_model: str | None = typer.Option(None, "--user-model", metavar="SPEC", help="Model SPEC of τ-bench's simulated customer (default: the same as --model); not with --ray."),
    skip_bad: bool = typer.Option(False, "--skip-bad", metavar="", help="Record malformed stream lines in each policy's RUN_DIR/bad_lines.json and go on (every policy skips the same lines); not with --ray or peer:NAME entries."),
    cache: Path | None = typer.Option(None, metavar="FILE", help="Response cache (sqlite); default BENCH_DIR/responses.sqlite. Share it between runs to pay once per prompt."),
    snapshot_every: int = typer.Option(50, min=1, metavar="N", help="Records between state snapshots (at least; more once a snapshot writes over N × 8 KiB; never over 1000 apart); not with --ray."),
    durability: str = typer.Option("disk", "--durability", metavar="MODE", help="disk: each step is fsynced before the next (survives a power loss); os: handed to the OS only, fsynced at the end (survives kill -9, not a power loss); not with --ray."),
) -> None:
    """Several policies over the same stream and model, side by side (report.md, results.json, PNG plots).

    A shared response cache means an identical prompt is paid for once; rerunning the same
    command resumes an interrupted bench, and a larger --limit extends a finished one. With --ray the policies run as Ray tasks (same
    digests and results; each task's cache is merged into the bench's).
    """
    _bench(stream, [p.strip() for p in policies.split(",") if p.strip()], out, model, limit, rendering,
           "rizz " + " ".join(sys.argv[1:]), f"rizz bench: {stream.name}", budget, ray, user_model,
           skip_bad=skip_bad, cache=cache, snapshot_every=snapshot_every, durability=durability)


@app.command(cls=Command)
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", "-o", metavar="BENCH_DIR", help="Where to write the bench."),
    limit: int = typer.Option(DEMO_LIMIT, "--limit", "-n", min=1, metavar="N", help="Stream elements per policy."),
    model: str = typer.Option("embedded", "--model", "-m", metavar="SPEC", help=MODEL_HELP + " oracle does not apply here: the demo's TRACE slice holds no episodes."),
    budget: int = typer.Option(DEMO_BUDGET, "--budget", min=MIN_BUDGET, metavar="TOKENS", help="Prompt budget cap in tokens, for both policies."),
) -> None:
    """The README's main job: frozen vs RIZZ on shipped real TRACE data with the embedded model.

    Says how long it should take before it starts (the README's measurement, scaled by the
    load on the cores; a resumed demo counts only its steps left; a new demo into a folder whose
    response cache already holds replies of the model says so: those take no model time); each
    policy's progress shows its time remaining.
    """
    stream = DATA_DIR / "trace-mini" / "test.jsonl"
    if not stream.exists():
        _fail(f"shipped demo data not found at {stream}; run from a clone of the rizz repository")
    _check_model(model, None)  # refused before the estimate line, which would otherwise say "no time estimate" for a typo
    elements = read_stream(stream).elements
    _check_oracle(model, stream, elements, limit)
    typer.echo(_demo_estimate(out, limit, model, budget), err=True)
    _bench(stream, ["frozen", "default"], out, model, limit, None, "rizz " + " ".join(sys.argv[1:]),
           "rizz demo: frozen vs RIZZ on TRACE (interleaved, shipped slice)", budget, elements=elements)
    # the folder is a bench's; inspect, diff and replay read one policy's RUN_DIR in it
    typer.echo(f"look at it: rizz view {out}   rizz inspect {out / 'default'}   rizz diff {out / 'default'} --at 10")


def _demo_estimate(out: Path, limit: int, model: str, budget: int) -> str:
    """The line ``rizz demo`` says first: what it runs and how long that should take."""
    import os

    try:  # a resumed demo: only the steps left (a damaged log is the bench's to report)
        left = {p: max(0, limit - RunDir(out / p).finished_steps()) for p in DEMO_STEP_SECONDS}
    except (ValueError, OSError):
        left = dict.fromkeys(DEMO_STEP_SECONDS, limit)
    head = f"rizz demo: frozen, then default, over the first {limit} elements of the shipped TRACE slice"
    if backend_name(model.strip().lower()) != backend_name("embedded"):  # the default model, by any of its names
        return f"{head}; no time estimate for --model {model} (the measured figures are the embedded model's)"
    finished = nothing_left(left)
    if finished is not None:  # the bench reprints its table, running nothing
        return f"{head}: {finished}"
    threads = int(os.environ.get("RIZZ_THREADS", "2"))
    load = busy_cores()
    guess = time_estimate(left, DEMO_STEP_SECONDS, load, os.cpu_count() or 1, threads, DEMO_LOAD_SECONDS)
    line = f"{head}: {guess}" + (f" (measured at --budget {DEMO_BUDGET}; this is --budget {budget})" if budget != DEMO_BUDGET else "")
    cache = out / "responses.sqlite"
    held = replies_held(cache, backend_name("embedded") or "") if all(n == limit for n in left.values()) else 0
    if held:  # a fresh demo into a folder whose cache was filled before (a resume's cache is its own steps', measured as such)
        line += (f"; {cache} already holds {plural(held, 'reply', 'replies')} of this model, and a reply found there takes"
                 " no model time: if they are this demo's, it takes much less")
    if threads >= 2:  # time_estimate's busy note names RIZZ_THREADS=1: say how; or say it for a job that starts later
        line += (": stop the demo and rerun it that way (it resumes)" if load >= 0.5
                 else "; if another CPU-heavy job shares the cores, run it with RIZZ_THREADS=1")
    return line


@policy_app.command("check", cls=Command)
def policy_check(files: list[str] = typer.Argument(..., metavar="POLICY...", help="Policy YAML files or shipped names.")) -> None:
    """Exit 0 when every policy is valid; otherwise name each bad field by its path and exit 1."""
    bad = 0
    for f in files:
        try:
            p = load_policy(f)
            typer.echo(f"{f}: ok ({p.name})" + _no_extends_note(f, p))
            if note := name_clash_note(f, p):  # a line of its own (it names the file)
                typer.echo(note)
        except PolicyError as e:
            bad += 1
            typer.secho(str(e), fg="red", err=True)
    raise typer.Exit(1 if bad else 0)


def _no_extends_note(source: str, policy: Any) -> str:
    """For a policy file with no ``extends:``: a note that its unset fields are rizz.core.Policy's
    values, not the shipped default's, and how many fields then differ from ``default``."""
    import yaml

    path = Path(source)
    if not path.is_file():  # a shipped name
        return ""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    if not isinstance(raw, dict) or "extends" in raw:
        return ""
    n = len([d for d in policy_differences(load_policy("default"), policy) if d[0] != "name"])
    if not n:  # default.yaml itself, or a file that spells out every field default sets
        return ""
    return (f"; note: no extends:, so its unset fields are rizz.core.Policy's values, not policies/default.yaml's"
            f" ({plural(n, 'field differs', 'fields differ')} from default: rizz policy diff default {source}; add extends: default to start from it)")


def policy_list_lines(columns: int | None) -> list[str]:
    """``rizz policy list``'s lines: each shipped policy's name and one-line description, a line
    each, cut to ``columns`` characters (``…``) when given (a terminal's width)."""
    rows = shipped_policies()
    width = max(len(name) for name, _ in rows)
    out = []
    for name, summary in rows:
        line = f"{name:<{width}}  {summary}".rstrip()
        if columns is not None and len(line) > columns:  # cut at a word, after the name
            head = line[: columns - 1]
            cut = head.rfind(" ")
            line = (head[:cut] if cut > width + 2 else head).rstrip(" ,;:") + "…"
        out.append(line)
    return out


@policy_app.command("list", cls=Command)
def policy_list() -> None:
    """List the shipped policies: each one's name and one-line description.

    The description is the first sentence of the file's header comment (policies/NAME.yaml);
    on a terminal a line longer than the window is cut (…), piped each is whole. `rizz policy
    show NAME` prints a policy's whole header and its resolved values.
    """
    import shutil

    for line in policy_list_lines(shutil.get_terminal_size().columns if sys.stdout.isatty() else None):
        typer.echo(line)


@policy_app.command("show", cls=Command)
def policy_show(file: str = typer.Argument(..., metavar="POLICY", help="Policy file or shipped name.")) -> None:
    """Print the policy file's header comment (what the policy is for), then the fully resolved policy as YAML.

    The resolved policy has extends applied and defaults filled in; printed as comments, the
    header keeps the output a valid policy file.
    """
    pol = _load_policy_or_exit(file)
    header = policy_header(file)
    if header:
        typer.echo("\n".join(header) + "\n")
    typer.echo(dump_policy(pol), nl=False)


@policy_app.command("diff", cls=Command)
def policy_diff(a: str = typer.Argument(..., help="Policy file or shipped name."),
                b: str = typer.Argument(..., help="Policy file or shipped name.")) -> None:
    """Print each field where two resolved policies differ (`path: A's value -> B's value`);
    exit 0 when they are the same apart from their names, 1 when they differ (as diff does)."""
    pa, pb = _load_policy_or_exit(a), _load_policy_or_exit(b)
    diffs = [d for d in policy_differences(pa, pb) if d[0] != "name"]
    for path, x, y in diffs:
        typer.echo(f"{path}: {json.dumps(x)} -> {json.dumps(y)}")
    if not diffs:
        typer.echo(f"{pa.name} and {pb.name}: the same fields")
    raise typer.Exit(1 if diffs else 0)


@policy_app.command("schema", cls=Command)
def policy_schema_cmd() -> None:
    """Print the policy JSON Schema (the content of specs/policy.schema.json)."""
    typer.echo(json.dumps(policy_schema(), indent=2))


@policy_app.command("constants", cls=Command)
def policy_constants_cmd() -> None:
    """Print the table of every policy constant with its default, range and source (specs/constants.md)."""
    typer.echo(constants_markdown(), nl=False)


#: What may follow ``--ray`` as its ADDRESS: local, auto, ray://..., HOST:PORT.
_RAY_ADDRESS = re.compile(r"^(local|auto|ray://\S+|[\w.\-]+:\d+)$")


def ray_flag(argv: list[str]) -> list[str]:
    """``--ray`` takes an optional ADDRESS: a bare ``--ray`` (not followed by an address-like
    token: local, auto, ray://..., HOST:PORT) becomes ``--ray=local``."""
    out = []
    for i, a in enumerate(argv):
        if a == "--ray" and not (i + 1 < len(argv) and _RAY_ADDRESS.match(argv[i + 1])):
            a = "--ray=local"
        out.append(a)
    return out


# `rizz sweep` and `rizz serve` (docs/ray.md, docs/serve.md) live in their own module.
from rizz.apps.cli_scale import register as _register_scale  # noqa: E402

_register_scale(app)

# `rizz view` lives in its own package.
from rizz.apps.view_command import register as _register_view  # noqa: E402

_register_view(app)


def main() -> None:
    app(args=ray_flag(sys.argv[1:]))


if __name__ == "__main__":
    main()
