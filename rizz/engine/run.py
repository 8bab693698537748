"""``rizz run`` and ``rizz replay``: a stream through a Session into a RUN_DIR, and back.

``rizz run`` (:func:`run_stream`) is a short loop over a :class:`~rizz.engine.session.Session`:
``Session.open`` opens the RUN_DIR (checks ``run.json`` against the stream and settings,
writes ``bad_lines.json``, drops a partial last record, restores the fold, finishes an
interrupted distillation), then each element not yet finished goes through
:meth:`~rizz.engine.session.Session.run_element`, and the summary is written.

A run is resumable: running the same command on an unfinished RUN_DIR refolds its log
(from the newest snapshot) and continues with the next element; because every model call
is deterministic (and cached), the final state equals an uninterrupted run's.
"""

from __future__ import annotations

import errno
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rizz.adapters.models.cache import replies_held
from rizz.core import AdaptiveState, Policy, TenantStates, digest
from rizz.engine.logfold import LogFold, restore_fold, snapshot_fold, views
from rizz.engine.session import Session
from rizz.formats.logrecord import opens_step, parse, steps_in
from rizz.formats.policy_file import parse_policy
from rizz.formats.streams import StreamElement, read_stream
from rizz.formats.wording import plural
from rizz.store.durable import fault_point
from rizz.store.runlog import RunDir, RunDirBusy, RunDirMismatch, RunDirReadOnly, change_line, write_json_atomic

__all__ = ["KEEP_SNAPSHOTS", "ReplayBusy", "Replayed", "Stale", "check_step", "discard_unstarted", "episode_summary",
           "evaluated_tokens", "fold_until", "records_until", "replay", "replay_differences", "replay_run",
           "restart_unstarted", "run_stream", "read_summary", "sent_prompt_tokens", "state_at", "step_count",
           "summarise", "summary_covers", "summary_extent", "summary_outcome", "unstarted", "unstarted_note",
           "wall_seconds"]

#: Snapshots a run keeps (the newest; a resume needs only the newest sound one, and the store
#: drops the chunks of the others). ``Session.open`` keeps as many by default.
KEEP_SNAPSHOTS = 3


def evaluated_tokens(call: dict[str, Any]) -> int:
    """Prompt tokens a backend evaluated for one logged call (a ``calls`` item of a record):
    0 for a response-cache hit, else its ``evaluated_tokens`` when written, else all its
    ``prompt_tokens`` (:class:`rizz.formats.logrecord.CallPart`)."""
    return 0 if call.get("cached") else int(call.get("evaluated_tokens", call["prompt_tokens"]))


def sent_prompt_tokens(record: dict[str, Any]) -> int:
    """The tokens of a step's answer prompt **as sent** (its answer call's ``prompt_tokens``:
    the compiled prompt with its answer-format line and chat template), what the budget bounds
    (:func:`rizz.engine.answering.compile_sent`); the compiled count (``prompt.tokens``) for an
    episode (its turns are budgeted by the agent loop) or a step whose answer call was not
    recorded or reported no prompt tokens (0: the ``oracle`` model, which sends nothing). A
    record with a ``prompt``."""
    sent = [n for c in record.get("calls", ()) if c.get("kind") == "answer" and (n := int(c["prompt_tokens"])) > 0]
    if "episode" in record or not sent:
        return int(record["prompt"]["tokens"])
    return max(sent)


def token_totals(calls: list[dict[str, Any]]) -> dict[str, int]:
    """Token totals over logged calls (``calls`` items of records): every prompt
    (``prompt_tokens``), the prompts a backend was sent (``prompt_tokens_sent``: the response
    cache answered the rest), the tokens it evaluated (``prompt_tokens_evaluated``: the rest it
    read from its own prompt or KV cache, :func:`evaluated_tokens`), and ``completion_tokens``.
    Shared by ``summary.json`` and the bench's results."""
    return {
        "prompt_tokens": sum(int(c["prompt_tokens"]) for c in calls),
        "prompt_tokens_sent": sum(int(c["prompt_tokens"]) for c in calls if not c.get("cached")),
        "prompt_tokens_evaluated": sum(evaluated_tokens(c) for c in calls),
        "completion_tokens": sum(int(c["completion_tokens"]) for c in calls),
    }


