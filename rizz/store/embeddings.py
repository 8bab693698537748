"""A content-addressed embedding side store (the embedder ``φ`` that fills it:
:mod:`rizz.adapters.embedder`).

Embeddings are non-deterministic data as far as the pure core is concerned (STYLE §1):
a run logs them by key in its store (:class:`~rizz.store.runstore.RunStore`; an
:class:`EmbeddingStore` in a RUN_DIR of the older file-per-element layout), and a replay reads the exact
float32 bytes back instead of calling the model.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rizz.store.durable import check_durability, fsync_path, write_then_rename

__all__ = ["EmbeddingStore", "embedding_key"]

_NPY_HEADERS: dict[tuple[str, int], bytes] = {}


def _npy_bytes(vec: np.ndarray) -> bytes:
    """The bytes ``np.save(f, vec)`` writes for a 1-d vector: its ``.npy`` header (made by
    ``np.save`` once per dtype and length) followed by the raw data."""
    k = (vec.dtype.str, vec.shape[0])
    head = _NPY_HEADERS.get(k)
    if head is None:
        buf = io.BytesIO()
        np.save(buf, vec, allow_pickle=False)
        head = _NPY_HEADERS[k] = buf.getvalue()[: -vec.nbytes or None]
    return head + vec.tobytes()


def _write_and_rename(data: bytes, tmp: str, path: str, sync: bool) -> None:
    """A vector's write (on a pool thread when deferred): see :func:`rizz.store.durable.write_then_rename`."""
    write_then_rename(data, tmp, path, sync=sync, site="embedding.write")


def embedding_key(text: str, embedder_name: str) -> str:
    """Content address of an embedding: hex sha256 of ``embedder_name + "\\0" + text`` (UTF-8)."""
    h = hashlib.sha256()
    h.update(embedder_name.encode("utf-8"))
    h.update(b"\0")
    h.update(text.encode("utf-8"))
    return h.hexdigest()


def _pool() -> Any:
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rizz-fsync")
    return _POOL


_POOL: Any = None
_KEY = re.compile(r"[0-9a-f]{64}")
#: Vectors kept in memory by :class:`EmbeddingStore` (the most recently put or read): a
#: repeated text (a judge label, a rule, an instruction) is served without a file read.
#: 4,096 × 384 float32 ≈ 6 MiB.
VECTOR_CACHE_MAX = 4096
_PENDING_MAX = 256  # deferred puts in flight before put() waits for them itself
_UNSYNCED_MAX = 4096  # "os" durability: files written without fsync before sync() runs by itself


