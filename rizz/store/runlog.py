"""RUN_DIR: the durable record of a run.

Layout::

    RUN_DIR/
      run.json            what the run is (stream hash, policy, model, embedder, rendering)
      log.jsonl           append-only typed records (rizz/formats/logrecord.py), flushed + synced:
                          a step, an answer, a verdict, an expiry or a distillation each
      store.sqlite        content-addressed side store (rizz/store/runstore.py, SQLite WAL):
                          embeddings by key, compiled prompt texts by sha256, snapshot chunks;
                          committed before the log record that names them
      snapshots/NNNNNNNN.json   state snapshots (rizz.core.to_data; large parts as chunks in
                          store.sqlite, rizz/store/snapchunks.py), checksummed, atomic writes;
                          the newest few are kept
      snapshots/NNNNNNNN.inflight.json   pending answers at that snapshot (log format 2)
      responses.sqlite    response cache (model, prompt, parameters) → generation
      summary.json        summary (specs/stream-format.md), at the end of a run and by replay;
                          its log_records says how much of the log it folds (a resume that
                          did not finish leaves the shorter log's, which replay rewrites)
      summary.replay.json a refold's summary by replay (another policy, or another digest than
                          summary.json's); removed by the first record appended after it
      .lock               held by the process writing the directory (never by a reader)

A RUN_DIR written before ``store.sqlite`` (results/2026-12-02-runstore.md) has ``embeddings/`` (one ``.npy`` file per vector,
:class:`~rizz.store.embeddings.EmbeddingStore`) and ``prompts/`` (one ``<sha256>.txt`` per prompt)
instead of ``store.sqlite``, and full snapshots. It is read and resumed in that layout
(:attr:`RunDir.layout` ``"files"``) until ``rizz convert`` moves it into ``store.sqlite``
(:func:`rizz.store.convert.convert_run_dir`).

A record is appended before the call that made it returns, so a kill at any moment leaves at
most a partial last line, which :meth:`RunDir.records` drops (and :meth:`RunDir.repair`
truncates) — nothing already recorded is lost.

Writers and readers. Whatever writes a RUN_DIR holds its lock (``with RunDir(...) as rd``, a
:class:`~rizz.engine.session.Session`); a RunDir that does not hold it only reads: its store
is opened read-only (:class:`~rizz.store.runstore.RunStore` ``readonly``: no file created or
changed, also in a folder that cannot be written) and writes through it are refused. Reading
needs no lock, also beside a writer: the log is only appended to and :meth:`RunDir.records`
stops before a partial last line, and a record is appended only after the store rows it
names are committed, so a reader sees a prefix of the run with everything it names.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from rizz.core import AdaptiveState, from_data, to_data
from rizz.errors import RizzError
from rizz.extras import extra_needed
from rizz.formats.logrecord import load_line, steps_in
from rizz.formats.policy_file import parse_policy
from rizz.formats.wording import plural
from rizz.store.durable import (
    FAULT_ENV,
    check_durability,
    disk_full,
    fault_point,
    fsync_path,
    read_snapshot,
    snapshot_bytes,
    snapshot_header,
    write_then_rename,
)
from rizz.store.embeddings import EmbeddingStore
from rizz.store.refusal import check_words, in_terms
from rizz.store.runstore import STORE_FILE, RunStore
from rizz.store.snapchunks import ChunkError, SnapshotChunks

with extra_needed("lab", "the run log"):
    from filelock import FileLock, Timeout

__all__ = ["SETTING_NAMES", "RunDir", "RunDirBusy", "RunDirCorrupt", "RunDirMismatch", "RunDirReadOnly", "SettingChange", "change_line",
           "mismatch_message", "setting_changes", "write_json_atomic"]


class RunDirBusy(RuntimeError, RizzError):
    """The RUN_DIR cannot be taken for writing: another process holds its lock (or, as
    :class:`RunDirReadOnly`, the folder cannot be written at all).

    ``root``: the RUN_DIR (None for an error built from its message alone); ``kind``: who holds
    it, ``"this process"`` (an open Session or run of this process) or ``"another process"``
    (``""`` for an error built from its message alone); ``owner``: the pid that holds the lock,
    as ``.lock.pid`` names it (``"?"`` when unknown: the holder has not written it yet, or it
    cannot be read; :attr:`pid_words` says so). :meth:`worded` renders it for a command
    line or a Python caller (:mod:`rizz.store.refusal`); the message (``str``) is in a command
    line's terms."""

    def __init__(self, message: str | None = None, *, root: str | os.PathLike[str] | None = None, kind: str = "",
                 owner: str = "?") -> None:
        self.root = Path(root) if root is not None else None
        self.kind, self.owner = kind, owner
        if kind and (kind not in _BUSY or self.root is None):
            raise ValueError(f"a RunDirBusy's kind is one of {', '.join(map(repr, _BUSY))}, with its root; got {kind!r}")
        super().__init__(*((message,) if message is not None else (self.worded("cli"),) if kind else ()))

    @property
    def pid_words(self) -> str:
        """``pid 4242``, or ``pid not yet written`` when :attr:`owner` is not a pid (``.lock.pid``
        read while its holder was writing it, or missing)."""
        return f"pid {self.owner}" if self.owner.isdigit() else "pid not yet written"

    def worded(self, words: str) -> str:
        """The refusal in ``words``'s terms (:data:`rizz.store.refusal.WORDINGS`): rendered from
        :attr:`kind`, or the message as it is for an error built from its message alone (and
        for a :class:`RunDirReadOnly`, the same in every terms). Another process's lock says
        ``wait for it or use another --out`` (``"cli"``), ``... or give Session.open another
        path`` (``"api"``), ``... or use another --data folder`` (``"serve"``).

        Raises:
          ValueError: ``words`` is not one of :data:`~rizz.store.refusal.WORDINGS`.

        Example:
            >>> print(RunDirBusy(root="runs/a", kind="another process", owner="4242").worded("api"))
            runs/a is in use by another rizz process (pid 4242); wait for it or give Session.open another path
        """
        check_words(words)
        if self.root is None or not self.kind:
            return str(self)
        if self.kind == "this process":
            return f"{self.root} is already open in this process (a Session or a run holds it); close that one first, or use another directory"
        other = in_terms(words, cli="use another --out", api="give Session.open another path", serve="use another --data folder")
        return f"{self.root} is in use by another rizz process ({self.pid_words}); wait for it or {other}"