def episode_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task, over the answered tool episodes: ``n``, ``mean_reward``,
    ``turns_per_episode`` (user turns), ``tool_errors`` (total), ``model_calls_per_episode``
    (agent calls), ``prompt_tokens_per_episode`` (every call of the step). Empty without episodes.

    ``records``: one dict per element as :func:`~rizz.engine.logfold.views` joins them (a live
    answer and its verdict in one); an episode whose answer expired is left out."""
    out: dict[str, Any] = {}
    done = [r for r in records if "episode" in r and "verdict" in r]
    for task in sorted({r.get("task") or "-" for r in done}):
        eps = [r for r in done if (r.get("task") or "-") == task]
        n = len(eps)
        out[task] = {
            "n": n,
            "mean_reward": round(sum(r["verdict"]["reward"] for r in eps) / n, 6),
            "turns_per_episode": round(sum(sum(1 for e in r["episode"]["transcript"] if e["role"] == "user") for r in eps) / n, 4),
            "tool_errors": sum(r["episode"]["tool_errors"] for r in eps),
            "model_calls_per_episode": round(sum(r["episode"]["model_calls"] for r in eps) / n, 4),
            "prompt_tokens_per_episode": round(sum(c["prompt_tokens"] for r in eps for c in r["calls"]) / n, 1),
        }
    return out


def wall_seconds(records: list[dict[str, Any]]) -> float:
    """Seconds the logged steps took, rounded to 0.01: each record's ``wall_s`` (a step's answer,
    judge and verifier calls) plus the ``latency_s`` of its uncached ``distill`` calls, which run
    after the step's clock stops (:meth:`Session.run_element <rizz.engine.session.Session.run_element>`;
    a distillation record has no ``wall_s`` of its own). ``records``: log records or their views."""
    return round(sum(float(r.get("wall_s", 0.0)) + sum(float(c.get("latency_s", 0.0)) for c in r.get("calls", ())
                                                        if c.get("kind") == "distill" and not c.get("cached"))
                     for r in records), 2)


def summarise(records: list[dict[str, Any]], state: AdaptiveState, meta: dict[str, Any]) -> dict[str, Any]:
    """``summary.json`` (specs/stream-format.md) (plus extra fields) from the log records and final state.

    ``records``: the log's JSON objects, any version (joined per element by :func:`views`):
    the whole log, whose length is ``log_records`` (what tells a summary of the log as it was,
    before a resume that did not finish or a live session appended more, :func:`replay_run`).
    """
    log_records = len(records)
    records = views(records)
    answered = [r for r in records if "verdict" in r]
    per_task: dict[str, list[float]] = {}
    for r in answered:
        per_task.setdefault(r.get("task") or "-", []).append(r["verdict"]["reward"])
    calls = [c for r in records for c in r.get("calls", [])]
    costs = [c["cost_usd"] for c in calls if c.get("cost_usd") is not None]
    n_calls = sum(1 for c in calls if not c["cached"])
    return {
        "steps": len(records),
        "log_records": log_records,
        "answered": len(answered),
        "mean_reward": round(sum(r["verdict"]["reward"] for r in answered) / len(answered), 6) if answered else 0.0,
        "per_task": {t: {"n": len(v), "mean_reward": round(sum(v) / len(v), 6)} for t, v in sorted(per_task.items())},
        **token_totals(calls),
        "model_calls": len(calls),
        "model_calls_uncached": n_calls,
        "calls_per_answered_step": round(len(calls) / len(answered), 4) if answered else 0.0,
        "calls_by_kind": {k: sum(1 for c in calls if c["kind"] == k) for k in ("judge", "answer", "distill", "verify", "user")},
        "usage_estimated": any(c.get("usage_estimated", False) for c in calls),
        "retried_calls": sum(1 for c in calls if c.get("attempts", 1) > 1),
        "model_requests": sum(c.get("attempts", 1) for c in calls if not c["cached"]),
        "answer_prompt_tokens_max": max((sent_prompt_tokens(r) for r in records if "prompt" in r), default=0),
        "budget_exceeded": sum(1 for r in records if "prompt" in r and sent_prompt_tokens(r) > r["prompt"]["budget"]),
        "overflow": sum(1 for r in records if r.get("overflow")),
        "cost_usd": round(sum(costs), 6) if costs else None,
        "wall_s": wall_seconds(records),
        "branches": {"total": len(state.branches), "active": len(state.active_branches())},
        "branch_labels": {b.id: {"label": str(b.label), "shape": b.shape, "traffic": b.stats.traffic, "active": b.active}
                          for b in (state.branches[i] for i in state.branch_ids())},
        "state_digest": digest(state),
        "policy": meta.get("policy"),
        "model": meta.get("model"),
        "episodes": episode_summary(records),
    }


#: What a RUN_DIR with no log record holds that describes only its settings or nothing (a
#: state of no step): :func:`restart_unstarted` removes these, run.json last (until then the
#: folder is still a RUN_DIR); the caches (``responses.sqlite``, ``store.sqlite``:
#: content-addressed) and the log stay.
_UNSTARTED_FILES = ("bad_lines.json", "summary.json", "run.json")


def unstarted(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` is a RUN_DIR whose run recorded nothing: it holds ``run.json`` but its
    log no complete record (none, an empty file, or only a partial line a kill left), no
    snapshot after a step, and no ``summary.json`` counting a step. A start that failed (a model
    that could not be reached, Ctrl-C before the first step ended) leaves such a folder. A log that cannot be
    read, or a summary.json that cannot, counts as started (nothing is replaced)."""
    rd = RunDir(run_dir)
    if not rd.meta_path.is_file():
        return False
    try:
        if next(iter(rd.records()), None) is not None:
            return False
        if any(n > 0 for n in rd.snapshot_steps()):
            return False
        if rd.summary_path.exists():
            summary = json.loads(rd.summary_path.read_text(encoding="utf-8"))
            if not isinstance(summary, dict) or summary.get("steps") != 0:
                return False
    except (OSError, ValueError):
        return False
    return True


