"""Contextual-bandit routing (paper §3: "the router learns which expert should condition each
input"), as LinUCB with one shared linear model (Li, Chu, Langford, Schapire, WWW 2010).

Arms are the shape-compatible branches and "spawn". Each arm has a feature vector

  ``x = [1, label score, sketch energy, anchor cosine, shape match, branch mean reward, spawn]``

(``FEATURES``; label score = ``w_function·[f = f_b] + w_application·[a = a_b]``; energy from
:mod:`rizz.core.sketch`, 0 when sketches are off; shape match 1 when the branch serves exactly
the input's shape; mean reward over the branch's last 32 rewards). The spawn arm is
``[0, 0, 0, 0, 0, 0, 1]``: disjoint from the branch features, so what the model learns about
branches (their shared bias included) never moves the value of spawning, and the spawn weight
is learned only from the verdicts of freshly spawned branches. (With a shared bias, a branch
that kept failing pulled the bias, and with it spawn, down as well, and the router never left
it at ``alpha`` 0.25.) The chosen arm is ``argmax θᵀx + α·sqrt(xᵀA⁻¹x)`` with
``A = λI + Σ x xᵀ`` and ``θ = A⁻¹(λθ₀ + Σ r x)`` over the verdicts folded so far; ties go to the
earlier branch, spawn last. The prior ``θ₀`` is the fixed routing score
(``−score_offset`` bias, weight 1 on the label score, ``sketch.w_energy``, ``w_anchor``, and
0 on spawn so that spawn scores 0, the fixed router's spawn threshold), so before any verdict the posterior mean is
the paper's score. The state keeps only the data sums ``Σ x xᵀ`` and ``Σ r x``
(:class:`~rizz.core.records.RouterState`); the prior comes from the policy at choice time.

Deterministic: no sampling, so a bandit-routed log refolds to the same digest.
"""

from __future__ import annotations

import numpy as np

from rizz.core.policy import Policy
from rizz.core.records import RouterState

__all__ = ["FEATURES", "bandit_update", "choose", "prior"]

FEATURES = ("bias", "label_score", "energy", "anchor_cos", "shape_match", "mean_reward", "spawn")
M = len(FEATURES)


def prior(policy: Policy) -> np.ndarray:
    """θ₀ (m,) float64: the fixed routing score as a linear model over ``FEATURES``."""
    r = policy.routing
    return np.array([-r.score_offset, 1.0, policy.sketch.w_energy, r.w_anchor, 0.0, 0.0, 0.0])


def _sums(router: RouterState | None) -> tuple[np.ndarray, np.ndarray]:
    if router is None:
        return np.zeros((M, M)), np.zeros(M)
    return np.frombuffer(router.a, np.float64).reshape(M, M), np.frombuffer(router.b, np.float64)


def bandit_update(router: RouterState | None, features: tuple[float, ...], reward: float) -> RouterState:
    """The router state after one verdict for the arm with ``features`` (m,)."""
    a, b = _sums(router)
    x = np.asarray(features, dtype=np.float64)
    return RouterState((a + np.outer(x, x)).tobytes(), (b + reward * x).tobytes(), (router.updates if router else 0) + 1)


def choose(router: RouterState | None, policy: Policy, arms: np.ndarray) -> tuple[int, float]:
    """Index of the chosen row of ``arms`` (k, m) and its UCB score (rounded to 1e-6)."""
    lam = policy.bandit.prior_strength
    a, b = _sums(router)
    a = a + lam * np.eye(M)
    b = b + lam * prior(policy)
    theta = np.linalg.solve(a, b)
    ainv_x = np.linalg.solve(a, arms.T)  # (m, k)
    width = np.sqrt(np.maximum((arms.T * ainv_x).sum(axis=0), 0.0))
    ucb = arms @ theta + policy.bandit.alpha * width
    i = int(np.argmax(np.round(ucb, 9)))
    return i, round(float(ucb[i]), 6)
