"""Incremental state snapshots: the large parts of a state as content-addressed chunks (results/2026-12-02-runstore.md).

A full snapshot is linear in the state: at 10^5 episodes one took ~5 s to write and ~5.6 s to
load (``results/2026-12-01-shell-overhead.md``), so a run wrote one only every ~31,700 records and a resume
after ``kill -9`` refolded up to that many. Here a snapshot is still one checksummed JSON file
(``snapshots/NNNNNNNN.json``, :mod:`rizz.store.durable`) holding the tree of
:func:`rizz.core.to_data`, except that its large parts are chunks in the RUN_DIR's
``store.sqlite`` (:mod:`rizz.store.runstore`, table ``chunks``, keyed by the sha256 of their
bytes), so a snapshot writes only what changed since the one before and a load reads matrices
as raw bytes:

- a PVector of at least :data:`MIN_CHUNKED` items (memory records, history, quarantine):
  ``{"_vc": [[sha, count], ...], "tail": [item trees]}``, its items as JSON blocks;
- an EmbeddingMatrix of at least :data:`MIN_CHUNKED` rows:
  ``{"_xc": [[sha, rows], ...], "tail": "<base64 float32>", "d": d, "n": n}``, blocks of raw
  float32 bytes;
- a MemoryStore of at least :data:`MIN_CHUNKED` records whose ``keys`` and ``scopes`` are
  exactly those its records imply (checked at every write): those two fields left out,
  ``"_derived": 1`` (they are rebuilt on load);
- a Branch holding at least :data:`MIN_CHUNKED` items (episodes, anti-patterns, context,
  quarantine, rules): ``{"_c": sha}``, its own tree as a JSON chunk.

Blocks. A sequence of n items is cut at fixed places: whole blocks of :data:`BLOCK_MAX`,
then the rest as the binary digits of its length (512, 256, ..., :data:`MIN_BLOCK`), the
last < :data:`MIN_BLOCK` items inline. Appending one item changes only the smallest blocks
(a carry merges them), so a block, once written, is reused by every later snapshot until a
carry absorbs it: over a run each item is written about log2(BLOCK_MAX / MIN_BLOCK) + 1 = 7
times in all, whatever the state's size. A block is reused without serialising it again when
its items are the same objects as at the previous write or load (persistent values: unchanged
parts of a state are the same objects after a step), for a matrix when it reads the same buffer
(:attr:`rizz.core.vec.EmbeddingMatrix.storage`); a Branch when it is the same object.

A state with nothing that large is written exactly as before (format 2, no chunk). Format 3
adds ``"chunks"``: every chunk the snapshot needs, so the store can drop the chunks of
snapshots no longer kept (:meth:`rizz.store.runlog.RunDir.prune_snapshots`). On load every
chunk is checked against its sha256; a missing or damaged one makes the snapshot unusable
(the log rebuilds it), like a failed checksum.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from operator import is_
from typing import Any

import numpy as np
from pyrsistent import PVector, pmap, pset, pvector

from rizz.core.records import Branch, MemoryStore
from rizz.core.serialize import from_data, to_data
from rizz.core.vec import EmbeddingMatrix
from rizz.errors import RizzError

__all__ = ["BLOCK_MAX", "MIN_BLOCK", "MIN_CHUNKED", "ChunkError", "SnapshotChunks", "blocks"]

#: Collections shorter than this are written inline (small states keep the format-2 snapshot).
MIN_CHUNKED = 64
#: Smallest block; a sequence's last ``< MIN_BLOCK`` items are inline.
MIN_BLOCK = 16
#: Largest block (rows of a matrix: 1024 × 384 float32 = 1.5 MiB).
BLOCK_MAX = 1024


class ChunkError(ValueError, RizzError):
    """A chunk a snapshot names is missing from the store or fails its sha256 (a ValueError, so
    :meth:`~rizz.store.runlog.RunDir.latest_snapshot` skips the snapshot and the log rebuilds it)."""


def blocks(n: int) -> list[tuple[int, int]]:
    """``(start, size)`` of the blocks of a sequence of ``n`` items (module docstring); the items
    from the end of the last block to ``n`` are the inline tail.

    Example:
        >>> blocks(1500)
        [(0, 1024), (1024, 256), (1280, 128), (1408, 64), (1472, 16)]
    """
    out = [(i * BLOCK_MAX, BLOCK_MAX) for i in range(n // BLOCK_MAX)]
    start, size = len(out) * BLOCK_MAX, BLOCK_MAX // 2
    while size >= MIN_BLOCK:
        if (n - start) >= size:
            out.append((start, size))
            start += size
        size //= 2
    return out


def _dumps(tree: Any) -> bytes:
    return json.dumps(tree, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _branch_items(b: Branch) -> int:
    return len(b.episodes) + len(b.anti_patterns) + len(b.context) + len(b.quarantine) + len(b.rules)


def _scopes(records: Any) -> dict[Any, list[int]]:
    """scope -> the rows whose record has it, as ``MemoryStore.add`` keeps them."""
    by_scope: dict[Any, list[int]] = {}
    for i, r in enumerate(records):
        scope = getattr(r, "scope", None)
        if scope is not None:
            by_scope.setdefault(scope, []).append(i)
    return by_scope


def _derivable(store: MemoryStore) -> bool:
    """Whether ``store.keys`` / ``store.scopes`` are exactly what its records imply (compared as
    Python sets and lists: pyrsistent's own set comparison is a Python loop, ~30x slower)."""
    recs = list(store.records)
    return ({r.key for r in recs} == set(store.keys)
            and {k: list(v) for k, v in store.scopes.items()} == _scopes(recs))


def _derived(records: Any) -> tuple[Any, Any]:
    """The ``keys`` and ``scopes`` a MemoryStore's ``records`` imply (as ``MemoryStore.add`` keeps them)."""
    return (pset((r.key for r in records), pre_size=max(8, 2 * len(records))),
            pmap({k: pvector(v) for k, v in _scopes(records).items()}))


class SnapshotChunks:
    """Writes and loads the chunked snapshot trees of one RUN_DIR, remembering what the last
    write (or load) produced so the next write reuses it (module docstring).

    Args:
      store: a :class:`~rizz.store.runstore.RunStore` (``put_chunk``, ``chunk``, ``has_chunk``).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._memo: dict[Any, tuple[Any, ...]] = {}  # key -> (objects kept alive, sha, chunks inside)

    # -- writing ---------------------------------------------------------------------------
    def tree(self, state: Any) -> tuple[Any, set[str], int]:
        """``(tree, chunks, bytes)``: the snapshot tree of ``state``, every chunk it names, and
        the bytes of the chunks new to the store (put with ``put_chunk``; the caller commits)."""
        memo, new = self._memo, {}
        refs: list[set[str]] = [set()]
        written = [0]

        def put(data: bytes) -> str:
            sha = hashlib.sha256(data).hexdigest()
            if not self.store.has_chunk(sha):
                self.store.put_chunk(sha, data)
                written[0] += len(data)
            refs[-1].add(sha)
            return sha

        def reuse(key: Any, entry: tuple[Any, ...]) -> str:
            new[key] = entry
            refs[-1].add(entry[1])
            refs[-1].update(entry[2])
            return str(entry[1])

        def inner(make: Callable[[], bytes]) -> tuple[str, frozenset[str]]:
            """A chunk of ``make()``'s bytes, and the chunks named inside them."""
            refs.append(set())
            data = make()
            got = refs.pop()
            sha = put(data)
            refs[-1].update(got)
            return sha, frozenset(got)

        current: list[Any] = [None]

        def hook(obj: Any) -> Any:
            if obj is current[0]:
                return None
            if isinstance(obj, PVector) and len(obj) >= MIN_CHUNKED:
                return vector(obj)
            if isinstance(obj, EmbeddingMatrix) and len(obj) >= MIN_CHUNKED:
                return matrix(obj)
            if isinstance(obj, MemoryStore) and len(obj) >= MIN_CHUNKED:
                return memory(obj)
            if isinstance(obj, Branch) and _branch_items(obj) >= MIN_CHUNKED:
                return branch(obj)
            return None

        def vector(obj: PVector) -> Any:
            items = list(obj)
            out = []
            end = 0
            for start, size in blocks(len(items)):
                end = start + size
                part = items[start:end]
                key = ("v", id(part[0]), start, size)
                hit = memo.get(key)
                if hit is not None and all(map(is_, part, hit[0])):
                    out.append([reuse(key, hit), size])
                    continue
                sha, got = inner(lambda: _dumps([to_data(x, hook) for x in part]))  # noqa: B023 - called at once
                new[key] = (part, sha, got)
                out.append([sha, size])
            return {"_vc": out, "tail": [to_data(x, hook) for x in items[end:]]}

        def matrix(obj: EmbeddingMatrix) -> Any:
            rows, token = obj.rows(), obj.storage
            out = []
            end = 0
            for start, size in blocks(len(obj)):
                end = start + size
                key = ("x", id(token), start, size)
                hit = memo.get(key)
                if hit is not None and hit[0] is token:
                    out.append([reuse(key, hit), size])
                    continue
                sha = put(rows[start:end].tobytes())
                new[key] = (token, sha, frozenset())
                out.append([sha, size])
            return {"_xc": out, "tail": base64.b64encode(rows[end:].tobytes()).decode("ascii"), "d": obj.dim, "n": len(obj)}

        def memory(obj: MemoryStore) -> Any:
            key = ("m", id(obj))
            hit = memo.get(key)
            if hit is not None and hit[0] is obj:
                ok = hit[1]
            else:
                ok = _derivable(obj)
            new[key] = (obj, ok, frozenset())
            if not ok:
                return None
            return {"_t": "MemoryStore", "_derived": 1, "records": to_data(obj.records, hook), "matrix": to_data(obj.matrix, hook)}

        def branch(obj: Branch) -> Any:
            key = ("b", id(obj))
            hit = memo.get(key)
            if hit is not None and hit[0] is obj:
                return {"_c": reuse(key, hit)}

            def make() -> bytes:
                was, current[0] = current[0], obj  # the hook leaves this branch to to_data itself
                try:
                    return _dumps(to_data(obj, hook))
                finally:
                    current[0] = was

            sha, got = inner(make)
            new[key] = (obj, sha, got)
            return {"_c": sha}

        tree = to_data(state, hook)
        self._memo = new
        return tree, refs[0], written[0]

    # -- loading ---------------------------------------------------------------------------
    def load(self, tree: Any) -> Any:
        """The state of a snapshot tree (format 2 or 3), chunks read from the store and
        checked; remembers the chunks for the next :meth:`tree`.

        Raises:
          ChunkError: a chunk is missing or damaged. TypeError / ValueError: a tree this
            version cannot build (as :func:`rizz.core.from_data`).
        """
        new: dict[Any, tuple[Any, ...]] = {}
        refs: list[set[str]] = [set()]

        def chunk(sha: str) -> bytes:
            data = self.store.chunk(sha)
            if data is None or hashlib.sha256(data).hexdigest() != sha:
                raise ChunkError(f"snapshot chunk {sha[:12]}… is {'missing' if data is None else 'damaged'} in the store")
            refs[-1].add(sha)
            return data

        def hook(d: dict[str, Any]) -> Any:
            if "_vc" in d:
                items: list[Any] = []
                for sha, size in d["_vc"]:
                    refs.append(set())
                    part = [from_data(t, hook) for t in json.loads(chunk(sha))]
                    got = refs.pop()
                    refs[-1].update(got)
                    if len(part) != size:
                        raise ChunkError(f"snapshot chunk {sha[:12]}… holds {len(part)} items, the snapshot says {size}")
                    new[("v", id(part[0]), len(items), size)] = (part, sha, frozenset(got - {sha}))
                    items.extend(part)
                items.extend(from_data(t, hook) for t in d["tail"])
                return pvector(items)
            if "_xc" in d:
                dim = int(d["d"])
                parts = [np.frombuffer(chunk(sha), dtype=np.float32).reshape(size, dim) for sha, size in d["_xc"]]
                parts.append(np.frombuffer(base64.b64decode(d["tail"]), dtype=np.float32).reshape(-1, dim))
                rows = np.concatenate(parts)
                if len(rows) != d["n"]:
                    raise ChunkError(f"snapshot matrix has {len(rows)} rows, the snapshot says {d['n']}")
                m = EmbeddingMatrix.from_rows(rows, dim, len(rows) // 4)
                start = 0
                for sha, size in d["_xc"]:
                    new[("x", id(m.storage), start, size)] = (m.storage, sha, frozenset())
                    start += size
                return m
            if d.get("_derived") and d.get("_t") == "MemoryStore":
                records, matrix = from_data(d["records"], hook), from_data(d["matrix"], hook)
                keys, scopes = _derived(records)
                obj = MemoryStore(records, matrix, keys, scopes)
                new[("m", id(obj))] = (obj, True, frozenset())
                return obj
            if "_c" in d and len(d) == 1:
                refs.append(set())
                b = from_data(json.loads(chunk(d["_c"])), hook)
                got = refs.pop()
                refs[-1].update(got)
                if not isinstance(b, Branch):
                    raise ChunkError(f"snapshot chunk {d['_c'][:12]}… is not a branch")
                new[("b", id(b))] = (b, d["_c"], frozenset(got - {d["_c"]}))
                return b
            return None

        state = from_data(tree, hook)
        self._memo = new
        return state