def restart_unstarted(run_dir: str | Path) -> bool:
    """Clear an :func:`unstarted` RUN_DIR's settings so that a run with other settings can start
    in it: under its lock, and only when it is still unstarted, remove ``run.json``,
    ``bad_lines.json``, a summary of no step and the snapshots of no step (nothing a log
    record refers to; the response and embedding caches and the log stay). Returns whether it
    did; False when the folder holds a record, another process holds it (that process
    then says so when the run opens it), or a file cannot be removed (then refused as started)."""
    rd = RunDir(run_dir)
    if not unstarted(rd.root):
        return False
    try:
        rd.__enter__()
    except RunDirBusy:
        return False
    try:
        if not unstarted(rd.root):  # a record appended before the lock was taken
            return False
        try:
            for n in rd.snapshot_steps():
                (rd.snap_dir / f"{n:08d}.json").unlink(missing_ok=True)
            for name in _UNSTARTED_FILES:
                (rd.root / name).unlink(missing_ok=True)
        except OSError:  # a file that cannot be removed (immutable, another owner): refused as before
            return False
        return True
    finally:
        rd.__exit__(None, None, None)


def discard_unstarted(run_dir: str | Path) -> bool:
    """Remove ``run_dir`` when a start that failed made it and it recorded nothing: it is
    :func:`unstarted` (or holds nothing but its lock: a Ray task that failed before installing
    its run), and no response cache in it holds a reply (a paid answer is kept, and with it the
    folder). Call it only on a folder the failing command made. Returns whether it removed it.
    False leaves a started folder, or one another process holds, unchanged; where a file cannot
    be removed it may have lost only what :func:`restart_unstarted` removes (its settings)."""
    import shutil

    root = Path(run_dir)
    lock_files = (".lock", ".lock.pid")
    if not root.is_dir():
        return False
    if not all(f.name in lock_files for f in root.iterdir()):
        if not unstarted(root) or replies_held(root / "responses.sqlite", None):
            return False
        if not restart_unstarted(root):  # under the lock: run.json and the other settings, or nothing
            return False
    for f in root.iterdir():  # what is left: the empty log, the stores of no step, the unused cache, the lock
        if f.name in lock_files:
            continue
        if f.is_dir():
            shutil.rmtree(f, ignore_errors=True)
        elif f.name.startswith(("log.jsonl", "store.sqlite", "responses.sqlite")):
            f.unlink(missing_ok=True)
    if any(f.name not in lock_files for f in root.iterdir()):
        return False
    shutil.rmtree(root, ignore_errors=True)
    return not root.exists()


def unstarted_note(run_dir: str | Path, refused: RunDirMismatch) -> str:
    """The line said when :func:`run_stream` starts anew an :func:`unstarted` RUN_DIR that
    ``refused`` these settings: which settings differed, and that its run.json is replaced."""
    what = "; ".join(change_line(c).strip() for c in refused.changes)
    return (f"{run_dir}: started before with other settings{f' ({what})' if what else ''} but no step was recorded; "
            "its run.json is replaced by this command's settings")


