"""Embedding vectors and the append-only embedding matrix behind each memory store.

A vector is stored as ``bytes`` holding float32 values (hashable, immutable, comparable),
shape ``(d,)``, L2-normalised by the shell before it reaches the core (spec §2: ``φ`` and
``ψ`` are normalised). :class:`EmbeddingMatrix` is a persistent ``(n, d)`` float32 matrix:
appending returns a new matrix and shares storage with the old one where it can, so a
branch with 10^5 examples is not copied at every write; an older matrix never sees rows
appended after it (it only reads ``[:n]``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["NORM_TOLERANCE", "EmbeddingMatrix", "as_vector", "check_dimension", "cosine", "row_dots", "to_bytes", "vec_repr"]


#: How far from 1 the L2 norm of a vector :func:`to_bytes` converts may be (float32 rounding of
#: an embedder's normalised output is ~1e-7; 1e-3 also lets float16 embedders through).
NORM_TOLERANCE = 1e-3


def to_bytes(vec: np.ndarray | bytes | Iterable[float]) -> bytes:
    """float32 bytes of a 1-d vector.

    ``bytes`` are taken as they are: float32 values, already checked (a logged vector on a
    replay costs nothing here). Anything else (a numpy array of any float dtype, a list) is
    converted to float32 and must be finite, 1-d and L2-normalised (norm within
    :data:`NORM_TOLERANCE` of 1, as spec §2 requires of ``φ`` and ``ψ``).

    Raises:
        ValueError: not 1-d, not finite, or not unit length; the message says which.
    """
    if isinstance(vec, bytes):
        return vec
    arr = np.asarray(vec, dtype=np.float32)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)):
        raise ValueError(f"expected a finite 1-d vector, got shape {arr.shape}")
    norm = float(np.sqrt(np.dot(arr, arr)))
    if abs(norm - 1.0) > NORM_TOLERANCE:
        raise ValueError(f"expected an L2-normalised vector (norm 1), got norm {norm:.6g} over {arr.shape[0]} dimensions: "
                         "divide it by its norm (v / numpy.linalg.norm(v))")
    return arr.tobytes()


def check_dimension(vec: bytes, dim: int, what: str) -> None:
    """Raise a ValueError naming ``what`` when ``vec`` is not ``dim`` float32 values (the
    dimension every vector of one state shares: one embedder's ``d``). O(1): a length check."""
    if len(vec) != 4 * dim:
        n = len(vec) / 4
        hint = " (float64 bytes? pass the float32 array, or v.astype(numpy.float32).tobytes())" if len(vec) == 8 * dim else ""
        raise ValueError(f"{what}: {n:g} dimensions ({len(vec)} bytes of float32), but this state's vectors have {dim}: "
                         f"every embedding of one state must come from the same embedder{hint}")


def vec_repr(data: bytes) -> str:
    """What a record's ``repr`` shows for vector bytes: their shape, not the raw bytes.

    Example:
        >>> vec_repr(np.zeros(384, dtype=np.float32).tobytes()), vec_repr(b"")
        ('<(384,) float32>', "b''")
    """
    return f"<({len(data) // 4},) float32>" if data else "b''"


def as_vector(data: bytes) -> np.ndarray:
    """Read-only ``(d,)`` float32 view of vector bytes (no copy)."""
    return np.frombuffer(data, dtype=np.float32)


def cosine(a: bytes, b: bytes) -> float:
    """Cosine of two L2-normalised vectors (their dot product), as a Python float."""
    return float(np.dot(as_vector(a), as_vector(b)))


def row_dots(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows @ q``: (n, d) float32 rows · (d,) float32 query → (n,) float32 dot products.

    Computed by numpy's own single-threaded einsum loop, not a BLAS gemv. Retrieval uses it for
    the per-branch products (anti-patterns, scoped context, rules, the routed branch's examples
    when no other branch is eligible — several per step; cross-branch examples use one BLAS
    product over the bank's episodic index instead), and a threaded BLAS call stalls whenever
    another process holds a core: on the 2-core development machine under load, 24 products over
    10^5 rows in all took 58–288 ms through 2-thread OpenBLAS and 12–21 ms through this loop
    (``results/2026-11-30-core-overhead.md``). The loop is memory-bound, as fast as single-threaded BLAS, and
    its result can differ from a BLAS gemv in the last bits (summation order: ~5e-8 on unit
    vectors of 384 dimensions).
    """
    out: np.ndarray = np.einsum("ij,j->i", rows, q)
    return out


class _Storage:
    __slots__ = ("data", "used")

    def __init__(self, capacity: int, dim: int) -> None:
        self.data = np.zeros((capacity, dim), dtype=np.float32)
        self.used = 0


class EmbeddingMatrix:
    """Persistent ``(n, d)`` float32 matrix with amortised O(d) append.

    Storage is shared between a matrix and the one its ``append`` returns while the storage's
    high-water mark equals ``n``; a second append to the same older matrix copies first, so
    every matrix value keeps exactly the rows it was built with.
    """

    __slots__ = ("_st", "_n", "_dim")

    def __init__(self, dim: int, _st: _Storage | None = None, _n: int = 0) -> None:
        self._dim = int(dim)
        self._st = _st
        self._n = _n

    @classmethod
    def from_rows(cls, rows: np.ndarray, dim: int, spare: int = 0) -> EmbeddingMatrix:
        """A matrix of ``rows`` ((n, dim) float32, copied) with room for ``spare`` more rows
        before its first append copies (a loaded state's matrices grow again at once)."""
        rows = np.asarray(rows, dtype=np.float32).reshape(-1, dim)
        st = _Storage(max(len(rows) + max(spare, 0), 8), dim)
        st.data[: len(rows)] = rows
        st.used = len(rows)
        return cls(dim, st, len(rows))

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return self._n

    def rows(self) -> np.ndarray:
        """Read-only ``(n, d)`` float32 view."""
        if self._st is None:
            return np.zeros((0, self._dim), dtype=np.float32)
        view = self._st.data[: self._n]
        view.flags.writeable = False
        return view

    @property
    def storage(self) -> object:
        """An opaque token of the buffer this matrix reads. Rows below a buffer's high-water
        mark are never written again, so while two matrices have the same token their common
        first rows are the same (a snapshot writer skips rows it wrote before; ``None`` for an
        empty matrix)."""
        return self._st

    def dots(self, q: np.ndarray) -> np.ndarray:
        """``(n,)`` float32 dot products of every row with the ``(d,)`` query (see :func:`row_dots`)."""
        return row_dots(self.rows(), q)

    def append(self, vec: bytes) -> EmbeddingMatrix:
        v = as_vector(vec)
        if v.shape != (self._dim,):
            raise ValueError(f"expected a ({self._dim},) vector, got {v.shape}")
        st = self._st
        if st is None or st.used != self._n or self._n == len(st.data):
            new = _Storage(max(8, 2 * self._n), self._dim)
            if self._n:
                new.data[: self._n] = st.data[: self._n]  # type: ignore[union-attr]
            st = new
        st.data[self._n] = v
        st.used = self._n + 1
        return EmbeddingMatrix(self._dim, st, self._n + 1)

    def take(self, index: Iterable[int]) -> EmbeddingMatrix:
        """A new matrix of the given rows, in the given order (copies)."""
        idx = np.fromiter(index, dtype=np.int64)
        return EmbeddingMatrix.from_rows(self.rows()[idx], self._dim)

    def concat(self, other: EmbeddingMatrix) -> EmbeddingMatrix:
        return EmbeddingMatrix.from_rows(np.concatenate([self.rows(), other.rows()]), self._dim)


    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EmbeddingMatrix):
            return NotImplemented
        return self._dim == other._dim and self._n == other._n and np.array_equal(self.rows(), other.rows())

    def __hash__(self) -> int:
        return hash((self._dim, self._n, self.rows().tobytes()))

    def __repr__(self) -> str:
        return f"EmbeddingMatrix(n={self._n}, d={self._dim})"
