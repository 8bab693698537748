"""Persistent response cache (one sqlite3 file) and a backend wrapper that uses it.

Key: sha256 hex of the canonical JSON of ``(model name, [(role, content), ...], rendering,
max_tokens, [stop, ...], temperature)``. The stored value is the full :class:`Generation`
but its ``attempts`` (a hit makes no request: it comes back with ``attempts`` 1).
A hit returns the stored text, token counts, model and finish reason with ``cached=True``,
``latency_s`` = the lookup time and ``cost_usd`` = ``0.0`` (``None`` stays ``None``): a hit
costs nothing and makes no model call.

Safe for several threads of one process (one connection, a lock) and for several processes
on one file (sqlite's own locking, WAL journal, ``INSERT OR REPLACE``).

The file is made at the first lookup or store, not when a :class:`ResponseCache` is made: a
command refused before its first request leaves no cache behind.

Corruption (specs/reliability.md): the file is only a cache, so a damaged one is never fatal. On
open (of a file already there: when the cache is made), ``PRAGMA quick_check`` runs; a file that is not a database, fails the check, or raises
``sqlite3.DatabaseError`` on a later read or write is moved aside to ``<file>.corrupt``
(with its ``-wal``/``-shm``), a message goes to stderr, and an empty cache is created in its
place (``rebuilt`` says why). Requests are then answered by the model again (the same
answers for the deterministic embedded model). A full disk raises
:class:`~rizz.store.durable.DiskFull`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from rizz.adapters.models.base import (
    Generation,
    Message,
    ModelBackend,
    answer_and_reasoning,
    check_generate_args,
    sent_tokens,
)
from rizz.store.durable import disk_full, fault_point

__all__ = ["ResponseCache", "CachedModel", "cache_key", "replies_held"]

_SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    generation TEXT NOT NULL,
    created REAL NOT NULL
)"""