def run_stream(stream: str | Path, policy: Policy, policy_source: str, out: str | Path, model: Any, embedder: Any, *,
               limit: int | None = None, skip_bad: bool = False, rendering: str | None = None, snapshot_every: int = 50,
               budget: int | None = None, user_model: Any = None, durability: str = "disk",
               on_step: Callable[[dict[str, Any], Session], None] | None = None,
               on_resume: Callable[[list[dict[str, Any]]], None] | None = None,
               log: Callable[[str], None] = lambda m: print(m, file=sys.stderr), replace_unstarted: bool = False) -> dict[str, Any]:
    """Run (or resume) ``stream`` into ``out``; returns the summary. See module docstring.

    ``on_resume(records)``: called once before the first new step with the elements already
    finished (one record per element, :func:`~rizz.engine.logfold.views`; [] for a new run);
    ``on_step(record, session)``: after each new element, its record with the calls of the
    distillation it made due (so the two add up to ``summary.json``'s figures).

    ``durability``: ``"disk"`` (each element's records fsynced before the next element) or
    ``"os"`` (handed to the OS; fsynced when the run ends): :class:`~rizz.store.runlog.RunDir`.

    ``replace_unstarted`` (``rizz run`` and ``rizz bench`` set it): an ``out`` started with other
    settings whose run recorded nothing (:func:`unstarted`: a start that failed) is started
    anew with these (:func:`restart_unstarted`; ``log`` says so) instead of refused.

    Raises StreamError (bad line, unless ``skip_bad``), RunDirBusy, RunDirMismatch (other
    settings, or a ``limit`` below the steps ``out`` already holds: a resume keeps them all).
    """
    stream = Path(stream)
    read = read_stream(stream, skip_bad=skip_bad)
    elements: list[StreamElement] = list(read.elements)[: limit if limit is not None else None]
    RunDir(out).check_limit(limit)  # before the directory is opened: a refused resume writes nothing

    def open_session() -> Session:
        return Session.open(out, policy, model, embedder=embedder, policy_source=policy_source, stream=stream, bad_lines=read.bad,
                            words="cli", rendering=rendering, budget_cap=budget, snapshot_every=snapshot_every,
                            keep_snapshots=KEEP_SNAPSHOTS, user_model=user_model, durability=durability, keep_records=True, log=log)

    try:
        session = open_session()
    except RunDirMismatch as e:
        if not (replace_unstarted and restart_unstarted(out)):
            raise
        log(unstarted_note(out, e))
        session = open_session()
    try:
        summary = _run(session, elements, on_step, on_resume, log)
    except BaseException as e:
        session.close(snapshot=False, error=e)
        raise
    session.close(snapshot=False)  # the run's snapshots are those taken every snapshot_every records
    return summary


def _run(session: Session, elements: list[StreamElement], on_step: Callable[[dict[str, Any], Session], None] | None,
         on_resume: Callable[[list[dict[str, Any]]], None] | None, log: Callable[[str], None]) -> dict[str, Any]:
    """:func:`run_stream`'s loop over an opened session: the elements not yet finished, then the summary."""
    rd, records = session.run_dir, session.records
    assert rd is not None and records is not None and session.meta is not None  # Session.open(..., keep_records=True)
    done = session.step_index
    if done and done >= len(elements):
        log(f"{rd.root}: already finished ({plural(done, 'step')}); nothing to run")
    elif done:
        log(f"resuming {rd.root} after {plural(done, 'finished step')}")
    if on_resume is not None:
        on_resume(views(records))
    for el in elements[done:]:
        fault_point("step")
        recs = session.run_element(el)
        if on_step is not None:
            on_step(views(recs)[0], session)
    summary = summarise(records, session.state, session.meta)
    write_json_atomic(rd.summary_path, summary)
    if rd.replay_summary_removed:  # the first new record removed it (RunDir.append): it refolded a shorter log
        log(f"{rd.replay_summary_path}: removed (it refolded the run before these new steps); `rizz replay --policy` rebuilds it")
    return summary


def replay(run_dir: str | Path, policy: Policy | None = None, policy_source: str | None = None, *, write_summary: bool = True) -> dict[str, Any]:
    """Refold RUN_DIR's log with no model calls (under ``policy``, default: the run's own);
    returns the refolded summary (``summary.json``'s fields: ``state_digest``, counts, rewards;
    not the state itself: :func:`state_at` gives that). ``write_summary`` (default True): write
    that summary as ``rizz replay`` does (:func:`replay_run` says where); False writes nothing.
    :func:`replay_run` says what it did; this raises what it could not: RunDirReadOnly (a
    summary to write, a folder that cannot be written)."""
    done = replay_run(run_dir, policy, policy_source, write_summary=write_summary)
    if done.unwritten is not None:
        raise done.unwritten
    return done.summary


@dataclass
class Stale:
    """``summary.json`` folds fewer records than the log holds: it is of the log as it was (a
    resume that did not finish appended more steps; a live session answered or folded more).

    ``records``: the log records it folds (its ``log_records``; a summary written before that
    field, by the steps it counts); ``digest``: the refold's digest after those records (None
    under another policy, which refolds to another state anyway)."""

    records: int
    digest: str | None


