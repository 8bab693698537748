"""Bootstrap statistics of a bench's rewards: percentile intervals of a mean and paired deltas.

Every interval is a percentile bootstrap (:data:`N_RESAMPLES` = 2000 resamples with replacement,
``numpy.random.default_rng(seed)``), so the same inputs and seed give the same numbers. Used by
the bench report (:mod:`rizz.lab.report`), the peers' table (:mod:`rizz.lab.peers.report`) and
the sweep report (:mod:`rizz.lab.sweep_report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["N_RESAMPLES", "bootstrap_ci", "paired_delta"]

N_RESAMPLES = 2000  # bootstrap resamples per interval (percentile method, 95%)
_CHUNK = 250  # resamples drawn per batch, bounding memory at _CHUNK x n indices


def _resample_means(x: np.ndarray, seed: int, n_resamples: int) -> np.ndarray:
    """``(n_resamples,)`` means of ``x`` resampled with replacement (seeded, chunked)."""
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples, dtype=np.float64)
    for lo in range(0, n_resamples, _CHUNK):
        hi = min(lo + _CHUNK, n_resamples)
        out[lo:hi] = x[rng.integers(0, len(x), size=(hi - lo, len(x)))].mean(axis=1)
    return out


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, n_resamples: int = N_RESAMPLES, level: float = 0.95) -> list[float] | None:
    """Percentile-bootstrap interval ``[lo, hi]`` of the mean of ``values`` (same units).

    Deterministic for a fixed ``seed``. Returns None for no values (nothing to estimate).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    means = _resample_means(x, seed, n_resamples)
    a = (1.0 - level) / 2.0
    return [round(float(np.quantile(means, a)), 6), round(float(np.quantile(means, 1.0 - a)), 6)]


def paired_delta(rewards: Sequence[float], base: Sequence[float], *, seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """Mean of ``rewards - base`` in points (x100) with a paired bootstrap 95% interval.

    ``rewards[i]`` and ``base[i]`` are the rewards of the same step id. Returns
    ``{"delta_pp": float, "ci95_pp": [lo, hi] | None, "n": int}``. Raises ValueError if the
    lengths differ.
    """
    a, b = np.asarray(rewards, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired_delta needs equal lengths, got {a.size} and {b.size}")
    d = (a - b) * 100.0
    ci = bootstrap_ci(d, seed=seed, n_resamples=n_resamples)
    return {"delta_pp": round(float(d.mean()), 4) if d.size else 0.0, "ci95_pp": ci and [round(v, 4) for v in ci], "n": int(d.size)}