def cache_key(
    model: str,
    messages: Sequence[Message],
    rendering: str,
    max_tokens: int,
    stop: Sequence[str],
    temperature: float | None,
) -> str:
    """sha256 hex (64 chars) identifying one request.

    ``temperature`` None (a backend that sends none: the model's own sampling) keys as JSON null;
    a number keys exactly as before, so existing caches stay valid.
    """
    payload = json.dumps(
        [
            model,
            [[m.role, m.content] for m in messages],
            rendering,
            int(max_tokens),
            list(stop),
            None if temperature is None else float(temperature),
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """sqlite3-backed map from :func:`cache_key` to :class:`Generation`.

    Args:
        path: the database file; parent directories are created. A file that is not there yet
            is made at the first lookup or store, not here: a command refused before its
            first request (a resume with another model, known once it loads) writes no cache.

    Raises:
        IsADirectoryError: ``path`` is a folder (it is never moved aside as a corrupt cache).
        ValueError: ``path`` exists and is not a regular file (``/dev/null``, a pipe).

    Attributes:
        hits, misses: lookups served / not served since this object was opened.
        rebuilt: why the file was found corrupt and rebuilt empty (``None``: it was sound).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():  # never moved aside as a corrupt cache: it holds other files
            raise IsADirectoryError(f"{self.path}: is a folder, not a response cache file (give a file path, e.g. {self.path / 'responses.sqlite'})")
        if self.path.exists() and not self.path.is_file():  # /dev/null, a pipe: not a file sqlite can keep
            raise ValueError(f"{self.path}: not a regular file (a device, a pipe or a socket), so not a response cache file")
        self._lock = threading.Lock()
        self._first = threading.Lock()  # the first open of a file made later (not under _lock: _open takes it)
        self._db: sqlite3.Connection | None = None
        self.rebuilt: str | None = None
        self.hits = 0
        self.misses = 0
        if self.path.exists():  # checked now (a damaged file is moved aside at once); a new one at the first request
            self._first_open()

    def _first_open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)  # a refused command leaves no folder
        try:
            self._open(check=True)
        except sqlite3.DatabaseError as e:
            if disk_full(e, str(self.path)) is not None:
                raise disk_full(e, str(self.path)) from None
            self._rebuild(str(e))

    def _conn(self) -> sqlite3.Connection:
        """The connection, the file made and opened at the first call when it was not there."""
        if self._db is None:
            with self._first:
                if self._db is None:
                    self._first_open()
        assert self._db is not None
        return self._db

    def _open(self, check: bool) -> None:
        db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        with self._lock:
            try:
                if check:
                    row = db.execute("PRAGMA quick_check").fetchone()
                    if row is None or row[0] != "ok":
                        raise sqlite3.DatabaseError(f"quick_check: {row[0] if row else 'no result'}")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(_SCHEMA)
                db.commit()
            except BaseException:
                db.close()
                raise
            self._db = db  # set once ready: another thread's _conn takes it only then

    def _rebuild(self, why: str) -> None:
        """Move the damaged file aside and start an empty cache (caller holds no lock)."""
        try:
            if self._db is not None:
                self._db.close()
        except sqlite3.Error:
            pass
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.is_file():  # a folder at a -wal/-shm name is not the cache's: left alone
                os.replace(src, Path(str(self.path) + ".corrupt" + suffix))
        self.rebuilt = why
        print(f"rizz: {self.path}: corrupt response cache ({why}); moved to {self.path}.corrupt and "
              "rebuilt empty (it is only a cache: answers are asked again)", file=sys.stderr)
        self._open(check=False)

    def get(self, key: str) -> Generation | None:
        """The stored generation for ``key`` (as stored, ``cached`` False), or ``None``.

        A damaged file or row is a miss (the file is rebuilt, see the module docstring).
        """
        try:
            db = self._conn()
            with self._lock:
                row = db.execute(
                    "SELECT generation FROM responses WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.DatabaseError as e:
            self._rebuild(str(e))
            row = None
        if row is None:
            self.misses += 1
            return None
        try:
            gen = Generation(**json.loads(row[0]))
        except (ValueError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return gen

    def put(self, key: str, generation: Generation) -> None:
        """Store ``generation`` under ``key`` (replacing any previous value)."""
        fields = attrs.asdict(attrs.evolve(generation, cached=False))
        fields.pop("attempts")  # how the request went, not the answer: a hit makes no request
        data = json.dumps(fields)
        row = (key, generation.model, data, time.time())
        sql = "INSERT OR REPLACE INTO responses (key, model, generation, created) VALUES (?, ?, ?, ?)"
        fault_point("cache.put")
        for attempt in (0, 1):
            try:
                db = self._conn()
                with self._lock:
                    db.execute(sql, row)
                    db.commit()
                return
            except sqlite3.DatabaseError as e:
                full = disk_full(e, str(self.path))
                if full is not None:
                    raise full from None
                if attempt:
                    raise
                self._rebuild(str(e))

    def __len__(self) -> int:
        if self._db is None and not self.path.exists():  # not made yet: nothing stored
            return 0
        db = self._conn()
        with self._lock:
            return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def create(self) -> None:
        """Make the file and its table now, if not there yet (a caller that writes to the file
        itself, e.g. :func:`rizz.lab.ray_tasks.merge_cache_rows`)."""
        self._conn()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replies_held(path: str | os.PathLike[str], model: str | None) -> int:
    """How many replies of ``model`` (a backend ``name``; None: of any model) the cache file at
    ``path`` holds, read without opening a :class:`ResponseCache` (no file, folder or table is
    created, no check is run): 0 when there is no file or it cannot be read as one.

    Example:
        >>> replies_held("no/such/cache.sqlite", "embedded:Qwen2.5-Coder-1.5B-Instruct.Q4_K_M")
        0
    """
    if not Path(path).is_file():
        return 0
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            if model is None:
                return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            return int(db.execute("SELECT COUNT(*) FROM responses WHERE model = ?", (model,)).fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


class CachedModel:
    """A backend that answers repeated requests from a :class:`ResponseCache`.

    Same protocol as the wrapped backend; ``name``, ``context_window`` and ``count_tokens``
    are the backend's. The temperature in the key is the backend's ``temperature``
    attribute (0.0 if it has none).

    Example:
        >>> m = CachedModel(EmbeddedModel(), ResponseCache("run/cache.sqlite"))  # doctest: +SKIP
    """

    def __init__(self, backend: ModelBackend, cache: ResponseCache) -> None:
        self.backend = backend
        self.cache = cache
        self.name = backend.name
        self.context_window = backend.context_window

    @property
    def reasoning_tokens(self) -> int:
        return int(getattr(self.backend, "reasoning_tokens", 0))

    @property
    def temperature(self) -> float | None:
        t = getattr(self.backend, "temperature", 0.0)
        return None if t is None else float(t)

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def count_sent_tokens(self, messages: Sequence[Message], rendering: str) -> int:
        """``messages`` as the backend sends them (:func:`~rizz.adapters.models.base.sent_tokens`)."""
        return sent_tokens(self.backend, messages, rendering)

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        rendering: str = "chat",
    ) -> Generation:
        """The cached answer if this exact request was seen, else the backend's (then stored)."""
        check_generate_args(messages, max_tokens, stop, rendering)
        t0 = time.perf_counter()
        key = cache_key(self.name, messages, rendering, max_tokens, stop, self.temperature)
        hit = self.cache.get(key)
        if hit is not None:
            if not hit.reasoning and hit.raw is None:  # stored before reasoning was split off
                hit = attrs.evolve(hit, **answer_and_reasoning(hit.text))  # type: ignore[arg-type]
            return attrs.evolve(
                hit,
                cached=True,
                latency_s=time.perf_counter() - t0,
                cost_usd=None if hit.cost_usd is None else 0.0,
            )
        gen = self.backend.generate(messages, max_tokens=max_tokens, stop=stop, rendering=rendering)
        self.cache.put(key, gen)
        return gen

    def __repr__(self) -> str:
        return f"CachedModel({self.backend!r}, {str(self.cache.path)!r})"