@dataclass
class Replayed:
    """What :func:`replay_run` found and did.

    ``summary``: the refolded summary; ``recorded``: ``summary.json`` as the replay found it (None
    when missing, unreadable or not an object); ``stale``: set when that summary folds fewer
    records than the log holds; ``outcome``, under the run's own policy: ``"same"`` (it records
    the refold's digest: nothing to write), ``"stale"`` (of a shorter log, whose digest the refold
    finds where that summary ends: summary.json is rewritten), ``"unrecorded"`` (no digest: the
    refold goes to summary.json), ``"differs"`` (another digest, at the log's end or where a stale
    summary ends: summary.json is kept, the refold goes to summary.replay.json); under another
    policy ``"policy"`` (summary.replay.json). ``path``: the file the summary goes to (None: none);
    ``written``: it was written; ``unwritten``: why not (a folder that cannot be written);
    ``busy``: a stale summary.json left as it is while another process holds the lock."""

    summary: dict[str, Any]
    recorded: dict[str, Any] | None
    outcome: str
    stale: Stale | None
    path: Path | None
    written: bool = False
    unwritten: RunDirReadOnly | None = None
    busy: RunDirBusy | None = None


class ReplayBusy(RunDirBusy):
    """A replay that has to write ``path`` (for its ``outcome``, :class:`Replayed`) found the
    RUN_DIR's lock held by another process; the message, ``root``, ``kind`` and ``owner`` are
    those of the :class:`RunDirBusy` it replaces."""

    path: Path
    outcome: str


def replay_run(run_dir: str | Path, policy: Policy | None = None, policy_source: str | None = None, *,
               write_summary: bool = True) -> Replayed:
    """Refold RUN_DIR's log with no model calls (under ``policy``, default: the run's own).

    Any RUN_DIR: ``rizz run``'s, a live session's (``Session.open``), and log format 1.

    With the run's policy the digest equals the run's, and when ``summary.json`` records that
    digest nothing is written (a replay that confirms the run leaves every file as it was);
    when ``summary.json`` records none (a run that has not finished, a live session's folder)
    the refolded summary is written there; when it records another digest that file is kept
    (what the run recorded is never overwritten) and the refolded summary goes to
    ``summary.replay.json``. A ``summary.json`` of fewer log records than the log holds (its
    ``log_records``; one written before that field, by its ``steps``) is of the log as it was: a
    resume that did not finish (killed, Ctrl-C) or a live session appended more. Its digest is
    then compared with the refold's after those records, and when they agree it is rewritten
    with the whole log's summary (not while another process holds the lock: that process may
    be appending still); when they do not, it is a refold to another state as above.

    Under another policy the logged answers and verdicts are refolded as they are: the state
    (branches, memory, digest) is that policy's, but answers, rewards and model calls are the
    run's own (a counterfactual memory, not a new run); the summary then carries
    ``answers_from`` (the run's policy) and goes to ``summary.replay.json``. The run's next
    appended record removes that file (:meth:`RunDir.append
    <rizz.store.runlog.RunDir.append>`), since it no longer describes the run.

    Locking. The refold only reads, so it takes no lock: it works on a RUN_DIR that cannot be
    written, and beside a ``rizz run`` writing the same folder it folds the records appended
    so far (the log is append-only, and the store rows a record names are committed before it;
    the store is read read-only, :class:`~rizz.store.runstore.RunStore`). Only a write takes
    the writer's lock, and under it the log and ``summary.json`` are checked against those the
    refold read: when either changed meanwhile (a run appended and finished), the log is folded
    again under the lock, so the file written describes the log as it is and a run's
    ``summary.json`` written meanwhile decides where it goes. A folder that cannot be written
    is :attr:`Replayed.unwritten`.

    Raises:
      FileNotFoundError: a directory that is not a RUN_DIR.
      ReplayBusy: a file must be written while another process holds the lock (except a stale
        ``summary.json``'s rewrite, left to :attr:`Replayed.busy`).
    """
    rd = RunDir(run_dir)
    meta = rd.meta()
    if policy is None:
        policy = parse_policy(meta["policy_data"], f"{rd.meta_path}:policy_data")
        policy_source = meta["policy"]
    own = policy_source == meta["policy"]

    def refold() -> Replayed:
        recorded = read_summary(rd.summary_path)
        reader = RunDir(run_dir)
        records = list(reader.records())
        covered = summary_covers(recorded, records)
        at: list[str] = []

        def digest_at(fold: Any, n: int) -> None:
            if n == covered:
                at.append(digest(fold.state))

        fold, records = restore_fold(reader, policy, use_snapshots=False, records=records,
                                     on_folded=digest_at if covered is not None and own else None)
        summary = summarise(records, fold.state, dict(meta, policy=policy_source))
        if not own:
            summary["answers_from"] = meta["policy"]
        stale = None if covered is None else Stale(covered, at[0] if at else None)
        outcome = summary_outcome(own, recorded, summary, stale)
        path = {"same": None, "stale": rd.summary_path, "unrecorded": rd.summary_path}.get(outcome, rd.replay_summary_path)
        return Replayed(summary, recorded, outcome, stale, path)

    folded = _log_identity(rd.log_path)
    done = refold()
    if not write_summary or done.path is None:
        return done
    path = done.path
    try:
        with rd:
            if _log_identity(rd.log_path) != folded or read_summary(rd.summary_path) != done.recorded:
                done = refold()  # appended to, or a run finished, since the refold: fold the log as it is now
            if done.path is not None:
                try:
                    write_json_atomic(done.path, done.summary)
                except OSError as e:  # the lock could be taken, the file not written (a folder without write permission)
                    if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                        raise
                    done.unwritten = _not_written(done.path, done.summary, f"{e.filename}: {e.strerror}")
                else:
                    done.written = True
    except RunDirReadOnly as e:  # the lock file itself
        done.unwritten = _not_written(path, done.summary, e.reason)
    except RunDirBusy as e:
        if done.outcome == "stale":  # the holder may be appending still: its own summary will describe its log
            done.busy = e
            return done
        busy = ReplayBusy(str(e), root=e.root, kind=e.kind, owner=e.owner)
        busy.path, busy.outcome = path, done.outcome
        raise busy from None
    return done