class RunDirCorrupt(ValueError, RizzError):
    """A file of the RUN_DIR that rizz wrote cannot be read as rizz writes it: ``run.json`` that
    is empty, not JSON or not a JSON object, or a ``log.jsonl`` record that is not JSON. The
    message names the file (and the log's line) and what is wrong; a ValueError, as these were
    before they had a class of their own."""


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words (``an array``, ``a string``, ...)."""
    return {list: "an array", dict: "an object", str: "a string", bool: "true or false", type(None): "null"}.get(type(value), "a number")


#: :attr:`RunDirBusy.kind`'s values.
_BUSY = ("this process", "another process")


class RunDirReadOnly(RunDirBusy):
    """The RUN_DIR's lock file cannot be created or opened for writing (a read-only folder or
    file system, or no permission): nothing can be written there. The message names the path,
    and is the same in every terms (:meth:`~RunDirBusy.worded`).

    ``reason``: the path that could not be written and why (``PATH: Read-only file system``);
    ``summary``: set by :func:`rizz.engine.run.replay_run` to the refolded summary it could not write."""

    reason: str = ""
    summary: dict[str, Any] | None = None


#: run.json's fields a resume must match: those that decide the results.
_SETTINGS = ("stream_sha256", "policy_digest", "model", "embedder", "embedder_dim", "rendering", "budget_cap", "user_model")


class SettingChange(NamedTuple):
    """One setting a resume gives otherwise than ``run.json`` recorded: ``setting``, the
    parameter of :meth:`~rizz.engine.session.Session.open` that sets it (``stream``,
    ``policy``, ``model``, ``embedder``, ``embedder_dim``, ``rendering``, ``budget_cap``,
    ``user_model``, or another ``run.json`` key, such as a peer's ``peer_options``); ``run``, the
    run's value and ``this``, this command's or call's (the stream and the policy by their path
    or name); ``detail``, what changed when the names are the same, or the policy's differing
    fields (``""``: nothing more). ``limit`` (no ``run.json`` key): a resume's limit below the
    steps the log holds, ``run`` those steps and ``this`` the limit (:meth:`RunDir.check_limit`)."""

    setting: str
    run: Any
    this: Any
    detail: str = ""


class RunDirMismatch(RuntimeError, RizzError):
    """RUN_DIR was started with a different stream, policy, model or embedder (or a resume asks
    for fewer steps than it holds).

    ``root``: the RUN_DIR; ``changes``: the settings that differ (:class:`SettingChange`; a
    ``limit`` one for fewer steps; empty for a refusal built from its message alone, which
    rizz does not raise); :meth:`worded` renders them for a command
    line, a Python caller or ``rizz serve`` (:mod:`rizz.store.refusal`). The message (``str``)
    is in a command line's terms."""

    def __init__(self, message: str | None = None, *, root: str | os.PathLike[str] | None = None,
                 changes: tuple[SettingChange, ...] = ()) -> None:
        self.root = Path(root) if root is not None else None
        self.changes = tuple(changes)
        super().__init__(message if message is not None else mismatch_message(self.root, self.changes, "cli"))

    def worded(self, words: str) -> str:
        """The refusal in ``words``'s terms (:data:`rizz.store.refusal.WORDINGS`; ``"cli"``:
        ``rizz run``'s options; ``"api"``: :meth:`~rizz.engine.session.Session.open`'s
        parameters; ``"serve"``: ``rizz serve``'s ``--data`` folder for the directory, else as
        ``"cli"``): rendered from :attr:`changes`, or the message as it is when it carries none.

        Raises:
          ValueError: ``words`` is not one of :data:`~rizz.store.refusal.WORDINGS`."""
        check_words(words)
        return mismatch_message(self.root, self.changes, words) if self.changes else str(self)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temp file, fsync and ``os.replace``."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunDir:
    """Owner of one RUN_DIR. Use as a context manager to hold the lock (and write); outside it,
    a reader (module docstring).

    ``durability``: ``"disk"`` (default): :meth:`append` returns once the record is on disk
    (``fdatasync``; the directory is fsynced once, when the log is created), and the store
    commits (fsyncs) the vectors and prompt a record names before the record is written
    (a Session flushes it first). In the ``"files"`` layout the vectors' renames into
    ``embeddings/`` are not followed by a directory fsync: on a journaling file system (ext4,
    xfs) the log's next sync commits them, as they happened before it. ``"os"``: records,
    vectors and prompts are handed to the OS (written and flushed, not fsynced): they survive
    ``kill -9`` of the process but not a power loss or an OS crash; the log and the store are
    fsynced on :meth:`sync` (a Session's close). Snapshots are fsynced either way.
    """

    def __init__(self, root: str | os.PathLike[str], *, durability: str = "disk") -> None:
        check_durability(durability)
        self.durability = durability
        self._store: EmbeddingStore | RunStore | None = None
        self._sync_lock = threading.Lock()
        self.root = Path(root)
        self.log_path = self.root / "log.jsonl"
        self.meta_path = self.root / "run.json"
        self.summary_path = self.root / "summary.json"
        self.replay_summary_path = self.root / "summary.replay.json"
        self.replay_summary_removed = False  # the first append removed a summary.replay.json (it refolded a shorter log)
        self.snap_dir = self.root / "snapshots"
        self.prompt_dir = self.root / "prompts"  # the "files" layout only
        self.store_path = self.root / STORE_FILE
        self._lock: FileLock | None = None
        self._log: Any = None
        self.ignored_snapshots: list[tuple[int, str]] = []  # (steps, why) skipped by latest_snapshot

    # -- lock ------------------------------------------------------------------------
    def __enter__(self) -> RunDir:
        lock = FileLock(str(self.root / ".lock"), timeout=0)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except Timeout:
            try:  # empty while its holder writes it (between taking the lock and writing the pid)
                owner = (self.root / ".lock.pid").read_text().strip() or "?"
            except (OSError, UnicodeDecodeError):
                owner = "?"
            held_by = "this process" if owner == str(os.getpid()) else "another process"
            raise RunDirBusy(root=self.root, kind=held_by, owner=owner) from None
        except OSError as e:
            raise _read_only(self.root, e) from None
        try:
            (self.root / ".lock.pid").write_text(str(os.getpid()))
        except OSError as e:
            lock.release()
            raise _read_only(self.root, e) from None
        self._drop_store()  # a store read before the lock was taken was opened read-only
        self._lock = lock
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.sync()
        except OSError:
            if not exc or exc[0] is None:
                raise
        finally:
            with self._sync_lock:
                if self._log is not None:
                    self._log.close()
                    self._log = None
            try:
                if self._store is not None and isinstance(self._store, RunStore):
                    try:
                        self._store.close()
                    except OSError:
                        if not exc or exc[0] is None:
                            raise
            finally:
                self._drop_store()  # a later read reopens it read-only
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

    def _drop_store(self) -> None:
        if isinstance(self._store, RunStore) and self._store.readonly:
            self._store.close()
        self._store, self._chunks = None, None

    # -- metadata ----------------------------------------------------------------------
    def check_or_write_meta(self, meta: dict[str, Any]) -> dict[str, Any]:
        """Write ``run.json`` for a new run; for an existing one, refuse any difference in
        the fields that decide the results (stream, policy, model, embedder, rendering, budget cap,
        the simulated user's model of τ-bench episodes)."""
        if not self.meta_path.exists():
            write_json_atomic(self.meta_path, meta)
            return meta
        return self.check_settings(meta, _SETTINGS)

    def check_settings(self, meta: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        """Refuse (RunDirMismatch, its ``changes`` naming each setting) a difference between
        ``run.json`` and ``meta`` in ``keys``; return ``run.json``. A resume checks what it knows before loading a model with the
        keys that need none (stream, policy, budget cap), then every key."""
        old = self._read_meta()
        diffs = [k for k in keys if old.get(k) != meta.get(k)]
        if "policy_digest" in diffs and _same_policy(old.get("policy_data"), meta.get("policy_data")):
            diffs.remove("policy_digest")  # written before a policy field was added (its default keeps the old behaviour)
        if diffs:
            changes = setting_changes(old, meta, [k for k in diffs if k != "policy_digest"])
            if "policy_digest" in diffs:
                changes.append(_policy_change(old, meta))
            raise RunDirMismatch(root=self.root, changes=tuple(changes))
        return old

    def finished_steps(self) -> int:
        """Elements the log holds an answer for (``step`` and live ``answer`` records; a partial
        last line is not one): the steps a resume keeps."""
        return steps_in(self.records())

    def check_limit(self, limit: int | None) -> None:
        """Refuse (RunDirMismatch, its ``changes`` a ``limit`` :class:`SettingChange`: the
        finished steps, the limit) resuming with a ``--limit`` below the steps the log already
        holds: a resume keeps every finished step, so its summary and report would count more
        steps than the command asks for. Nothing to check without a limit or a log."""
        if limit is None or not self.log_path.exists():
            return
        done = self.finished_steps()
        if done > limit:
            raise RunDirMismatch(root=self.root, changes=(SettingChange("limit", done, limit),))

    def meta(self) -> dict[str, Any]:
        if not self.root.exists():
            raise FileNotFoundError(f"{self.root}: no such directory (a RUN_DIR is the --out of rizz run)")
        if not self.meta_path.exists():
            subs = sorted(d.name for d in self.root.glob("*/") if (d / "run.json").exists()) if self.root.is_dir() else []
            hint = f"; a bench folder? its runs: {', '.join(str(self.root / s) for s in subs)}" if subs else ""
            raise FileNotFoundError(f"{self.root}: no run.json — not a rizz RUN_DIR{hint}")
        return self._read_meta()

    def _read_meta(self) -> dict[str, Any]:
        """``run.json`` as a dict; :class:`RunDirCorrupt` naming it when it is empty, not UTF-8,
        not JSON or not a JSON object (an OSError, such as no such file, propagates)."""
        try:
            text = self.meta_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise RunDirCorrupt(f"{self.meta_path}: not UTF-8 text (byte {e.start + 1}), not the run's settings") from None
        if not text.strip():
            raise RunDirCorrupt(f"{self.meta_path}: empty, not the run's settings (a JSON object rizz writes when a run starts)")
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as e:
            raise RunDirCorrupt(f"{self.meta_path}: not valid JSON ({e.msg.removesuffix(' at')} at line {e.lineno} column {e.colno}; "
                                "a truncated or edited file), not the run's settings") from None
        if not isinstance(meta, dict):
            raise RunDirCorrupt(f"{self.meta_path}: holds {_json_kind(meta)}, not the run's settings (a JSON object)")
        return meta

    @property
    def layout(self) -> str:
        """``"sqlite"`` (``store.sqlite``; every new RUN_DIR) or ``"files"`` (``embeddings/`` and
        ``prompts/`` folders and no ``store.sqlite``: written before it existed, until ``rizz convert``)."""
        if self.store_path.exists():
            return "sqlite"
        return "files" if (self.root / "embeddings").is_dir() or self.prompt_dir.is_dir() else "sqlite"

    @property
    def embeddings(self) -> EmbeddingStore | RunStore:
        """The run's embedding store (one per RunDir, with its ``durability``): a
        :class:`~rizz.store.runstore.RunStore`, or in the ``"files"`` layout an
        :class:`~rizz.store.embeddings.EmbeddingStore` on ``embeddings/``; read-only unless this
        RunDir holds the lock (module docstring)."""
        if self._store is None:
            readonly = self._lock is None
            if self.layout == "files":
                self._store = EmbeddingStore(self.root / "embeddings", durability=self.durability, readonly=readonly)
            else:
                self._store = RunStore(self.store_path, durability=self.durability, readonly=readonly)
        return self._store

    # -- log -----------------------------------------------------------------------------
    def repair(self) -> int:
        """Truncate a partial last line left by a kill. Returns the bytes removed."""
        if not self.log_path.exists():
            return 0
        data = self.log_path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end == len(data):
            return 0
        with open(self.log_path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        return len(data) - end

    def records(self) -> Iterator[dict[str, Any]]:
        """The complete records of ``log.jsonl`` in order (a partial last line is skipped).
        A record that is not a JSON object raises :class:`RunDirCorrupt` naming ``log.jsonl:LINE``."""
        if not self.log_path.exists():
            return
        with open(self.log_path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    return
                try:
                    record = load_line(line)
                except json.JSONDecodeError as e:
                    raise RunDirCorrupt(f"{self.log_path}:{n}: corrupt log record ({e.msg.removesuffix(' at')} at column {e.colno})") from None
                except UnicodeDecodeError as e:
                    raise RunDirCorrupt(f"{self.log_path}:{n}: corrupt log record (not UTF-8 at byte {e.start + 1})") from None
                if not isinstance(record, dict):
                    raise RunDirCorrupt(f"{self.log_path}:{n}: corrupt log record ({_json_kind(record)}, not an object)")
                yield record

    def append(self, record: dict[str, Any], *, sync: bool = True) -> int:
        """Append one record, written and flushed to the OS; with ``sync`` (and durability
        ``"disk"``) also ``fdatasync``ed before returning. ``sync=False`` lets a caller write
        several records and make them durable with one :meth:`sync` (a verdict and the
        distillation it makes due). Returns the number of records appended so far (for
        :meth:`sync_log`).

        Raises:
            DiskFull: out of space; the partial record is cut off again (or, if even that
                fails, dropped by the next run's :meth:`repair`).
        """
        if self._log is None:
            new = not self.log_path.exists()
            if not self.appended:
                self._drop_replay_summary()
            self._log = open(self.log_path, "ab")
            if new and self.durability == "disk":  # the log's directory entry, once
                fsync_path(self.root)
        data = json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"
        start = self._log.tell()
        try:
            if FAULT_ENV in os.environ:  # crash tests: a kill with half a record written (really written)
                self._log.write(data[: len(data) // 2])
                self._log.flush()
                fault_point("log.append")
                data = data[len(data) // 2:]
            self._log.write(data)
            self._log.flush()
            self.appended += 1
            if sync and self.durability == "disk":
                self.sync_log(self.appended)
        except OSError as e:
            full = disk_full(e, f"step {record.get('step')} to {self.log_path}", self.root)
            with self._sync_lock:
                try:
                    self._log.close()  # may fail again flushing on a full disk
                except OSError:
                    pass
                self._log = None
            try:
                with open(self.log_path, "r+b") as f:
                    f.truncate(start)
            except OSError:
                pass
            if full is None:
                raise
            raise full from e
        return self.appended

    def _drop_replay_summary(self) -> None:
        """Before the first record this RunDir appends: remove ``summary.replay.json``, a refold
        of the log as it was (by ``rizz replay``), which no longer describes the run once the
        log grows (a resume, a live session's next answer)."""
        try:
            self.replay_summary_path.unlink()
        except FileNotFoundError:
            return
        self.replay_summary_removed = True

    appended = 0  # records appended by this RunDir (written and flushed to the OS)
    _synced = 0  # of those, how many are known to be on disk
    _sync_lock = threading.Lock()  # (replaced per instance in __init__)

    def sync_log(self, upto: int) -> None:
        """Group commit: return once the first ``upto`` records appended are on disk. One
        ``fdatasync`` covers every record written before it, so a caller whose records another
        thread's sync already covered returns at once. Safe to call without the caller's lock
        (``Session`` does, so threads share syncs); a closed log was synced when it closed."""
        with self._sync_lock:
            if self._synced >= upto:
                return
            if self._log is None:
                raise OSError(errno.EIO, f"{self.log_path}: closed after an error before records {self._synced + 1}..{upto} "
                                         "were synced; they are dropped or kept by the next open")
            target = self.appended  # every record counted here was written before the sync below
            _fdatasync(self._log.fileno())
            self._synced = max(self._synced, target)

    def sync(self) -> None:
        """Make every record appended so far durable (``fdatasync`` of the log; with durability
        ``"os"`` also fsync the vectors written since the last call). Raises OSError."""
        if self._store is not None:
            self._store.sync() if self.durability == "os" else self._store.flush()
        self.sync_log(self.appended)

    _prompt_dir_made = False
    _prompt_root = ""

    def save_prompt(self, sha: str, text: str) -> None:
        """Keep a compiled prompt's text under ``sha`` (hex sha256 of its UTF-8 bytes): in
        ``store.sqlite``, committed with the vectors of the record that names it (the next
        flush of :attr:`embeddings`); in the ``"files"`` layout as ``prompts/<sha>.txt`` (not
        synced: no refold needs it)."""
        store = self.embeddings
        if isinstance(store, RunStore):
            store.put_prompt(sha, text)
            return
        if not self._prompt_dir_made:
            self.prompt_dir.mkdir(exist_ok=True)
            self._prompt_root = os.fspath(self.prompt_dir)
            self._prompt_dir_made = True
        p = f"{self._prompt_root}{os.sep}{sha}.txt"
        if not os.path.exists(p):
            write_then_rename(text.encode("utf-8"), p[:-4] + ".tmp", p, sync=False, site="prompt.write")

    def prompt_text(self, sha: str) -> str | None:
        """The text of the compiled prompt ``sha`` (the log's ``prompt.sha256``), or None when
        it was not kept (a RUN_DIR written before prompts were saved)."""
        store = self.embeddings
        if isinstance(store, RunStore):
            return store.prompt(sha)
        p = self.prompt_dir / f"{sha}.txt"
        return p.read_text(encoding="utf-8") if p.is_file() else None

    # -- snapshots --------------------------------------------------------------------
    @property
    def chunks(self) -> SnapshotChunks | None:
        """The incremental snapshot writer/loader of this RUN_DIR (None in the ``"files"`` layout,
        whose snapshots are whole)."""
        store = self.embeddings
        if not isinstance(store, RunStore):
            return None
        if self._chunks is None:
            self._chunks = SnapshotChunks(store)
        return self._chunks

    _chunks: SnapshotChunks | None = None

    def save_snapshot(self, steps_done: int, state: AdaptiveState) -> int:
        """Write ``snapshots/NNNNNNNN.json`` with a checksum (``rizz.store.durable``), atomically;
        in the ``"sqlite"`` layout its large parts as chunks in ``store.sqlite``
        (:mod:`rizz.store.snapchunks`), committed and fsynced first. Returns the bytes written
        (the file, plus the chunks new to the store)."""
        self.snap_dir.mkdir(exist_ok=True)
        path = self.snap_dir / f"{steps_done:08d}.json"
        chunks = self.chunks
        if chunks is None:
            data = snapshot_bytes(to_data(state))
            written = 0
        else:
            tree, refs, written = chunks.tree(state)
            store = self.embeddings
            store.flush()
            if store.durability == "os":  # snapshots are fsynced whatever the durability
                store.sync()
            data = snapshot_bytes(tree, refs, written)
        tmp = path.with_suffix(".json.tmp")
        with open(tmp, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            fault_point("snapshot.write")  # crash tests: a kill mid-snapshot
            f.write(data[len(data) // 2:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return len(data) + written

    def snapshot_steps(self) -> list[int]:
        """The records-done counts of the snapshots on disk, oldest first."""
        if not self.snap_dir.is_dir():
            return []
        return sorted(int(p.stem) for p in self.snap_dir.glob("*.json") if p.stem.isdigit())

    def newest_snapshot_bytes(self) -> int | None:
        """What writing the newest snapshot cost (bytes: its file, plus the chunks it added), None without one."""
        done = self.snapshot_steps()
        head = snapshot_header(self.snap_dir / f"{done[-1]:08d}.json") if done else None
        return None if head is None else int(head["written"])

    def prune_snapshots(self, keep: int) -> None:
        """Delete all but the newest ``keep`` snapshots (and their pending-answer side files), then the
        store's chunks that no kept snapshot names."""
        done = self.snapshot_steps()
        if len(done) <= keep:
            return
        for n in done[:-keep]:
            for p in (self.snap_dir / f"{n:08d}.json", self.snap_dir / f"{n:08d}.inflight.json"):
                p.unlink(missing_ok=True)
        store = self.embeddings
        if isinstance(store, RunStore):
            kept: set[str] = set()
            for n in done[-keep:]:
                head = snapshot_header(self.snap_dir / f"{n:08d}.json")
                kept |= head["chunks"] if head is not None else set()
            store.drop_chunks(store.chunk_shas() - kept)

    def inflight_path(self, records_done: int) -> Path:
        """Where the pending answers beside snapshot ``records_done`` are kept (log format 2)."""
        self.snap_dir.mkdir(exist_ok=True)
        return self.snap_dir / f"{records_done:08d}.inflight.json"

    def latest_snapshot(self, at_most: int) -> tuple[int, AdaptiveState] | None:
        """The newest sound snapshot taken after ≤ ``at_most`` steps, as (steps done, state).

        A snapshot whose checksum fails (or that has none), whose chunks are missing or damaged,
        or whose records this version cannot build (e.g. a time-stamped context item written
        before ``instant_us`` existed), is skipped and listed in :attr:`ignored_snapshots`; the
        caller refolds from the log and rewrites it.
        """
        self.ignored_snapshots = []
        done = [n for n in self.snapshot_steps() if n <= at_most]
        for n in reversed(done):
            data, why = read_snapshot(self.snap_dir / f"{n:08d}.json")
            if why is None:
                try:
                    chunks = self.chunks
                    return n, (chunks.load(data) if chunks is not None else from_data(data))
                except (TypeError, ValueError) as e:  # a snapshot is a cache: the log rebuilds it
                    why = str(e) if isinstance(e, ChunkError) else f"not readable by this version: {e}"
            self.ignored_snapshots.append((n, why))
        return None



def _read_only(root: Path, e: OSError) -> RunDirReadOnly:
    """The one-line refusal of a RUN_DIR whose lock cannot be written (``e``: why)."""
    reason = f"{e.filename or root}: {e.strerror or e}"
    err = RunDirReadOnly(f"{root}: cannot write here ({reason}); rizz takes the RUN_DIR's lock before writing anything: "
                         "make the folder writable, or copy it to a writable place and use the copy")
    err.reason = reason
    return err


def model_meta(model: Any) -> dict[str, Any]:
    """The ``run.json`` fields that say what each call of ``model`` sends beyond the prompt:
    ``reasoning_tokens`` (the thinking allowance, ``?reasoning=N``; 0 without) and, when the
    backend (under a cache, or :class:`~rizz.apps.serve.tenants.FairModel`) has them,
    ``request_options`` (the Anthropic backend's sampling/thinking fields per model), and
    ``context_window`` (tokens, when the backend says; a rerun of a finished run names it in
    its overflow note without loading the model). Recorded, not compared on resume."""
    inner = getattr(model, "backend", model)
    opts = getattr(inner, "request_options", None)
    window = getattr(model, "context_window", None)
    return {"reasoning_tokens": int(getattr(model, "reasoning_tokens", 0)),
            **({"request_options": opts} if isinstance(opts, dict) else {}),
            **({"context_window": window} if isinstance(window, int) and window > 0 else {})}


def _fdatasync(fd: int) -> None:
    """``os.fdatasync`` where there is one (Linux; the file's size is data), else ``os.fsync``."""
    getattr(os, "fdatasync", os.fsync)(fd)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"routing.snap_threshold": 0.92, ...}`` of nested policy data."""
    out: dict[str, Any] = {}
    for k, v in (data.items() if isinstance(data, dict) else ()):
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


#: How a refused resume names ``run.json``'s settings: the option that sets each (a plain word
#: for those no option sets); a key not here is named as ``run.json`` names it.
SETTING_NAMES = {"stream_sha256": "stream", "model": "--model", "embedder": "embedder", "embedder_dim": "embedder dimensions",
                 "rendering": "--rendering", "budget_cap": "--budget", "user_model": "--user-model"}

#: ``run.json`` keys a :class:`SettingChange` names otherwise (by Session.open's parameter).
_SETTING_OF_KEY = {"stream_sha256": "stream"}


def _shown(value: Any) -> str:
    """A ``run.json`` value as a refusal shows it: ``none`` for null, else its repr."""
    return "none" if value is None else repr(value)


def setting_changes(old: dict[str, Any], meta: dict[str, Any], keys: list[str]) -> list[SettingChange]:
    """One :class:`SettingChange` per key of ``keys`` (``run.json`` ``old`` against this
    command's ``meta``); the stream by its path as recorded and as given (its sha256's start
    when no path is recorded) and, when the path is the same, the start of both sha256s as its detail."""
    changes = []
    for k in keys:
        was, now = old.get(k), meta.get(k)
        if k == "stream_sha256":
            path_was, path_now = old.get("stream"), meta.get("stream")
            if path_was is not None and path_now is not None and (path_was == path_now or Path(path_was).resolve() == Path(path_now).resolve()):
                changes.append(SettingChange("stream", path_was, path_was, f"(sha256 {str(was)[:12]}… -> {str(now)[:12]}…)"))
                continue
            was = path_was if path_was is not None or was is None else f"sha256 {str(was)[:12]}…"
            now = path_now if path_now is not None or now is None else f"sha256 {str(now)[:12]}…"
        changes.append(SettingChange(_SETTING_OF_KEY.get(k, k), was, now))
    return changes


def _setting_name(setting: str, words: str) -> str:
    """``setting`` as a refusal names it: the option of ``rizz run`` that sets it (``"cli"``,
    :data:`SETTING_NAMES`) or Session.open's parameter (``"api"``); a plain word for those no
    option sets (stream, policy, embedder, embedder dimensions)."""
    key = next((k for k, v in _SETTING_OF_KEY.items() if v == setting), setting)
    name = SETTING_NAMES.get(key, setting)
    return setting if words == "api" and name.startswith("--") else name


def change_line(change: SettingChange, words: str = "cli") -> str:
    """One line of a refused resume for ``change``, in ``words``'s terms (``"cli"``, and
    ``"serve"``: ``this command``, the option's name; ``"api"``: ``this call``, the parameter's name).

    Example:
        >>> print(change_line(SettingChange("budget_cap", None, 512)))
          --budget: run has none, this command has 512
        >>> print(change_line(SettingChange("budget_cap", None, 512), "api"))
          budget_cap: run has none, this call has 512
    """
    name = _setting_name(change.setting, words)
    if change.run == change.this and change.run is not None:
        what = "its content" if change.setting == "stream" else "it"
        line = f"  {name}: {change.run!r} both times, but {what} changed since the run started"
    else:
        line = f"  {name}: run has {_shown(change.run)}, this {'call' if words == 'api' else 'command'} has {_shown(change.this)}"
    return line + (f" {change.detail}" if change.detail else "")


#: Settings a resume can give back as the run started them, by an option (``rizz run``'s and
#: ``rizz serve``'s) or a parameter (``Session.open``'s): their recorded value is what is given
#: (the models are recorded by their backend's name, not the spec that made it; a simulated
#: user's model only as absent).
_GIVEN_BACK = ("budget_cap", "rendering", "user_model")


def _resume_with(change: SettingChange, words: str) -> tuple[str, str, bool]:
    """What to do with ``change`` to resume, in ``words``'s terms: ``(verb, what, exact)``,
    ``verb`` ``"give"`` or ``"leave out"`` (the run had none: the option absent), ``what`` the
    option or parameter with the run's value, and ``exact``: whether ``what`` is the option
    itself (``--budget 2048``, ``budget_cap=2048``), not a description (``the model the run used
    ('x')``)."""
    setting, run = change.setting, change.run
    if setting in ("stream", "policy"):
        return "give", f"the {setting} the run started with, unchanged", False
    if setting in _GIVEN_BACK and (run is None or setting != "user_model"):
        name = _setting_name(setting, words)
        if run is None:
            return "leave out", name, True
        return "give", f"{setting}={run!r}" if words == "api" else f"{name} {run}", True
    if setting == "embedder_dim":
        return "give", f"an embedder of {run} dimensions", False
    what = {"model": "model", "user_model": "simulated user's model"}.get(setting, _setting_name(setting, words))
    return "give", f"the {what} the run used ({_shown(run)})", False


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def mismatch_message(root: Path | None, changes: tuple[SettingChange, ...], words: str = "cli") -> str:
    """A refused resume of ``root`` for ``changes``, in ``words``'s terms
    (:data:`rizz.store.refusal.WORDINGS`; ``"serve"`` is ``"cli"`` but for the directory, another
    ``--data`` folder): a line per change (:func:`change_line`), then what to do: to resume,
    leave out each option the run started without and give the run's value of every other
    changed setting (``--budget 2048``; ``budget_cap=2048`` for ``"api"``), or use a new
    directory to run these settings. A change of one setting that cannot be given back as the
    run recorded it (the model, the embedder, the stream: :data:`_GIVEN_BACK`) says only: use a
    new directory. A ``limit`` change alone (:meth:`RunDir.check_limit`) says how many steps the
    log holds, and to resume with a limit of that many or more, or none.

    Raises ValueError for ``words`` not one of :data:`~rizz.store.refusal.WORDINGS`.

    Example:
        >>> print(mismatch_message(Path("runs/a"), (SettingChange("budget_cap", None, 1000),
        ...                                         SettingChange("rendering", "chat", "raw"))))
        runs/a was started with different settings; resume refused:
          --budget: run has none, this command has 1000
          --rendering: run has 'chat', this command has 'raw'
        To resume, leave out --budget and give --rendering chat; to run with this command's settings, use a new --out directory.
        >>> print(mismatch_message(Path("runs/a"), (SettingChange("budget_cap", 2048, None),), "api"))
        runs/a was started with different settings; resume refused:
          budget_cap: run has 2048, this call has none
        To resume, give budget_cap=2048; to run with this call's settings, give Session.open another path (a new directory).
    """
    api = words == "api"
    if len(changes) == 1 and changes[0].setting == "limit":
        return _limit_message(root, changes[0], words)
    new_dir = in_terms(words, cli="use a new --out directory", api="give Session.open another path (a new directory)",
                       serve="use another --data folder")
    resume = [_resume_with(c, words) for c in changes]
    if len(changes) == 1 and changes[0].setting == "policy":
        todo = f"To resume, give the policy the run started with, unchanged; to run this policy, {new_dir}."
    elif len(changes) == 1 and not resume[0][2]:
        todo = in_terms(words, cli="Use a new --out directory.", api="Use a new directory: give Session.open another path.",
                        serve="Use another --data folder.")
    else:
        leave = [what for verb, what, _ in resume if verb == "leave out"]
        give = [what for verb, what, _ in resume if verb == "give"]
        parts = ([f"leave out {_and(leave)}"] if leave else []) + ([f"give {_and(give)}"] if give else [])
        todo = (f"To resume, {(' and ' if max(len(leave), len(give)) < 2 else ', and ').join(parts)}; "
                f"to run with this {'call' if api else 'command'}'s settings, {new_dir}.")
    return (f"{root} was started with different settings; resume refused:\n"
            + "\n".join(change_line(c, words) for c in changes) + "\n" + todo)


def _limit_message(root: Path | None, change: SettingChange, words: str) -> str:
    """A resume refused for a limit (``change.this``) below the steps ``root``'s log holds
    (``change.run``), in ``words``'s terms: ``--limit N`` and ``no --limit`` (``"cli"``,
    ``"serve"``), ``limit=N`` and ``limit=None`` (``"api"``); then a new directory to run that many.

    Example:
        >>> text = _limit_message(Path("runs/a"), SettingChange("limit", 5, 3), "api")
        >>> text.split(" (")[0]
        "runs/a already holds 5 finished steps, more than this call's limit=3"
        >>> text.split("; ")[1:]
        ['to resume it give limit=5 or more, or limit=None', 'to run 3, use a new directory (another path)']
    """
    done, limit = change.run, change.this
    new_dir = in_terms(words, cli="use a new --out directory", api="use a new directory (another path)", serve="use another --data folder")
    given, more, none = (("call's limit=", f"limit={done}", "limit=None") if words == "api" else
                         ("command's --limit ", f"--limit {done}", "no --limit"))
    return (f"{root} already holds {plural(done, 'finished step')}, more than this {given}{limit} "
            f"(a resume keeps every finished step, so its summary and report would count {done}); "
            f"to resume it give {more} or more, or {none}; to run {limit}, {new_dir}")


def _policy_change(old: dict[str, Any], meta: dict[str, Any], shown: int = 5) -> SettingChange:
    """The policy ``run.json`` recorded vs the one given now (name or path), and, as its
    detail, the first ``shown`` fields whose values differ (``policy_data``; short values shown old -> new)."""
    was, now = old.get("policy"), meta.get("policy")
    a, b = _flat(old.get("policy_data")), _flat(meta.get("policy_data"))
    detail = ""
    if a and b:
        changed = [k if len(repr(a.get(k))) + len(repr(b.get(k))) > 40 else f"{k} {a.get(k)!r} -> {b.get(k)!r}"
                   for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]  # long values (lists): the name only
        more = f" and {len(changed) - shown} more" if len(changed) > shown else ""
        detail = f"(differing fields: {'; '.join(changed[:shown])}{more})" if changed else ""
    return SettingChange("policy", was, now, detail)


def _same_policy(a: Any, b: Any) -> bool:
    """Both policy_data parse (with today's defaults for fields added since) to equal policies."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    try:
        return parse_policy(a) == parse_policy(b)
    except Exception:
        return False
