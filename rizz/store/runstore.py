"""A RUN_DIR's side store in one SQLite file: embeddings, compiled prompts, snapshot chunks.

``RUN_DIR/store.sqlite`` (results/2026-12-02-runstore.md) replaces the file-per-element ``embeddings/`` and
``prompts/`` folders: a 10^5-step run wrote ~2×10^5 small files there, and each one's
write-and-rename was most of the live path's cost beyond the core step. Three tables, each
content-addressed (a key names exactly one value, and a value is never replaced):

* ``embeddings(key, vec)``: ``key`` = :func:`~rizz.store.embeddings.embedding_key` (64 lowercase
  hex), ``vec`` the float32 bytes of the ``(d,)`` vector, bit-exact;
* ``prompts(sha256, text)``: a compiled prompt's text under the hex sha256 of its UTF-8 bytes
  (the log's ``prompt.sha256``);
* ``chunks(sha256, data)``: the blocks of incremental state snapshots
  (:mod:`rizz.store.snapchunks`), under the hex sha256 of ``data``.

Why SQLite (stdlib ``sqlite3``) rather than append-only segment files with an index: it is
already a RUN_DIR format (``responses.sqlite``), its write-ahead log gives atomic multi-row
commits and crash recovery that segment files would have to re-implement (torn tails,
index rebuild, checksums), and it reads one key by its primary-key B-tree without an index
of our own held in memory.

Durability (:class:`~rizz.store.runlog.RunDir` ``durability``). New rows wait in memory until
:meth:`RunStore.flush`, which commits them in one transaction; a Session flushes right
before it appends the log record that names them, so a record is never durable before what
it needs. ``"disk"``: the connection runs ``synchronous=FULL``, so the commit fsyncs the WAL
before it returns. ``"os"``: ``synchronous=NORMAL``, the commit is written to the OS (it
survives ``kill -9``, not a power loss; SQLite, "WAL mode": "a transaction committed in WAL
mode with synchronous=NORMAL might roll back following a power loss or system crash") and
:meth:`RunStore.sync` fsyncs the WAL later (a Session's close). A process killed before a
commit loses only uncommitted rows, which no log record names yet.

The store is the run's record, not a cache: a damaged file raises :class:`RunStoreError`
(it is never silently rebuilt, unlike the response cache).

Reading without writing (``readonly=True``: a :class:`~rizz.store.runlog.RunDir` that does not
hold the RUN_DIR's lock, i.e. ``rizz replay``, ``inspect``, ``diff``, ``view``). Such a reader
must work on a RUN_DIR it cannot write (``chmod -R a-w``, read-only media), must not change
the folder, and must stay correct while a ``rizz run`` writes the same store. A WAL database
needs its ``-wal`` and ``-shm`` files to be read (SQLite, "WAL mode", "Read-Only Databases": a
read-only connection works when they exist or can be created, or with ``immutable=1``), and
a store closed cleanly has neither: the last connection's close checkpoints every commit into
``store.sqlite`` and deletes both. So:

* no ``store.sqlite-wal``: no connection has the store open and every commit is in the file,
  so it is opened ``immutable=1`` (read-only, no locks, no files created). Immutable means
  SQLite neither locks nor looks for changes, which is safe only while nothing writes; so
  before every read the store checks that no ``-wal`` has appeared and that the file's inode,
  size and mtime are those it opened, and otherwise reopens as below (a writer creates the
  ``-wal`` when it opens the store, and changes the file only by a checkpoint, later);
* a ``store.sqlite-wal`` (a writer has the store open, or was killed before its last
  checkpoint): ``mode=ro``, which reads through the WAL under SQLite's locks, so a concurrent
  writer's commits are seen (a log record is written only after the rows it names are
  committed). Where the ``-shm`` file is missing and cannot be created (a read-only folder), an
  empty ``-wal`` is read as above (nothing is in it), and a non-empty one is a
  :class:`RunStoreError` saying to copy the RUN_DIR somewhere writable.

A read-only store refuses every write (:class:`RunStoreError`).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rizz.errors import RizzError
from rizz.store.durable import check_durability, disk_full, fault_point, fsync_path
from rizz.store.embeddings import VECTOR_CACHE_MAX, embedding_key
from rizz.store.refusal import check_words, in_terms

__all__ = ["SCHEMA", "STORE_FILE", "STORE_VERSION", "RunStore", "RunStoreError"]

#: The store's file name inside a RUN_DIR.
STORE_FILE = "store.sqlite"
#: ``PRAGMA user_version`` of the layout this code writes.
STORE_VERSION = 1
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vec BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS prompts (sha256 TEXT PRIMARY KEY, text TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chunks (sha256 TEXT PRIMARY KEY, data BLOB NOT NULL)",
)
_KEY = re.compile(r"[0-9a-f]{64}")
#: Rows waiting for a commit before :meth:`RunStore.put` commits them itself (a caller that
#: never flushes stays bounded; committing early is always safe).
PENDING_MAX = 4096


class RunStoreError(RuntimeError, RizzError):
    """``store.sqlite`` cannot be read (not a database, damaged, or a newer layout), or a read or
    a write through it failed or was refused.

    ``path``: the store's file (None for an error built from its message alone); ``kind``: what
    happened (``""`` for one built from its message alone): ``"unreadable"`` (not a rizz store,
    or damaged: it is not rebuilt), ``"newer"`` (a layout newer than :data:`STORE_VERSION`),
    ``"wal"`` (commits only its ``-wal`` file holds, which SQLite cannot read in a folder where it
    cannot create the ``-shm`` file), ``"readonly"`` (a write through a read-only store),
    ``"read"`` / ``"write"`` (a read or a commit failed); ``reason``: SQLite's error (``""``:
    none); ``version``: the store's layout (``"newer"``). :meth:`worded` renders it for a
    command line or a Python caller (:mod:`rizz.store.refusal`); the message (``str``) is in a
    command line's terms."""

    def __init__(self, message: str | None = None, *, path: str | os.PathLike[str] | None = None, kind: str = "",
                 reason: str = "", version: int | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.kind, self.reason, self.version = kind, reason, version
        if kind and (kind not in _STORE_REFUSALS or self.path is None):
            raise ValueError(f"a RunStoreError's kind is one of {', '.join(_STORE_REFUSALS)}, with its path; got {kind!r}")
        super().__init__(*((message,) if message is not None else (self.worded("cli"),) if kind else ()))

    def worded(self, words: str) -> str:
        """The refusal in ``words``'s terms (:data:`rizz.store.refusal.WORDINGS`): rendered from
        :attr:`kind`, or the message as it is for an error built from its message alone. Only an
        ``"unreadable"`` store's advice differs: ``rerun into a new --out`` (``"cli"``), ``run again
        into a new directory (another path)`` (``"api"``), ``rerun into another --data folder``
        (``"serve"``).

        Raises:
          ValueError: ``words`` is not one of :data:`~rizz.store.refusal.WORDINGS`.

        Example:
            >>> e = RunStoreError(path="runs/a/store.sqlite", kind="unreadable", reason="file is not a database")
            >>> [e.worded(words).rsplit("restore it from a backup, or ")[1] for words in ("cli", "api", "serve")]
            ['rerun into a new --out', 'run again into a new directory (another path)', 'rerun into another --data folder']
        """
        check_words(words)
        path, reason = self.path, self.reason
        if path is None or not self.kind:
            return str(self)
        if self.kind == "newer":
            return f"{path}: store layout {self.version} is newer than this rizz reads ({STORE_VERSION}); upgrade rizz"
        if self.kind == "unreadable":
            rerun = in_terms(words, cli="rerun into a new --out", api="run again into a new directory (another path)",
                             serve="rerun into another --data folder")
            return (f"{path}: not a readable rizz store ({reason}); it holds the run's embeddings and prompts, "
                    f"so it is not rebuilt: restore it from a backup, or {rerun}")
        if self.kind == "wal":
            return (f"{path}: {path.name}-wal holds commits not yet in {path.name}, and SQLite cannot read them "
                    f"without creating {path.name}-shm in {path.parent} ({reason}); copy the RUN_DIR to a "
                    "writable folder and run the command there")
        if self.kind == "readonly":
            return (f"{path}: opened read-only (by a RunDir that does not hold the RUN_DIR's lock); "
                    "writes go through the RunDir that holds it (`with RunDir(...) as rd`)")
        return f"{path}: {self.kind} failed ({reason})"


#: :attr:`RunStoreError.kind`'s values.
_STORE_REFUSALS = ("unreadable", "newer", "wal", "readonly", "read", "write")


def _check_key(key: str) -> str:
    if not isinstance(key, str) or _KEY.fullmatch(key) is None:
        raise ValueError(f"not a store key (64 lowercase hex): {key!r}")
    return key


class RunStore:
    """The embedding / prompt / chunk store of one RUN_DIR (see the module docstring).

    Same protocol as :class:`~rizz.store.embeddings.EmbeddingStore` for vectors (``put``, ``get``,
    ``get_many``, ``embed``, ``in``, ``flush``, ``sync``), plus :meth:`put_prompt` /
    :meth:`prompt` and :meth:`put_chunk` / :meth:`chunk`. Safe for several threads (one lock).
    The file is created by the first write; reads of a missing file find nothing.

    Args:
      path: the SQLite file (``RUN_DIR/store.sqlite``).
      durability: ``"disk"`` or ``"os"`` (module docstring).
      readonly: only read, creating and changing no file, also in a folder that cannot be
        written, and safely beside a writer (module docstring); writes raise RunStoreError.

    Attributes:
      commits: transactions committed by this object (each one fsync of the WAL under ``"disk"``).
    """

    def __init__(self, path: str | os.PathLike[str], *, durability: str = "disk", readonly: bool = False) -> None:

        check_durability(durability)
        self.path = Path(path)
        self.durability = durability
        self.readonly = readonly
        self.commits = 0
        self._db: sqlite3.Connection | None = None
        self._opened_as: tuple[int, int, int] | None = None  # readonly, immutable=1: the file's (inode, size, mtime) when opened
        self._lock = threading.RLock()
        self._vecs: dict[str, np.ndarray] = {}  # key -> vector, not yet committed
        self._prompts: dict[str, str] = {}
        self._chunks: dict[str, bytes] = {}
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()  # read-only vectors, LRU
        self._unsynced = False  # "os": a commit since the last sync()

    # -- the connection ------------------------------------------------------------------
    def _conn(self, create: bool) -> sqlite3.Connection | None:
        if self.readonly:
            if create:
                self._writable()
            return self._read_conn()
        if self._db is not None:
            return self._db
        if not create and not self.path.exists():
            return None
        try:
            db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > STORE_VERSION:
                db.close()
                raise RunStoreError(path=self.path, kind="newer", version=version)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={'FULL' if self.durability == 'disk' else 'NORMAL'}")
            if create or version == 0:
                for sql in SCHEMA:
                    db.execute(sql)
                db.execute(f"PRAGMA user_version={STORE_VERSION}")
        except sqlite3.DatabaseError as e:
            full = disk_full(e, str(self.path))
            if full is not None:
                raise full from None
            raise RunStoreError(path=self.path, kind="unreadable", reason=str(e)) from None
        self._db = db
        return db

    def _wal(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _read_conn(self) -> sqlite3.Connection | None:
        """The read-only connection (module docstring): ``immutable=1`` while no ``-wal`` exists and
        the file is as it was opened, else ``mode=ro``; reopened once a writer has appeared."""
        if self._db is not None:
            if self._opened_as is None or (self._opened_as == self._identity() and not self._wal().exists()):
                return self._db
            self._db.close()  # a writer opened the store since: read through its WAL from now on
            self._db = None
        ident = self._identity()
        if ident is None:
            return None
        wal, uri = self._wal(), self.path.resolve().as_uri()
        try:
            opened: tuple[sqlite3.Connection, int] | None = None
            if wal.exists():
                try:
                    opened, self._opened_as = self._open_ro(f"{uri}?mode=ro"), None
                except sqlite3.OperationalError as e:
                    if wal.stat().st_size:  # commits only the WAL holds: SQLite needs its -shm file to read them
                        raise RunStoreError(path=self.path, kind="wal", reason=str(e)) from None
            if opened is None:  # no WAL, or an empty one: every commit is in the file
                opened, self._opened_as = self._open_ro(f"{uri}?immutable=1"), ident
        except sqlite3.DatabaseError as e:
            raise RunStoreError(path=self.path, kind="unreadable", reason=str(e)) from None
        db, version = opened
        if version > STORE_VERSION:
            db.close()
            raise RunStoreError(path=self.path, kind="newer", version=version)
        if version == 0:  # created, never written: nothing is stored yet
            db.close()
            return None
        self._db = db
        return db

    @staticmethod
    def _open_ro(uri: str) -> tuple[sqlite3.Connection, int]:
        """A read-only connection to ``uri`` and the store's ``user_version`` (read through it, so
        that a WAL that cannot be read fails here)."""
        db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30.0)
        try:
            return db, int(db.execute("PRAGMA user_version").fetchone()[0])
        except BaseException:
            db.close()
            raise

    def _writable(self) -> None:
        if self.readonly:
            raise RunStoreError(path=self.path, kind="readonly")

    def _read(self, sql: str, args: tuple[Any, ...]) -> Any:
        with self._lock:
            db = self._conn(create=False)
            if db is None:
                return None
            try:
                return db.execute(sql, args).fetchone()
            except sqlite3.DatabaseError as e:
                raise RunStoreError(path=self.path, kind="read", reason=str(e)) from None

    def close(self) -> None:
        """Commit what is pending and close the connection (:meth:`flush` first)."""
        with self._lock:
            self.flush()
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- vectors -------------------------------------------------------------------------
    def _remember(self, key: str, vec: np.ndarray) -> None:

        vec.flags.writeable = False
        self._cache[key] = vec
        self._cache.move_to_end(key)
        if len(self._cache) > VECTOR_CACHE_MAX:
            self._cache.popitem(last=False)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            if key in self._vecs or key in self._cache:
                return True
        return self._read("SELECT 1 FROM embeddings WHERE key = ?", (_check_key(key),)) is not None

    def put(self, key: str, vector: np.ndarray, *, defer: bool = False) -> str:
        """Store a 1-d vector (cast to float32) under ``key``; return ``key``. An existing key
        keeps its first vector. ``defer``: leave the row for the next :meth:`flush` (a
        Session's, right before the record naming it); else commit it now.

        Raises:
          ValueError: bad key or a vector that is not 1-d.
          OSError: the commit failed (DiskFull when out of space; with ``defer``, raised by
            :meth:`flush` instead).
        """
        vec = np.ascontiguousarray(vector, dtype=np.float32)
        if vec.ndim != 1:
            raise ValueError(f"expected a 1-d vector, got shape {vec.shape}")
        if key in self:
            return key
        self._writable()
        with self._lock:
            self._vecs[key] = vec.copy()
            self._remember(key, self._vecs[key])
            if not defer or self._pending() >= PENDING_MAX:
                self.flush()
        return key

    def get(self, key: str) -> np.ndarray:
        """The stored vector, ``(dim,)`` float32, bit-identical to what was put (a copy).

        Raises:
          KeyError: the key is not stored. ValueError: not a key.
        """
        with self._lock:
            hit = self._vecs.get(key)
            if hit is None:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
            if hit is not None:
                return hit.copy()
        row = self._read("SELECT vec FROM embeddings WHERE key = ?", (_check_key(key),))
        if row is None:
            raise KeyError(key)
        vec = np.frombuffer(row[0], dtype=np.float32)
        with self._lock:
            self._remember(key, vec)
        return vec.copy()

    def get_many(self, keys: Sequence[str]) -> np.ndarray:
        """Stack stored vectors: ``(len(keys), dim)`` float32. Raises KeyError if one is missing."""
        if not keys:
            raise ValueError("get_many() needs at least one key")
        return np.stack([self.get(k) for k in keys]).astype(np.float32, copy=False)

    def embed(self, embedder: Any, texts: Sequence[str], *, defer: bool = False) -> tuple[tuple[str, ...], np.ndarray]:
        """Embed through the store, as :meth:`rizz.store.embeddings.EmbeddingStore.embed`: stored
        keys are read back, missing ones computed and put (``defer``: see :meth:`put`).

        Returns ``(keys, (n, dim) float32 rows)``."""

        keys = tuple(embedding_key(t, embedder.name) for t in texts)
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key not in todo and key not in self:
                todo[key] = text
        if todo:
            for key, vec in zip(todo, embedder.embed(list(todo.values()))):
                self.put(key, vec, defer=defer)
        if not keys:
            return keys, np.zeros((0, embedder.dim), dtype=np.float32)
        return keys, np.stack([self.get(k) for k in keys]).astype(np.float32, copy=False)

    def prefetch(self, keys: Sequence[str]) -> None:
        """Read the committed vectors of ``keys`` into the in-memory cache with a few batched
        queries (a replay reads every record's vectors: one query per 500 keys instead of one
        per key). Unknown keys are skipped; at most ``VECTOR_CACHE_MAX`` are kept."""

        with self._lock:
            cache = self._cache
            todo = [k for k in dict.fromkeys(keys) if k and k not in cache and k not in self._vecs][:VECTOR_CACHE_MAX]
            db = self._conn(create=False)
            if db is None or not todo:
                return
            for i in range(0, len(todo), 500):
                part = todo[i:i + 500]
                rows = db.execute(f"SELECT key, vec FROM embeddings WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
                for key, vec in rows:  # new keys, so each goes last, as _remember puts it; read-only (a view of bytes)
                    cache[key] = np.frombuffer(vec, dtype=np.float32)
            while len(cache) > VECTOR_CACHE_MAX:  # the oldest go, as _remember drops them one by one
                cache.popitem(last=False)

    def keys(self) -> Iterator[str]:
        """Every committed embedding key, in key order."""
        with self._lock:
            db = self._conn(create=False)
            rows = db.execute("SELECT key FROM embeddings ORDER BY key").fetchall() if db is not None else []
        return (r[0] for r in rows)

    # -- prompts and chunks ----------------------------------------------------------------
    def put_prompt(self, sha: str, text: str) -> None:
        """Keep a compiled prompt's ``text`` under ``sha`` (hex sha256 of its UTF-8 bytes) until
        the next :meth:`flush` commits it with the vectors of the same record."""
        _check_key(sha)
        self._writable()
        with self._lock:
            if sha not in self._prompts and self._read("SELECT 1 FROM prompts WHERE sha256 = ?", (sha,)) is None:
                self._prompts[sha] = text
                if self._pending() >= PENDING_MAX:
                    self.flush()

    def prompt(self, sha: str) -> str | None:
        """A prompt's text, or None when it is not stored."""
        with self._lock:
            if sha in self._prompts:
                return self._prompts[sha]
        row = self._read("SELECT text FROM prompts WHERE sha256 = ?", (sha,))
        return None if row is None else str(row[0])

    def has_chunk(self, sha: str) -> bool:
        with self._lock:
            if sha in self._chunks:
                return True
        return self._read("SELECT 1 FROM chunks WHERE sha256 = ?", (sha,)) is not None

    def put_chunk(self, sha: str, data: bytes) -> None:
        """Keep a snapshot chunk (``sha`` = hex sha256 of ``data``) until the next :meth:`flush`."""
        self._writable()
        with self._lock:
            self._chunks.setdefault(sha, data)

    def chunk(self, sha: str) -> bytes | None:
        """A chunk's bytes as stored (the caller checks them against ``sha``), or None."""
        with self._lock:
            if sha in self._chunks:
                return self._chunks[sha]
        row = self._read("SELECT data FROM chunks WHERE sha256 = ?", (sha,))
        return None if row is None else bytes(row[0])

    def chunk_shas(self) -> set[str]:
        """Every committed chunk's sha256."""
        with self._lock:
            db = self._conn(create=False)
            return {r[0] for r in db.execute("SELECT sha256 FROM chunks").fetchall()} if db is not None else set()

    def drop_chunks(self, shas: set[str]) -> int:
        """Delete these chunks (no longer referenced by any kept snapshot); returns how many."""
        if not shas:
            return 0
        self._writable()
        with self._lock:
            self.flush()
            db = self._conn(create=True)
            assert db is not None
            self._commit(db, lambda: db.executemany("DELETE FROM chunks WHERE sha256 = ?", [(s,) for s in sorted(shas)]))
        return len(shas)

    # -- commits ---------------------------------------------------------------------------
    def _pending(self) -> int:
        return len(self._vecs) + len(self._prompts) + len(self._chunks)

    def _commit(self, db: sqlite3.Connection, work: Any) -> None:
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                work()
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as e:
            full = disk_full(e, str(self.path))
            if full is not None:
                raise full from None
            raise RunStoreError(path=self.path, kind="write", reason=str(e)) from None
        self.commits += 1
        self._unsynced = True

    def flush(self) -> None:
        """Commit every pending vector, prompt and chunk in one transaction (under ``"disk"``
        fsynced before it returns). Nothing pending: nothing is done.

        Raises:
          OSError: the commit failed (DiskFull when out of space); the pending rows are
            forgotten, as if never put (no record names them yet).
        """
        with self._lock:
            if not self._pending():
                return
            vecs, prompts, chunks = self._vecs, self._prompts, self._chunks
            self._vecs, self._prompts, self._chunks = {}, {}, {}

            def work() -> None:
                if vecs:
                    db.executemany("INSERT OR IGNORE INTO embeddings (key, vec) VALUES (?, ?)", [(k, v.tobytes()) for k, v in vecs.items()])
                    fault_point("embedding.write")  # crash tests: killed inside the transaction
                if prompts:
                    db.executemany("INSERT OR IGNORE INTO prompts (sha256, text) VALUES (?, ?)", list(prompts.items()))
                    fault_point("prompt.write")
                if chunks:
                    db.executemany("INSERT OR IGNORE INTO chunks (sha256, data) VALUES (?, ?)", list(chunks.items()))

            try:
                db = self._conn(create=True)
                assert db is not None
                self._commit(db, work)
            except BaseException:
                for k in vecs:
                    self._cache.pop(k, None)
                raise

    def sync(self) -> None:
        """:meth:`flush`, then (durability ``"os"``) fsync the WAL, so every commit so far
        survives a power loss. Raises OSError."""
        with self._lock:
            self.flush()
            if self.durability == "os" and self._unsynced:
                wal = Path(f"{self.path}-wal")
                if wal.exists():
                    fsync_path(wal)
                fsync_path(self.path)
            self._unsynced = False

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r}, durability={self.durability!r}{', readonly=True' if self.readonly else ''})"