def fold_until(run_dir: str | Path, step: int | None = None,
               each: Callable[[dict[str, Any], tuple[object, ...]], None] | None = None, *,
               each_from: int | None = None, snapshots: bool = True,
               records: Iterable[dict[str, Any]] | None = None) -> AdaptiveState | TenantStates:
    """Fold RUN_DIR's log under the run's own policy (``run.json``), in log order, until the
    first ``step`` or ``answer`` record past step ``step`` (None: the whole log); returns the
    state. ``each(record, events)`` sees the records folded: the record as JSON and the events
    its fold produced (the :mod:`rizz.core.events` records); every one, or with ``each_from``
    those of steps ``each_from``..``step`` only (what ``rizz diff`` reports).

    The fold starts from the newest sound snapshot in ``snapshots/`` (with its answers in
    flight, as a resume does: :func:`~rizz.engine.logfold.snapshot_fold`) taken at or before
    the cut (without ``each``) or the first record ``each`` is to see (with ``each_from``), and
    folds the records after it; from the first record without one (none kept that early, or
    each damaged), with ``each`` and no ``each_from`` (``each`` sees every record), or with
    ``snapshots=False``. The state, and what ``each`` sees, are the same either way.

    ``records``: the log's records as JSON objects, in order, when the caller has read them
    already (the log is then not read again); by default ``log.jsonl``'s, read up to the cut.

    Reads only: no model call, no lock, nothing written (a damaged snapshot is passed over,
    not rebuilt). What ``rizz diff`` and ``rizz inspect`` fold; :func:`state_at` is the checked
    way to call it.

    Raises FileNotFoundError when ``run_dir`` is not a RUN_DIR; LogRecordError / LogFoldError
    naming ``log.jsonl:<line>`` for a bad record.
    """
    rd = RunDir(run_dir)
    policy = parse_policy(rd.meta()["policy_data"], f"{rd.meta_path}:policy_data")
    folded = records_until(rd.records() if records is None else records, step)

    def seen(rec: dict[str, Any]) -> bool:
        """Whether ``each`` sees ``rec``."""
        return each_from is None or (each_from <= rec["step"] and (step is None or rec["step"] <= step))

    if snapshots and (each is None or each_from is not None):
        first = len(folded) if each is None else next((i for i, r in enumerate(folded) if seen(r)), len(folded))
        fold, start, _ = snapshot_fold(rd, policy, first)
    else:
        fold, start = LogFold(policy, rd.embeddings), 0
    for i, rec in enumerate(folded[start:], start + 1):
        events = fold.apply(parse(rec, f"{rd.log_path}:{i}"))
        if each is not None and seen(rec):
            each(rec, events)
    state: AdaptiveState | TenantStates = fold.state
    return state