class EmbeddingStore:
    """Content-addressed side store of embeddings: ``key -> float32 vector``, bit-exact.

    The ``embeddings/`` folder of a RUN_DIR of the older file-per-element layout (new RUN_DIRs keep their
    vectors in ``store.sqlite``, :class:`~rizz.store.runstore.RunStore`, which has the same
    protocol); still read and written for such a RUN_DIR until ``rizz convert``.

    Layout: ``DIR/<key[:2]>/<key>.npy`` (one ``.npy`` file per key). Each file is written to
    a temporary file in the same directory, fsynced, then ``os.replace``d into place, so a
    process killed mid-write leaves earlier entries intact and never a partial entry.
    Entries are immutable: putting an existing key keeps the stored vector. The
    :data:`VECTOR_CACHE_MAX` most recently put or read vectors are also kept in memory, so a
    repeated key costs neither a ``stat`` nor a read (entries never change, so the cache
    cannot go stale while this process is the store's only writer, as the RUN_DIR's lock makes it).

    Args:
      root: directory (created if missing, unless ``readonly``).
      readonly: only read (a RunDir that does not hold the RUN_DIR's lock): nothing is created,
        and :meth:`put` of a new key raises PermissionError.
      durability: ``"disk"`` (default): a new entry is fsynced before it is renamed into
        place. With ``defer=True`` (what a Session's writes use) the fsync and rename run on a
        background thread while the caller goes on (routing, compiling, the model call), and
        :meth:`flush` waits for them: the log record naming a key is written only after
        ``flush``, so a record on disk never names a vector that is not. ``"os"``: written and
        renamed at once, no fsync (survives ``kill -9``, not a power loss or an OS crash);
        :meth:`sync` fsyncs those files later (at a session's close).
    """

    def __init__(self, root: str | os.PathLike[str], *, durability: str = "disk", readonly: bool = False) -> None:
        check_durability(durability)
        self.root = Path(root)
        self.readonly = readonly
        if not readonly:
            self.root.mkdir(parents=True, exist_ok=True)
        self._root = os.fspath(self.root)  # str paths on the per-vector path (pathlib costs ≈ 10 µs a join here)
        self.durability = durability
        self._pending: dict[str, tuple[np.ndarray, Any]] = {}  # key -> (vector, future of its write + rename)
        self._unsynced: list[str] = []  # "os": files written since the last sync()
        self._dirs: set[str] = set()  # <key[:2]> subdirectories known to exist
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()  # key -> vector (read-only), LRU

    def _path(self, key: str) -> str:
        if not isinstance(key, str) or _KEY.fullmatch(key) is None:
            raise ValueError(f"not an embedding key (64 lowercase hex): {key!r}")
        return f"{self._root}{os.sep}{key[:2]}{os.sep}{key}.npy"

    def _remember(self, key: str, vec: np.ndarray) -> None:
        vec.flags.writeable = False
        self._cache[key] = vec
        self._cache.move_to_end(key)
        if len(self._cache) > VECTOR_CACHE_MAX:
            self._cache.popitem(last=False)

    def __contains__(self, key: str) -> bool:
        return key in self._pending or key in self._cache or os.path.isfile(self._path(key))

    def put(self, key: str, vector: np.ndarray, *, defer: bool = False) -> str:
        """Store a 1-d vector (cast to float32) under ``key``; return ``key``.

        ``defer``: with durability ``"disk"``, write, fsync and rename in the background (see
        the class); :meth:`get` serves the vector meanwhile, :meth:`flush` waits for it.

        Raises:
          ValueError: bad key or a vector that is not 1-d.
          OSError: the write failed (with ``defer``, raised by :meth:`flush` instead).
        """
        vec = np.ascontiguousarray(vector, dtype=np.float32)
        if vec.ndim != 1:
            raise ValueError(f"expected a 1-d vector, got shape {vec.shape}")
        path = self._path(key)
        if key in self._pending or key in self._cache or os.path.isfile(path):
            return key
        return self._put_new(key, vec, path, defer)

    def _put_new(self, key: str, vec: np.ndarray, path: str, defer: bool) -> str:
        """:meth:`put` of a key known to be absent (``vec`` float32, 1-d, contiguous)."""
        if self.readonly:
            raise PermissionError(errno.EACCES, f"{self.root}: opened read-only (by a RunDir that does not hold the RUN_DIR's lock); "
                                                "writes go through the RunDir that holds it")
        folder = os.path.dirname(path)
        if key[:2] not in self._dirs:
            os.makedirs(folder, exist_ok=True)
            self._dirs.add(key[:2])
        tmp = f"{folder}{os.sep}.tmp-{key}.npy"  # the RUN_DIR's lock makes this process its only writer
        sync = self.durability == "disk"
        if defer and sync:  # "os": inline (a pool thread's hand-off costs more than the write it moves)
            self._pending[key] = (vec.copy(), _pool().submit(_write_and_rename, _npy_bytes(vec), tmp, path, sync))
            self._remember(key, self._pending[key][0])
            if len(self._pending) >= _PENDING_MAX:  # bounded, even for a caller that never flushes
                self.flush()
            return key
        _write_and_rename(_npy_bytes(vec), tmp, path, sync)
        self._remember(key, vec.copy())
        if not sync:
            self._unsynced.append(path)
            if len(self._unsynced) >= _UNSYNCED_MAX:  # bounded: a long "os" session syncs in batches
                self.sync()
        return key

    def flush(self) -> None:
        """Wait until every deferred :meth:`put` is written (fsynced under ``"disk"``) and in place.

        Raises:
          OSError: the first failed write (e.g. ``ENOSPC``); its temp file is removed and
            its key forgotten, as if never put.
        """
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        error: BaseException | None = None
        for key, (_, fut) in pending.items():
            try:
                fut.result()
            except BaseException as e:  # noqa: BLE001 - re-raised below, after every write finished
                self._cache.pop(key, None)  # forgotten, as if never put
                error = error or e
        if error is not None:
            raise error

    def sync(self) -> None:
        """:meth:`flush`, then fsync the files written with durability ``"os"`` since the last call."""
        self.flush()
        paths, self._unsynced = self._unsynced, []
        if paths:  # concurrent fsyncs share the file system's journal commits
            list(_pool().map(fsync_path, paths))

    def get(self, key: str) -> np.ndarray:
        """The stored vector, ``(dim,)`` float32, bit-identical to what was put.

        Raises:
          KeyError: if the key is not stored.
        """
        pending = self._pending.get(key)
        if pending is not None:
            return pending[0].copy()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit.copy()
        path = self._path(key)
        try:
            vec = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise KeyError(key) from None
        self._remember(key, vec.copy())
        return vec

    def get_many(self, keys: Sequence[str]) -> np.ndarray:
        """Stack stored vectors: ``(len(keys), dim)`` float32. Raises KeyError if one is missing."""
        if not keys:
            raise ValueError("get_many() needs at least one key")
        return np.stack([self.get(k) for k in keys]).astype(np.float32, copy=False)

    def embed(self, embedder: Any, texts: Sequence[str], *, defer: bool = False) -> tuple[tuple[str, ...], np.ndarray]:
        """Embed through the store: stored keys are read back, missing ones computed and put
        (``defer``: see :meth:`put`).

        Returns:
          ``(keys, vectors)``: one key per text and ``(n, dim)`` float32 rows. A text always
          maps to the same stored bytes, whatever batch it first came in (a new vector is
          returned as stored, float32, without reading the file back).
        """
        keys = tuple(embedding_key(t, embedder.name) for t in texts)
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key not in todo and key not in self:
                todo[key] = text
        fresh: dict[str, np.ndarray] = {}
        if todo:
            vecs = embedder.embed(list(todo.values()))
            for key, vec in zip(todo, vecs):
                v = np.ascontiguousarray(vec, dtype=np.float32)
                if v.ndim != 1:
                    raise ValueError(f"expected a 1-d vector, got shape {v.shape}")
                self._put_new(key, v, self._path(key), defer)  # absent: checked just above
                fresh[key] = v
        if not keys:
            return keys, np.zeros((0, embedder.dim), dtype=np.float32)
        return keys, np.stack([fresh[k] if k in fresh else self.get(k) for k in keys]).astype(np.float32, copy=False)

