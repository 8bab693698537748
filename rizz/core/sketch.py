"""Per-branch subspace sketches (paper §3: "branch-specific subspace sketches").

A :class:`~rizz.core.records.Sketch` is a Frequent-Directions sketch (Liberty, "Simple and
Deterministic Matrix Sketching", KDD 2013) of the unit input embeddings routed to a branch:
at most ``rank`` mutually orthogonal rows ``σ_i v_iᵀ``. Folding in ``x`` stacks
``sqrt(decay)·rows`` with ``x``, takes the SVD and, when there are more than ``rank``
directions, shrinks every ``σ_i²`` by the ``(rank+1)``-th and keeps the top ``rank``
(FD's guarantee: ``‖AᵀA − BᵀB‖ ≤ ‖A‖_F² / (rank+1)`` for ``decay`` 1).

Features read from a sketch, for a unit vector ``x``:

* ``energy(sk, x) = Σ_i (v_i·x)²`` ∈ [0, 1]: how much of ``x`` lies in the branch's subspace;
  ``1 − energy`` is its residual (novelty).
* ``overlap(a, b) = ‖V_a V_bᵀ‖_F² / min(k_a, k_b)`` ∈ [0, 1]: 1 when one subspace contains the
  other (merge candidates).

Pure numpy. The SVD is LAPACK's, deterministic on one machine, so a log refolds to the same
digest there; on another BLAS build a sketch's last bits (and so the digest of a state with
sketches on) may differ.
"""

from __future__ import annotations

import numpy as np

from rizz.core.records import Sketch
from rizz.core.vec import as_vector

__all__ = ["energy", "merge_sketches", "overlap", "update_sketch"]

_EPS = 1e-12


def _rows(sk: Sketch | None) -> np.ndarray | None:
    if sk is None or not sk.rows:
        return None
    return np.frombuffer(sk.rows, dtype=np.float32).reshape(-1, sk.dim)


def _shrink(m: np.ndarray, rank: int) -> np.ndarray:
    """(k, d) → (≤ rank, d) orthogonal rows σ'_i v_iᵀ (the FD shrink), float32."""
    _, s, vt = np.linalg.svd(m.astype(np.float64), full_matrices=False)
    s2 = s * s
    if len(s) > rank:
        s2 = np.maximum(s2[:rank] - s2[rank], 0.0)
        vt = vt[:rank]
    keep = s2 > _EPS
    out: np.ndarray = (np.sqrt(s2[keep])[:, None] * vt[keep]).astype(np.float32)
    return out


def update_sketch(sk: Sketch | None, embedding: bytes, rank: int, decay: float = 1.0) -> Sketch:
    """The sketch after folding in one (d,) float32 unit embedding (bytes)."""
    x = as_vector(embedding).astype(np.float32)[None, :]
    old = _rows(sk)
    m = x if old is None else np.vstack([old * np.float32(np.sqrt(decay)), x])
    rows = _shrink(m, rank)
    return Sketch(rows.tobytes(), int(x.shape[1]), (sk.count if sk is not None else 0) + 1, rank)


def merge_sketches(a: Sketch | None, b: Sketch | None) -> Sketch | None:
    """One sketch of both branches' inputs (FD sketches are mergeable: stack and shrink)."""
    ra, rb = _rows(a), _rows(b)
    if rb is None:
        return a
    if ra is None:
        return b
    rank = max(a.rank, b.rank)  # type: ignore[union-attr]
    return Sketch(_shrink(np.vstack([ra, rb]), rank).tobytes(), a.dim, a.count + b.count, rank)  # type: ignore[union-attr]


def _basis(sk: Sketch | None) -> np.ndarray | None:
    r = _rows(sk)
    if r is None:
        return None
    n = np.linalg.norm(r, axis=1)
    keep = n > _EPS
    return (r[keep] / n[keep, None]) if keep.any() else None


def energy(sk: Sketch | None, embedding: bytes) -> float:
    """Projection energy of the unit (d,) embedding on the sketch's subspace, in [0, 1] (0: no sketch)."""
    v = _basis(sk)
    if v is None:
        return 0.0
    p = v @ as_vector(embedding)
    return float(min(max(float(np.dot(p, p)), 0.0), 1.0))


def overlap(a: Sketch | None, b: Sketch | None) -> float:
    """Subspace overlap ``‖V_a V_bᵀ‖_F² / min(k_a, k_b)`` in [0, 1] (0 when either is empty)."""
    va, vb = _basis(a), _basis(b)
    if va is None or vb is None:
        return 0.0
    c = va @ vb.T
    return float(min(float((c * c).sum()) / min(len(va), len(vb)), 1.0))