def records_until(records: Iterable[dict[str, Any]], step: int | None) -> list[dict[str, Any]]:
    """The log records (as JSON, in order) a fold up to step ``step`` reads: those before the
    first ``step`` or ``answer`` record past step ``step`` (None: all). In a live session's log
    they hold the verdicts that arrived before step ``step + 1``'s answer (:func:`state_at`)."""
    out: list[dict[str, Any]] = []
    for rec in records:
        if step is not None and rec["step"] > step and opens_step(rec):
            break
        out.append(rec)
    return out


def check_step(run_dir: str | Path, step: int, n: int, flag: str = "--at") -> None:
    """Refuse ``step`` as a step of RUN_DIR's log of ``n`` steps (0..n-1), for ``rizz diff``'s and
    ``rizz inspect``'s ``--at`` (``flag``): ValueError whose message is one line naming the flag,
    the RUN_DIR and the steps its log has."""
    if step < 0:
        raise ValueError(f"{flag} {step}: steps are numbered from 0 (the log of {run_dir} has {_steps_had(n)})")
    if step >= n:
        raise ValueError(f"{flag} {step}: step {step} is not in the log of {run_dir} (it has {_steps_had(n)})")


def _steps_had(n: int) -> str:
    return "no steps yet" if n == 0 else "step 0 only" if n == 1 else f"steps 0..{n - 1}"


def step_count(run_dir: str | Path) -> int:
    """The steps in RUN_DIR's log: its ``step`` and ``answer`` records (steps ``0..n-1``).
    Raises FileNotFoundError when ``run_dir`` is not a RUN_DIR."""
    rd = RunDir(run_dir)
    rd.meta()
    return steps_in(rd.records())


def state_at(run_dir: str | Path, step: int | None = None) -> AdaptiveState | TenantStates:
    """The adaptive state of RUN_DIR after step ``step`` (0-based, as ``rizz diff --at``
    counts; None: after the whole log), refolded from its log under the run's own policy.

    Reads only, as ``rizz diff`` does: no model call, no lock, no summary or snapshot written
    (unlike :func:`replay`, which by default writes a summary). It starts from the newest
    snapshot the run kept at or before that step, when there is a sound one, and folds the
    records after it (:func:`fold_until`); the state is a refold's from the first record. The
    log is folded in order up to step ``step + 1``'s record, so in a live session's log the
    verdicts that arrived before that answer are in the state and later ones for earlier steps
    are not (a batch run's ``step`` record carries its verdict). The last step's state is the whole log's: its
    :func:`~rizz.core.digest` is :func:`replay`'s ``state_digest``. A tenanted run's state is
    a :class:`~rizz.core.TenantStates`.

    Compare two steps with :func:`rizz.lab.diff.branch_rows` of each state, or read what a
    step changed with :func:`rizz.lab.diff.diff_run`.

    Example (a RUN_DIR ``run`` of ``rizz run`` or a :class:`~rizz.Session`)::

        before, after = state_at(run, 3), state_at(run, 4)
        grown = {b: len(after.branches[b].episodes) for b in after.branch_ids()}

    Raises:
      ValueError: ``step`` is negative or past the log's last step.
      FileNotFoundError: ``run_dir`` is not a RUN_DIR.
    """
    if step is None:
        return fold_until(run_dir)
    if step < 0:
        raise ValueError(f"step {step}: steps are numbered from 0")
    rd = RunDir(run_dir)
    rd.meta()  # FileNotFoundError: not a RUN_DIR
    records = list(rd.records())  # read once: counted here, folded below
    n = steps_in(records)
    if step >= n:
        raise ValueError(f"step {step} is not in the log of {run_dir} (it has {_steps_had(n)})")
    return fold_until(run_dir, step, records=records)


