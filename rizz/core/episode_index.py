"""The bank-level episodic index: every branch's episode embeddings in one matrix.

Derived data of an :class:`~rizz.core.records.AdaptiveState` (never serialised, never part
of equality or the digest; rebuilt by ``from_data``). It lets cross-branch example retrieval
score all stored episodes with ONE matrix-vector product (``matrix.rows() @ q``) instead of
one product per branch, then mask the rows of ineligible branches and take the top k.

Layout: with ``where = index.where()``, row ``j`` of :attr:`EpisodeIndex.matrix` is the
embedding of episode ``branches[f"b{where[0, j]}"].episodes.records[where[1, j]]``.
:meth:`EpisodeIndex.build` lays the branches out in creation order (``b0, b1, …``), each
branch's episodes in their local order; later writes are appended at the end (``EpisodeWritten``), so the row order is not
the (branch, local row) order — retrieval breaks ties with :attr:`where`, not row position.
Deactivated branches keep their rows (masked at query time); merges and prunes rebuild.

Both arrays are persistent and append-only (see :class:`~rizz.core.vec.EmbeddingMatrix`):
an append shares storage with the index it came from, so a step costs O(d), not O(n·d);
appending twice to the same older index copies the whole index the second time. Memory: a
second copy of every episode row (float32, capacity doubling) plus 16 bytes per row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from pyrsistent import PMap, pmap

from rizz.core.vec import EmbeddingMatrix

__all__ = ["EpisodeIndex", "branch_number", "index_of"]


def branch_number(branch_id: str) -> int:
    """``n`` of a branch id ``"b<n>"`` (ids are issued as ``f"b{next_branch}"`` by routing), so
    numeric order is creation order. Raises ValueError for any other id."""
    if branch_id[:1] != "b" or not branch_id[1:].isdigit():
        raise ValueError(f"branch id {branch_id!r} is not of the form b<n>")
    return int(branch_id[1:])


class _Where:
    """Persistent ``(2, n)`` int64 array — row 0 branch numbers, row 1 local rows, each
    contiguous — with amortised O(1) append (storage shared as in ``EmbeddingMatrix``)."""

    __slots__ = ("_data", "_used", "_n")

    def __init__(self, data: np.ndarray | None = None, n: int = 0, used: list[int] | None = None) -> None:
        self._data = data if data is not None else np.zeros((2, 0), dtype=np.int64)
        self._used = used if used is not None else [n]  # high-water mark, shared by every view of the buffer
        self._n = n

    @classmethod
    def from_array(cls, arr: np.ndarray, spare: int = 0) -> _Where:
        data = np.zeros((2, max(arr.shape[1] + spare, 8)), dtype=np.int64)
        data[:, : arr.shape[1]] = arr
        return cls(data, arr.shape[1])

    def rows(self) -> np.ndarray:
        view = self._data[:, : self._n]
        view.flags.writeable = False
        return view

    def append(self, number: int, local: int) -> _Where:
        data, used = self._data, self._used
        if used[0] != self._n or self._n == data.shape[1]:
            data = np.zeros((2, max(8, 2 * self._n)), dtype=np.int64)
            data[:, : self._n] = self._data[:, : self._n]
            used = [self._n]
        data[0, self._n] = number
        data[1, self._n] = local
        used[0] = self._n + 1
        return _Where(data, self._n + 1, used)


class EpisodeIndex:
    """All episode embeddings of a branch bank, in one ``(n, d)`` float32 matrix.

    Attributes:
      matrix: ``(n, d)`` float32 :class:`EmbeddingMatrix`, one row per stored episode of
        every branch (active or not), rows L2-normalised as written.
      stores: branch id → the episodes ``MemoryStore`` the rows of that branch were read
        from; :meth:`is_current` compares these by identity with the branches.
    """

    __slots__ = ("matrix", "_where", "stores")

    def __init__(self, matrix: EmbeddingMatrix, where: _Where, stores: PMap[str, Any]) -> None:
        self.matrix = matrix
        self._where = where
        self.stores = stores

    @classmethod
    def build(cls, branches: Iterable[Any]) -> EpisodeIndex:
        """Index the episodes of ``branches`` (objects with ``id`` and ``episodes``), laid out in
        creation order. O(n·d) copy; used on merge, prune and ``from_data``."""
        live = sorted((b for b in branches if len(b.episodes)), key=lambda b: branch_number(b.id))
        if not live:
            return cls(EmbeddingMatrix(0), _Where(), pmap())
        dim = live[0].episodes.matrix.dim
        rows = np.concatenate([b.episodes.matrix.rows() for b in live])
        where = np.concatenate([np.stack([np.full(len(b.episodes), branch_number(b.id)), np.arange(len(b.episodes))]) for b in live], axis=1)
        spare = len(rows) // 4  # room to grow before the first write copies the index
        return cls(EmbeddingMatrix.from_rows(rows, dim, spare), _Where.from_array(where, spare), pmap({b.id: b.episodes for b in live}))

    def __len__(self) -> int:
        return len(self.matrix)

    def where(self) -> np.ndarray:
        """Read-only ``(2, n)`` int64: branch numbers (row 0) and local rows (row 1) of every row."""
        return self._where.rows()

    def with_write(self, branches: PMap[str, Any], branch_id: str, old_store: Any, vec: bytes) -> EpisodeIndex:
        """The index after branch ``branch_id`` went from ``old_store`` to ``branches[branch_id].episodes``
        (= ``old_store.add(episode, vec)``, ``vec`` the (d,) float32 bytes of the new row).

        Appends one row when the index held ``old_store`` for that branch (the normal case,
        O(d) amortised); otherwise rebuilds from ``branches`` (O(n·d), only after a state was
        assembled by hand).
        """
        held = self.stores.get(branch_id)
        if held is not old_store and (held is not None or len(old_store)):
            return EpisodeIndex.build(branches.values())
        matrix = self.matrix if len(self.matrix) or self.matrix.dim else EmbeddingMatrix(len(vec) // 4)
        return EpisodeIndex(
            matrix.append(vec),
            self._where.append(branch_number(branch_id), len(old_store)),
            self.stores.set(branch_id, branches[branch_id].episodes),
        )

    def is_current(self, branches: PMap[str, Any]) -> bool:
        """Whether the index holds exactly the episodes of ``branches`` (identity per store)."""
        live = 0
        for bid, b in branches.items():
            if len(b.episodes):
                live += 1
                if self.stores.get(bid) is not b.episodes:
                    return False
        return live == len(self.stores)

    def scores(self, q: np.ndarray) -> np.ndarray:
        """``(n,)`` float32 ``matrix.rows() @ q`` for a ``(d,)`` float32 query: one BLAS gemv
        (threaded when numpy's BLAS is). Can differ from :func:`~rizz.core.vec.row_dots` in the
        last bits (summation order)."""
        out: np.ndarray = self.matrix.rows() @ q
        return out

    def __repr__(self) -> str:
        return f"EpisodeIndex(n={len(self)}, branches={len(self.stores)})"


def index_of(state: Any) -> EpisodeIndex:
    """``state.episode_index`` when current, else one rebuilt from ``state.branches``."""
    idx = state.episode_index
    return idx if idx.is_current(state.branches) else EpisodeIndex.build(state.branches.values())

