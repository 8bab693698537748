"""A RIZZ session: the effects around the pure core, for ``rizz run`` and for live applications.

``Session.open(path, policy=..., model=...)`` creates a RUN_DIR (the layout of ``rizz run``, with
its lock) or resumes one after any crash. ``answer(element)`` answers now and returns a
:class:`Pending` once its record is on disk; ``fold(pending_or_id, verdict)`` folds the verdict
whenever it arrives, in any order, and returns once it is on disk; then, when the routed
branch's distillation batch is due, the model distils rules, logged as their own record.
Semantics of late verdicts: specs/step-semantics.md, "Live sessions".

Example (a runnable version is in the README)::

    s = Session.open("runs/app", policy="default", model="embedded")
    p = s.answer({"id": "q1", "input": "What is 12 + 30?", "metadata": {"shape": "number"}})
    s.fold("q1", Verdict(1.0, "exact_match"))      # later; or s.fold(p, 1.0)
    s.digest(); s.close()

``Session.open`` is the one door into a RUN_DIR: it takes the lock, checks or writes
``run.json``, drops a partial last record, restores the fold (newest sound snapshot plus the
log after it) and finishes a distillation a crash interrupted. ``rizz run``
(:func:`rizz.engine.run.run_stream`) opens its directory through it too, naming the stream
(``stream=``), and loops :meth:`Session.run_element` (answer, verify, fold: one record).
``Session(policy, model, embedder)`` without a directory keeps everything in memory (tests,
notebooks).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import attrs

from rizz.adapters.embedder import Embedder
from rizz.adapters.models import load_model
from rizz.adapters.models.base import ModelBackend
from rizz.adapters.models.spec import backend_name, backend_rendering
from rizz.core import AdaptiveState, CandidateRule, Policy, StepInput, Verdict, digest, distill_batch
from rizz.core.serialize import canonical_json
from rizz.core.tenants import AnyState, answers_after, fed_branch, locate
from rizz.engine.answering import answer_element, default_rendering, embed_texts, verify_pending
from rizz.engine.codec import encode_step, encode_verdict
from rizz.engine.distill import distill_rules
from rizz.engine.logfold import LogFold, restore_fold, save_inflight
from rizz.engine.pending import Call, Pending
from rizz.errors import RizzError
from rizz.formats import logrecord as lr
from rizz.formats.policy_file import load_policy, policy_data
from rizz.formats.streams import BadLine, StreamElement, element_from_json
from rizz.formats.wording import plural
from rizz.store.durable import check_durability
from rizz.store.runlog import RunDir, RunDirBusy, RunDirMismatch, model_meta, write_json_atomic
from rizz.store.runstore import RunStoreError

__all__ = ["Call", "Folded", "Pending", "SNAPSHOT_RECORD_BYTES", "SNAPSHOT_TAIL_MAX", "Session", "SessionError", "WORDS", "check_resume",
           "default_rendering", "finished_run"]

_CLOSED_IDS = 4096  # recently folded / expired ids kept for error messages (bounded)
#: Snapshot bytes written per log record at most (see ``Session(snapshot_every=)``). A snapshot
#: costs ≈ 25 ns per byte on the benchmark machine (serialise, checksum, write, fsync;
#: results/2026-12-01-shell-overhead.md), so 8 KiB per record ≈ 0.2 ms of snapshot per record, whatever the size.
#: Bytes *written*: an incremental snapshot (rizz/store/snapchunks.py) writes what
#: changed since the one before, not the whole state.
SNAPSHOT_RECORD_BYTES = 8192
#: Records between two snapshots at most, whatever the rule above says: the refold tail a
#: resume after ``kill -9`` pays at worst (at 10^5 memories a record refolds in ≈ 0.4-0.6 ms,
#: so ≈ 0.5 s of tail; the first snapshot of a run, or of a resumed one whose chunks are all
#: new, would otherwise space the next one ~25,000 records away; resume times at 10^5:
#: results/2026-12-02-runstore.md).
SNAPSHOT_TAIL_MAX = 1000


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stream_meta(stream: str | Path | None) -> dict[str, Any]:
    """run.json's stream fields: the file and its sha256 (``rizz run``), or a live session's."""
    if stream is None:
        return {"kind": "session", "stream": None, "stream_sha256": None}
    return {"stream": str(Path(stream)), "stream_sha256": _sha256_file(Path(stream))}


def _policy_meta(pol: Policy) -> dict[str, Any]:
    return {"policy_digest": "sha256:" + hashlib.sha256(canonical_json(pol).encode()).hexdigest(), "policy_data": policy_data(pol)}


def check_resume(path: str | Path, stream: str | Path | None, policy: Policy, budget_cap: int | None, source: str | None = None,
                 limit: int | None = None, model: str | None = None) -> None:
    """Refuse (RunDirMismatch) resuming the RUN_DIR ``path`` with another stream, policy,
    budget cap or (when ``model`` is given) model, from run.json alone, or with a ``limit``
    below the steps its log holds (:meth:`~rizz.store.runlog.RunDir.check_limit`), before a
    model is loaded (a new directory passes; the model, embedder and rendering are checked
    again when :meth:`Session.open` opens it).
    ``source``: the policy as the command named it (file or name; default: the policy's name).
    ``model``: the backend name the command's model will carry, when known before loading it
    (:func:`rizz.adapters.models.spec.backend_name`).
    Every log record is read here too: one that cannot be read raises
    :class:`~rizz.store.runlog.RunDirCorrupt` naming ``log.jsonl:LINE`` before a model loads."""
    rd = RunDir(Path(path))
    if rd.meta_path.exists():
        rd.check_settings({**_stream_meta(stream), **_policy_meta(policy), "budget_cap": budget_cap,
                           "policy": source if source is not None else policy.name, "model": model},
                          ("stream_sha256", "policy_digest", "budget_cap") + (("model",) if model is not None else ()))
        rd.check_limit(limit)
        if limit is None:  # check_limit read the log only for a limit
            rd.finished_steps()


def finished_run(path: str | Path, todo: int, model: str, *, rendering: str | None = None,
                 user_model: str | None = None, embedder: Callable[[], Any] = Embedder) -> dict[str, Any] | None:
    """``summary.json`` of the RUN_DIR ``path`` when resuming it to ``todo`` elements with the
    model spec ``model`` would run nothing, as far as that is known without loading a model;
    else None (a new or unfinished directory, or a setting known only once the model loads:
    then the resume goes through :meth:`Session.open`, which says so itself).

    Nothing to run: the log holds ``todo`` finished steps or more, and ``summary.json`` counts
    every one of them (it was written after the last: nothing happened since), so the summary
    a resume would write is that one. Call it after :func:`check_resume` (stream, policy,
    budget cap, limit); it compares what :meth:`Session.open` compares after loading the
    model, by what the command names: the model by its backend name
    (:func:`~rizz.adapters.models.spec.backend_name`; a spec of unknown name gives None), the
    rendering given or else the model's default, the simulated user's model, the embedder
    (``embedder()`` makes the one the command would use, default :class:`Embedder`: its name
    and width are known before it loads; made only for a finished run).
    """
    rd = RunDir(Path(path))
    if not (rd.meta_path.is_file() and rd.summary_path.is_file()):
        return None
    try:
        meta = rd.meta()
        summary = json.loads(rd.summary_path.read_text(encoding="utf-8"))
        done = rd.finished_steps()
    except (OSError, ValueError):  # unreadable: Session.open says what is wrong
        return None
    if not isinstance(summary, dict) or summary.get("steps") != done or done < todo or not isinstance(summary.get("state_digest"), str):
        return None
    made = embedder()
    now = {"model": backend_name(model), "rendering": rendering or backend_rendering(model),
           "user_model": backend_name(user_model) if user_model else None, "embedder": made.name, "embedder_dim": made.dim}
    if now["model"] is None or (user_model and now["user_model"] is None):
        return None
    if any(meta.get(k) != v for k, v in now.items()):  # Session.open refuses it, naming the setting
        return None
    return summary


#: The terms :meth:`Session.open` words a refusal in (its ``words``): ``"api"``, its own
#: parameters (``budget_cap``, ``rendering``, another ``path``), for a Python caller;
#: ``"cli"``, the options of ``rizz run`` (``--budget``, ``--rendering``, another ``--out``),
#: as rizz's store words them (:data:`rizz.store.runlog.SETTING_NAMES`), for a command.
WORDS = ("api", "cli")

def _reword(error: BaseException, words: str) -> None:
    """Put a store's refusal (RunDirMismatch, RunDirBusy, RunStoreError) in ``words``'s terms, in
    place, rendered from what it carries (``worded``: a RunDirMismatch's ``changes``, a
    RunDirBusy's or a RunStoreError's ``kind``). One built from its message alone (none that
    rizz raises; a RunDirReadOnly's is the same in every terms) keeps its message."""
    if words != "api" or not error.args or not isinstance(error, (RunDirMismatch, RunDirBusy, RunStoreError)):
        return
    error.args = (error.worded("api"), *error.args[1:])


@contextmanager
def _worded(words: str) -> Iterator[None]:
    try:
        yield
    except BaseException as e:
        _reword(e, words)
        raise


def _remove_if_only_cache(root: Path) -> None:
    """Remove ``root`` when it holds nothing but an (unused) response cache."""
    import shutil

    if root.is_dir() and all(p.name.startswith("responses.sqlite") for p in root.iterdir()):
        shutil.rmtree(root, ignore_errors=True)


class SessionError(ValueError, RizzError):
    """A call the session refused; nothing was written and the state is unchanged."""


class Folded(NamedTuple):
    """What :meth:`Session.fold` did: the input as answered, the events folded, the model calls."""

    step_input: StepInput
    events: tuple[object, ...]
    calls: tuple[Call, ...]

    def __repr__(self) -> str:  # the input holds embeddings; the events, whole records
        kinds = ", ".join(type(e).__name__ for e in self.events)
        return f"Folded(id={self.step_input.item_id!r}, step={self.step_input.step}, events=[{kinds}], calls={len(self.calls)})"


def _element(obj: StreamElement | Mapping[str, Any]) -> StreamElement:
    if isinstance(obj, StreamElement):
        return obj
    if not isinstance(obj, Mapping):
        raise SessionError(f"answer: expected a stream element (dict or StreamElement), got {type(obj).__name__}")
    for k in ("id", "input"):
        if k not in obj:
            raise SessionError(f"answer: the element has no {k!r} (required, specs/stream-format.md)")
    try:
        return element_from_json(dict(obj))
    except ValueError as e:
        raise SessionError(f"answer: element {obj.get('id')!r}: {e}") from None


def _verdict(v: Verdict | float | None) -> Verdict:
    if isinstance(v, Verdict):
        r = v.reward
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        r = float(v)
    else:
        raise SessionError(f"fold: a verdict is a Verdict or a reward in [0, 1], got {v!r}")
    if not (isinstance(r, (int, float)) and math.isfinite(r) and 0.0 <= r <= 1.0):
        raise SessionError(f"fold: reward must be a number in [0, 1], got {r!r}")
    return v if isinstance(v, Verdict) else Verdict(float(r), "external")


class Session:
    """Stateful wrapper around the pure core; safe to call from several threads (one lock).

    Args:
      policy: the RIZZ policy.
      model: the frozen model (any :class:`ModelBackend`).
      embedder: has ``name``, ``dim`` and ``embed(texts) -> (n, d) float32`` L2-normalised.
      state: the state to continue from (default: empty); ``step``: index of the next answer.
      rendering: ``raw`` / ``chat`` / ``chat-turns`` (default: :func:`default_rendering`).
      embed_cache: embedding store (``embed(embedder, texts) -> (keys, (n, d))``, ``get(key)``).
      budget_cap: optional cap on the prompt budget (tokens), the same for every policy of a bench.
      run_dir: an entered :class:`~rizz.store.runlog.RunDir`: a call's records are appended
        there and, under its durability ``"disk"``, synced with one ``fdatasync`` before the
        call returns (outside the lock, so calls of several threads share a sync); None keeps
        the session in memory.
      snapshot_every: records between state snapshots in ``run_dir`` (0: none but at close); a
        floor: once a snapshot wrote more than ``snapshot_every`` × :data:`SNAPSHOT_RECORD_BYTES`,
        the next is taken after the smallest multiple of ``snapshot_every`` records that keeps
        at most that many snapshot bytes per record (so a snapshot's cost stays a bounded share
        of each record's), but never more than :data:`SNAPSHOT_TAIL_MAX` records on (rounded up
        to a multiple of ``snapshot_every``), so a resume refolds a tail of at most that many.
      keep_snapshots: keep only the newest this many snapshots (0: all; ``Session.open``: 3, so
        a long-lived session's directory grows with its memory and log only).
      user_model: the simulated customer of τ-bench episodes (None: ``model``).
      data_roots: directories where an episode's environment data (τ-bench databases) is
        looked up first (then ``$RIZZ_DATA_ROOT``, ``../shared/data``).
      history: the log records so far (as JSON; ``Session.open`` passes the RUN_DIR's), so
        :meth:`used_id` knows the ids answered before this session.

    Attributes set by :meth:`open` (None otherwise): ``meta``, the directory's ``run.json``;
    ``records``, with ``keep_records``: the log's records as JSON, those this session appends
    included.
    """

    meta: dict[str, Any] | None = None
    records: list[dict[str, Any]] | None = None

    def __init__(self, policy: Policy, model: ModelBackend, embedder: Any, *, state: AdaptiveState | None = None,
                 step: int = 0, rendering: str | None = None, embed_cache: Any = None, budget_cap: int | None = None,
                 run_dir: Any = None, snapshot_every: int = 0, fold: LogFold | None = None, keep_snapshots: int = 0,
                 user_model: ModelBackend | None = None, data_roots: tuple[Any, ...] = (),
                 history: Sequence[Mapping[str, Any]] = ()) -> None:
        self.policy = policy
        self.model = model
        self.embedder = embedder
        self.rendering = rendering or default_rendering(model)
        self.embed_cache = embed_cache
        self.budget_cap = budget_cap
        self.run_dir = run_dir
        self.snapshot_every = snapshot_every
        self.keep_snapshots = keep_snapshots
        self.user_model = user_model
        self.data_roots = tuple(data_roots)
        self._fold = fold if fold is not None else LogFold(policy, embed_cache, state=state, answers=step)
        self.core = self._fold.core
        self._lock = threading.RLock()
        self._closed: OrderedDict[str, str] = OrderedDict()  # id -> why it is no longer pending
        self._answered: dict[str, int] = {r["id"]: r["step"] for r in history if lr.opens_step(r)}
        self._open = True
        self._verify_calls: dict[tuple[str, int], tuple[Call, ...]] = {}  # llm_judge calls awaiting their fold
        self._snap_interval = snapshot_every  # records between snapshots (grows with the snapshot's size)
        if run_dir is not None and snapshot_every:
            size = run_dir.newest_snapshot_bytes()
            if size is not None:
                self._snap_interval = self._interval(size)

    # -- opening and closing ------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, policy: Policy | str = "default", model: ModelBackend | str = "embedded", *,
             embedder: Any = None, rendering: str | None = None, budget_cap: int | None = None,
             snapshot_every: int = 50, keep_snapshots: int = 3, cache: str | Path | None = None,
             user_model: ModelBackend | str | None = None, data_roots: tuple[Any, ...] = (),
             durability: str = "disk", policy_source: str | None = None, stream: str | Path | None = None,
             bad_lines: Sequence[BadLine] = (), keep_records: bool = False, log: Callable[[str], None] | None = None,
             words: str = "api") -> Session:
        """Create the session directory ``path``, or resume it (after a close or any crash).

        ``policy``: a Policy or a policy file/name; ``model``: a backend or a model spec
        (responses cached in ``path/responses.sqlite`` unless ``cache`` says otherwise);
        ``embedder``: default the bundled all-MiniLM-L6-v2; ``user_model``: τ-bench's simulated
        customer, a backend or a spec (default: ``model``); ``data_roots``: see the class.
        ``durability``: ``"disk"`` (default): ``answer`` / ``fold`` return once their records
        are on disk (fsynced; they survive a power loss); ``"os"``: once they are handed to the
        OS (they survive ``kill -9`` of the process, not a power loss or an OS crash; fsynced
        at ``close``). See :class:`~rizz.store.runlog.RunDir`.

        ``rizz run``'s directory (:func:`rizz.engine.run.run_stream`) is opened here too:
        ``stream``, the stream file it reads (its path and sha256 go into ``run.json``, and a
        resume must match them; None: a live session, ``run.json`` ``kind: "session"``);
        ``bad_lines``, that stream's lines skipped, written to ``bad_lines.json`` once the
        directory's settings are accepted (a refused resume writes nothing); ``policy_source``:
        the policy's name in ``run.json`` (default: the file or name given, or the Policy's
        name); ``keep_records``: keep :attr:`records`; ``log``: where the opening says what it
        wrote, repaired or ignored (bad lines skipped, a partial last record dropped, a
        snapshot that failed its checksum, rebuilt from the log); default: silently.

        ``words``: the terms a refusal is worded in (:data:`WORDS`): ``"api"`` (default), this
        method's parameters (``budget_cap: run has none, this call has 512``; another
        ``path``); ``"cli"``, the options of the command that opens it (``--budget``, another
        ``--out``: :func:`rizz.engine.run.run_stream` for ``rizz run``).

        Raises:
          RunDirBusy: another process (or an open Session) holds the directory.
          RunDirMismatch: the directory was started with another policy, model or embedder.
          ValueError: ``words`` is not one of :data:`WORDS`.
        """
        if words not in WORDS:
            raise ValueError(f"words must be one of {', '.join(WORDS)}, got {words!r}")
        check_durability(durability)
        say = log if log is not None else (lambda m: None)
        pol = policy if isinstance(policy, Policy) else load_policy(policy)
        source = policy_source if policy_source is not None else pol.name if isinstance(policy, Policy) else str(policy)
        of_stream = _stream_meta(stream)
        root = Path(path)
        new_dir = not root.exists()
        if isinstance(model, str) or isinstance(user_model, str):  # refuse a mismatched resume before loading a model
            with _worded(words):
                check_resume(root, stream, pol, budget_cap, source)
        try:
            if isinstance(model, str):
                root.mkdir(parents=True, exist_ok=True)
                model = load_model(model, cache=cache if cache is not None else root / "responses.sqlite")
            if isinstance(user_model, str):
                root.mkdir(parents=True, exist_ok=True)
                user_model = load_model(user_model, cache=cache if cache is not None else root / "responses.sqlite")
        except BaseException:
            if new_dir:  # a refused open leaves no directory behind (only what this call made: the cache file)
                _remove_if_only_cache(root)
            raise
        if embedder is None:
            embedder = Embedder()
        with _worded(words):
            rd = RunDir(root, durability=durability).__enter__()
        try:
            meta = rd.check_or_write_meta({
                **of_stream, "log_version": lr.LOG_VERSION, "policy": source,
                **_policy_meta(pol), "model": model.name, "embedder": embedder.name,
                "embedder_dim": embedder.dim, "rendering": rendering or default_rendering(model), "budget_cap": budget_cap,
                **({"user_model": user_model.name} if user_model is not None else {}), **model_meta(model),
            })
            if bad_lines:  # written only once the settings are accepted (a refused resume writes nothing)
                write_json_atomic(rd.root / "bad_lines.json", [{"line": b.line, "field": b.field, "message": b.message} for b in bad_lines])
                say(f"skipped {plural(len(bad_lines), 'bad line')} of {stream}; see {rd.root / 'bad_lines.json'}")
            if rd.repair():
                say(f"{rd.log_path}: dropped a partial last record left by an interrupted run")
            fold, records = restore_fold(rd, pol)
            for n, why in rd.ignored_snapshots:
                say(f"{rd.snap_dir / f'{n:08d}.json'}: {why}; ignored and rebuilt from the log")
            s = cls(pol, model, embedder, rendering=meta["rendering"], embed_cache=rd.embeddings, budget_cap=budget_cap,
                    run_dir=rd, snapshot_every=snapshot_every, fold=fold, keep_snapshots=keep_snapshots, user_model=user_model,
                    data_roots=data_roots, history=records)
            s.meta = meta
            if keep_records:
                s.records = records
            for r in records[-_CLOSED_IDS:]:  # why recent ids are no longer pending, for error messages
                kind = r.get("kind")
                if kind in ("verdict", "expire"):
                    s._close_id(r["id"], "already folded" if kind == "verdict" else f"expired: {r['reason']}")
            with s._lock:
                s.recover(records[-1] if records else None)
                s._expire_overdue()
                s._sync()
            return s
        except BaseException as e:
            rd.__exit__(type(e), e, None)
            _reword(e, words)
            raise

    def close(self, *, snapshot: bool = True, error: BaseException | None = None) -> None:
        """Snapshot the state (with the answers still pending) and release the directory.

        ``snapshot=False``: release it without that snapshot (``rizz run`` keeps the snapshots
        taken every ``snapshot_every`` records). ``error``: the exception the caller closes on;
        a failing last sync of the log then does not replace it.
        """
        with self._lock:
            if not self._open:
                return
            self._open = False
            if self.run_dir is not None:
                if self._failed is None and snapshot:  # (after a failed sync the state may be ahead of the disk: no snapshot)
                    self._snapshot()
                if self._failed is not None:
                    self.run_dir.__exit__(OSError, None, None)
                else:
                    self.run_dir.__exit__(type(error) if error is not None else None, error, None)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------------
    @property
    def state(self) -> AnyState:
        """The state: an ``AdaptiveState``, or a :class:`~rizz.core.TenantStates` once an element
        named a ``metadata.tenant`` (one sub-state per tenant)."""
        return self._fold.state

    @property
    def step_index(self) -> int:
        """Index of the next answer (answers issued so far)."""
        return self._fold.answers

    def digest(self) -> str:
        """``sha256:…`` of the state (equal to ``rizz replay`` of the directory)."""
        with self._lock:
            return digest(self._fold.state)

    def pending_ids(self) -> list[str]:
        """Ids of the answers waiting for a verdict, in answer order."""
        with self._lock:
            return [k for k, _ in sorted(self._fold.inflight.items(), key=lambda kv: kv[1].step_input.step)]

    def used_id(self, item_id: str) -> str | None:
        """None when ``item_id`` was never answered in this session's log; else what became of
        its latest answer, e.g. ``"answered at step 3, pending"`` or ``"answered at step 3,
        already folded"`` (``rizz serve`` refuses such an id with 409)."""
        with self._lock:
            step = self._answered.get(item_id)
            if step is None:
                return None
            why = "pending" if item_id in self._fold.inflight else self._closed.get(item_id, "no longer pending")
            return f"answered at step {step}, {why}"

    # -- the live API -------------------------------------------------------------------
    def answer(self, element: StreamElement | Mapping[str, Any]) -> Pending:
        """Answer ``element`` (a stream-format dict or a StreamElement) against the current state.

        A context-only element is stored at once (nothing to fold). Raises SessionError for an
        element missing ``id`` or ``input``, a malformed one, or an id already pending.
        """
        el = _element(element)
        with self._lock:
            self._check_open()
            self._expire_overdue()
            w = self._fold.inflight.get(el.id)
            if w is not None:
                raise SessionError(f"answer: {el.id!r} is already pending (answered at step {w.step_input.step}); "
                                   "fold or expire it before answering the same id again")
            t0 = time.perf_counter()
            p = self._answer(el)
            rec = self._record(p, "step" if el.context_only else "answer", None, time.perf_counter() - t0)
            self._commit(rec, sync=False, inp=p.step_input, routed=p.routed)
            self._expire_overdue()  # at once: pending ids never depend on whether the next call is a reopen
            ticket = self._ticket
            if el.context_only:
                self._close_id(el.id, "context-only: stored when answered, no verdict to fold")
        self._sync(ticket)  # outside the lock: threads answering at once share one sync (group commit)
        return p

    def fold(self, pending: Pending | str, verdict: Verdict | float | None) -> Folded:
        """Fold the verdict of a pending answer (a :class:`Pending` or its id), at any later time.

        A bare number is taken as ``Verdict(reward, "external")``. Raises SessionError (nothing
        written, state unchanged) for an unknown, expired or already-folded id, a Pending of an
        earlier answer of the same id, or a reward that is not a number in [0, 1].
        """
        item_id = pending.id if isinstance(pending, Pending) else pending
        if not isinstance(item_id, str):
            raise SessionError(f"fold: expected a Pending or an id, got {pending!r}")
        v = _verdict(verdict)
        ticket = 0  # the verdict and the distillation it makes due reach the disk with one sync, outside the lock
        try:
            with self._lock:
                self._check_open()
                self._expire_overdue()
                w = self._waiting(item_id, "fold")
                if isinstance(pending, Pending) and pending.step != w.step_input.step:
                    raise SessionError(f"fold: this Pending of {item_id!r} was answered at step {pending.step}; the id was "
                                       f"answered again at step {w.step_input.step} (fold the newer answer)")
                vcalls = self._verify_calls.pop((item_id, w.step_input.step), ())
                rec = lr.LogRecord(step=w.step_input.step, id=item_id, v=lr.LOG_VERSION, kind="verdict",
                                   verdict=encode_verdict(v), calls=list(vcalls))
                events = self._commit(rec, sync=False)
                ticket = self._ticket
                self._close_id(item_id, "already folded")
                more, calls = self._distill(w.step_input.step, item_id, w.decision.branch_id)
                ticket = self._ticket
                return Folded(w.step_input, events + more, tuple(vcalls) + tuple(calls))
        finally:
            self._sync(ticket)

    def expire(self, pending: Pending | str, reason: str = "given up by the caller") -> None:
        """Give up on a pending answer: logged with ``reason``; it never becomes memory."""
        item_id = pending.id if isinstance(pending, Pending) else pending
        with self._lock:
            self._check_open()
            w = self._waiting(item_id, "expire")
            self._expire_one(item_id, w.step_input.step, reason, False)
            ticket = self._ticket
        self._sync(ticket)

    # -- rizz run ---------------------------------------------------------------------------
    def run_element(self, el: StreamElement, judge_model: ModelBackend | None = None) -> list[dict[str, Any]]:
        """Answer, verify and fold ``el`` at once (one ``step`` record, then any ``distill`` record).

        Returns the records written (as JSON objects).
        """
        with self._lock:
            self._check_open()
            t0 = time.perf_counter()
            p = self._answer(el)
            vcalls: list[Call] = []
            v = verify_pending(p, self.model, judge_model, vcalls, self.data_roots, self.policy.write.corrections)
            if vcalls:  # an llm_judge verifier's calls are counted with the step (summary.json's calls_by_kind verify)
                p = attrs.evolve(p, calls=p.calls + tuple(vcalls))
            rec = self._record(p, "step", v, time.perf_counter() - t0)
            self._collect = []
            try:  # the step and its distillation reach the disk with one sync
                self._commit(rec, sync=False, inp=p.step_input, routed=p.routed)
                if v is not None and p.routed is not None:
                    self._distill(p.step, el.id, p.routed.decision.branch_id)
                return self._collect
            finally:
                self._collect = None
                self._sync(self._ticket)

    def verify(self, p: Pending, judge_model: ModelBackend | None = None) -> Verdict | None:
        """Score ``p`` with the element's own verifier (None for context-only input).

        An ``llm_judge`` verifier's model calls (kind ``verify``) are logged with the verdict
        when ``p`` is folded, and returned in :attr:`Folded.calls`, so ``summary.json`` counts them.
        """
        calls: list[Call] = []
        v = verify_pending(p, self.model, judge_model, calls, self.data_roots, self.policy.write.corrections)
        if calls:
            with self._lock:
                if len(self._verify_calls) >= _CLOSED_IDS:  # bounded: verified but never folded
                    self._verify_calls.pop(next(iter(self._verify_calls)))
                self._verify_calls[(p.id, p.step)] = tuple(calls)
        return v

    # -- inside -----------------------------------------------------------------------------
    _collect: list[dict[str, Any]] | None = None  # records written, gathered for run_element

    def _answer(self, el: StreamElement) -> Pending:
        return answer_element(self.core, self._fold.state, el, self._fold.answers, model=self.model, embedder=self.embedder,
                              store=self.embed_cache, rendering=self.rendering, budget_cap=self.budget_cap,
                              user_model=self.user_model, data_roots=self.data_roots)

    def _record(self, p: Pending, kind: str, verdict: Verdict | None, wall_s: float) -> lr.LogRecord:
        """``p``'s log record (:func:`~rizz.engine.codec.encode_step`); its prompt's text is kept
        in the RUN_DIR under the sha256 the record names."""
        rec = encode_step(p, kind, verdict, wall_s)
        if rec.prompt is not None and p.prompt is not None and self.run_dir is not None:
            self.run_dir.save_prompt(rec.prompt.sha256, p.prompt.text)
        return rec

    _failed: str | None = None  # why the session stopped: a sync of its log failed

    def _check_open(self) -> None:
        if not self._open:
            raise SessionError("the session is closed (Session.open the directory again)")
        if self._failed is not None:
            raise SessionError(f"the session stopped after a failed disk sync ({self._failed}); close it and "
                               "Session.open the directory again (it refolds from what is on disk)")

    def _waiting(self, item_id: str, what: str) -> Any:
        w = self._fold.inflight.get(item_id)
        if w is None:
            why = self._closed.get(item_id)
            raise SessionError(f"{what}: {item_id!r} is not pending" + (f" ({why})" if why else " (unknown id)"))
        return w

    def _close_id(self, item_id: str, why: str) -> None:
        self._closed[item_id] = why
        self._closed.move_to_end(item_id)
        while len(self._closed) > _CLOSED_IDS:
            self._closed.popitem(last=False)

    def _commit(self, rec: lr.LogRecord, sync: bool = True, **given: Any) -> tuple[object, ...]:
        """Append ``rec`` (on disk before anything changes; ``sync=False``: written, made durable
        by the caller's :meth:`_sync` before it returns), then fold it. The vectors the record
        names are flushed first (their deferred fsyncs), so the log never names a lost vector."""
        data = lr.unstructure(rec)
        if self.run_dir is not None:
            flush = getattr(self.embed_cache, "flush", None)
            if flush is not None:
                flush()
            self._ticket = self.run_dir.append(data, sync=sync)
        if self._collect is not None:
            self._collect.append(data)
        if self.records is not None:
            self.records.append(data)
        events = self._fold.apply(rec, **given)
        if rec.kind in ("step", "answer"):
            self._answered[rec.id] = rec.step
        if self.run_dir is not None and self.snapshot_every and self._fold.folded % self._snap_interval == 0:
            self._snapshot()
        return events

    def _interval(self, snapshot_size: int) -> int:
        """Records until the next snapshot after one that wrote ``snapshot_size`` bytes: a
        multiple of ``snapshot_every``, at most :data:`SNAPSHOT_RECORD_BYTES` snapshot bytes per
        record, at most :data:`SNAPSHOT_TAIL_MAX` records (rounded up to the multiple)."""
        k = -(-snapshot_size // (self.snapshot_every * SNAPSHOT_RECORD_BYTES))
        cap = -(-SNAPSHOT_TAIL_MAX // self.snapshot_every)
        return self.snapshot_every * max(1, min(k, cap))

    _ticket = 0  # records appended to the log so far (RunDir.append's count), for _sync

    def _sync(self, upto: int | None = None) -> None:
        """Where a call returns: the first ``upto`` records (None: all) on disk (durability
        "disk"; "os": they are already with the OS). Safe without the lock (group commit)."""
        if self.run_dir is not None and self.run_dir.durability == "disk":
            try:
                self.run_dir.sync() if upto is None else self.run_dir.sync_log(upto)
            except OSError as e:  # records are folded in memory but maybe not on disk: refuse further calls
                self._failed = str(e)
                raise

    def _snapshot(self) -> None:
        n = self._fold.folded
        save_inflight(self.run_dir.inflight_path(n), self._fold)
        size = self.run_dir.save_snapshot(n, self._fold.state)
        if self.snapshot_every:
            self._snap_interval = self._interval(size)
        if self.keep_snapshots:
            self.run_dir.prune_snapshots(self.keep_snapshots)

    def _distill(self, step: int, item_id: str, branch_id: str) -> tuple[tuple[object, ...], tuple[Call, ...]]:
        """When ``branch_id``'s batch is due: ask the model, log a ``distill`` record, fold it.
        ``branch_id`` is a view key (``"<tenant>/<id>"`` behind a tenant's wall)."""
        _, own, bid = locate(self._fold.state, branch_id)
        batch = distill_batch(own, self.policy, bid)
        if not batch:
            return (), ()
        label = own.branches[bid].label
        res = distill_rules(self.model, [(e.input, e.answer) for e in batch], function=label.function, application=label.application)
        calls = (Call.of("distill", res.generation),) if res.generation is not None else ()
        embs = embed_texts(self.embedder, self.embed_cache, [f"IF {r.antecedent} THEN {r.strategy}" for r in res.rules]) if res.rules else []
        rules = tuple(CandidateRule(r.antecedent, r.strategy, e.vec) for r, e in zip(res.rules, embs))
        rec = lr.LogRecord(step=step, id=item_id, v=lr.LOG_VERSION, kind="distill", branch=branch_id,
                           rules=[[r.antecedent, r.strategy, e.key] for r, e in zip(res.rules, embs)], calls=list(calls))
        return self._commit(rec, sync=False, rules=rules), calls  # synced by the caller, with its verdict

    def recover(self, last: dict[str, Any] | None) -> list[dict[str, Any]]:
        """After a crash between a verdict (the log's ``last`` record, as JSON) and its
        distillation: distil now (whether it is due is a function of the state). Returns the
        records written. ``Session.open`` calls it."""
        with self._lock:
            self._collect = []
            try:
                self._finish_distillation(last)
                self._sync()
                return self._collect
            finally:
                self._collect = None

    def _finish_distillation(self, last: dict[str, Any] | None) -> None:
        if last is None or last.get("kind", "step") not in ("step", "verdict") or "verdict" not in last or last.get("v") != lr.LOG_VERSION:
            return
        branch = (last.get("route") or {}).get("branch")
        if last["kind"] == "verdict":
            branch = fed_branch(self._fold.state, last["step"])  # behind the tenant's wall, if any
        if branch is not None:
            self._distill(last["step"], last["id"], branch)

    def _expire_overdue(self) -> None:
        fb = self.policy.feedback
        if not (fb.max_pending or fb.max_pending_seconds) or not self._fold.inflight:
            return
        now = time.time()
        for item_id, w in sorted(self._fold.inflight.items(), key=lambda kv: kv[1].step_input.step):
            later = answers_after(self._fold.state, w.decision, w.step_input, self._fold.answers)  # within its tenant
            if fb.max_pending and later > fb.max_pending:
                self._expire_one(item_id, w.step_input.step, f"{later} later answers issued (feedback.max_pending {fb.max_pending})", False)
            elif fb.max_pending_seconds and w.time is not None and now - w.time > fb.max_pending_seconds:
                self._expire_one(item_id, w.step_input.step, f"no verdict within {fb.max_pending_seconds:g} s (feedback.max_pending_seconds)", False)

    def _expire_one(self, item_id: str, step: int, reason: str, sync: bool = True) -> None:
        self._commit(lr.LogRecord(step=step, id=item_id, v=lr.LOG_VERSION, kind="expire", reason=reason), sync=sync)
        self._close_id(item_id, f"expired: {reason}")