def read_summary(path: Path) -> dict[str, Any] | None:
    """``summary.json`` as an object; None when missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _count(value: Any) -> int | None:
    """``value`` when it is a count (an int >= 0, not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def summary_covers(recorded: dict[str, Any] | None, records: list[dict[str, Any]]) -> int | None:
    """How many of the log's ``records`` the summary ``recorded`` folds, when it
    records a digest and folds fewer; else None. Its ``log_records``; a summary written before
    that field ends where the step after its last begins (``steps``: a ``rizz run``'s summary is
    written once its last element's records are all appended). :func:`replay_run` and ``rizz
    view`` (:mod:`rizz.lab.view.runfold`) compare its digest with the refold's after that many records."""
    if recorded is None or not isinstance(recorded.get("state_digest"), str):
        return None
    if "log_records" in recorded:
        covered = _count(recorded["log_records"])
        return covered if covered is not None and covered < len(records) else None
    steps = _count(recorded.get("steps"))
    if steps is None:
        return None
    starts = [i for i, r in enumerate(records) if opens_step(r)]
    return starts[steps] if steps < len(starts) else None


def summary_outcome(own: bool, recorded: dict[str, Any] | None, summary: dict[str, Any], stale: Stale | None) -> str:
    """:attr:`Replayed.outcome` of a refold to ``summary`` (under the run's own policy when
    ``own``) against ``summary.json`` as ``recorded``, ``stale`` when that folds fewer records
    (:func:`summary_covers`)."""
    if not own:
        return "policy"
    was = recorded.get("state_digest") if recorded is not None else None
    if not isinstance(was, str):
        return "unrecorded"
    if stale is not None:
        return "stale" if stale.digest == was else "differs"
    return "same" if was == summary["state_digest"] else "differs"


def summary_extent(recorded: dict[str, Any], summary: dict[str, Any], stale: Stale) -> tuple[str, str]:
    """How much of the log a stale ``summary.json`` (``recorded``) folds, and how much the
    refold's ``summary`` does: by steps, or by records too when the steps agree.

    Example:
        >>> summary_extent({"steps": 3}, {"steps": 5, "log_records": 6}, Stale(3, None))
        ('3 steps', '5')
        >>> summary_extent({"steps": 1}, {"steps": 1, "log_records": 2}, Stale(1, None))
        ('1 step (1 log record)', '2 records')
    """
    steps = _count(recorded.get("steps"))
    if steps is not None and steps != summary["steps"]:
        return plural(steps, "step"), str(summary["steps"])
    were = f"{plural(steps, 'step')} ({plural(stale.records, 'log record')})" if steps is not None else plural(stale.records, "log record")
    return were, plural(summary["log_records"], "record")


def _not_written(path: Path, summary: dict[str, Any], reason: str) -> RunDirReadOnly:
    """The refused write of ``path`` (``reason``: why), carrying the ``summary`` not written."""
    e = RunDirReadOnly(f"{path} not written: its folder cannot be written ({reason}); to keep the refolded summary, "
                       "copy the RUN_DIR to a writable folder and replay it there")
    e.summary, e.reason = summary, reason
    return e


def _log_identity(path: Path) -> tuple[int, int, int] | None:
    """``log.jsonl``'s (inode, size, mtime): it changes with every append (and a repair)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def replay_differences(run: dict[str, Any], refold: dict[str, Any]) -> list[str]:
    """What a refold under another policy (``summary.replay.json``) changed against the run's
    own ``summary.json``, one phrase per differing field (branches, their labels, the digest,
    and any other field); [] when only the policy's name differs (``log_records`` is left
    out: how much of the log each folds shows in their steps and counts).

    Example:
        >>> replay_differences({"branches": {"total": 3, "active": 2}, "state_digest": "sha256:aa", "policy": "default",
        ...                     "branch_labels": {"b0": {"label": "x/y"}, "b1": {"label": "p/q"}, "b2": {"label": "x/y"}}},
        ...                    {"branches": {"total": 1, "active": 1}, "state_digest": "sha256:bb", "policy": "single-branch",
        ...                     "branch_labels": {"b0": {"label": "any/global"}}, "answers_from": "default"})
        ['branches 3 (2 active) → 1 (1 active)', 'labels p/q, x/y → any/global', 'state digest sha256:aa → sha256:bb']
    """
    out = []
    for key in sorted(set(run) | set(refold)):
        a, b = run.get(key), refold.get(key)
        if a == b or key in ("policy", "answers_from", "log_records"):
            continue
        if key == "branches":
            def branches(v: dict[str, Any] | None) -> str:
                return f"{v['total']} ({v['active']} active)" if v else "not recorded"

            out.append(f"branches {branches(a)} → {branches(b)}")
        elif key == "branch_labels":
            def labels(rows: dict[str, Any] | None) -> str:  # None: a summary.json written before labels were recorded
                if rows is None:
                    return "not recorded"
                names = sorted({r["label"] for r in rows.values()})
                return ", ".join(names[:6]) + (f" (+{len(names) - 6} more)" if len(names) > 6 else "") if names else "none"

            if labels(a) != labels(b):
                out.append(f"labels {labels(a)} → {labels(b)}")
        elif key == "state_digest":
            out.append(f"state digest {a} → {b}")
        else:
            out.append(f"{key} {json.dumps(a)} → {json.dumps(b)}")
    order = {"branches": 0, "labels": 1, "state": 2}
    return sorted(out, key=lambda t: order.get(t.split(" ", 1)[0], 3))
