"""Routing (spec §3): label normalisation, snap, shape guard, routing score, spawn.

All functions are pure: they read the state, the policy and the step input and return a
:class:`RouteDecision`; nothing here writes.
"""

from __future__ import annotations

import functools
import operator
import re

import numpy as np
from attrs import field, frozen

from rizz.core.bandit import choose
from rizz.core.events import BranchSpawned, LabelSnapped
from rizz.core.inputs import StepInput
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, Branch, Label
from rizz.core.sketch import energy
from rizz.core.vec import as_vector, check_dimension

__all__ = [
    "CONTEXT_FUNCTION",
    "RouteDecision",
    "app_tokens",
    "jaccard",
    "needs_label",
    "normalise_label",
    "route",
    "route_candidates",
    "snap_label",
]

#: Function of branches spawned by context-only input (spec §3.6).
CONTEXT_FUNCTION = "context"
_NON_WORD = re.compile(r"[^a-z0-9]+")


def _norm(part: str) -> str:
    return _NON_WORD.sub("-", part.strip().lower()).strip("-") or "unknown"


def normalise_label(function: str, application: str) -> Label:
    """Lowercase, hyphen-delimited label; empty parts become ``unknown`` (never empty)."""
    return Label(_norm(function), _norm(application))


def app_tokens(application: str) -> frozenset[str]:
    """``T(a)``: the non-empty hyphen-delimited tokens of an application label (spec §3.3)."""
    return frozenset(t for t in application.split("-") if t)


@functools.lru_cache(maxsize=4096)
def _jaccard(a: str, b: str) -> float:
    ta, tb = app_tokens(a), app_tokens(b)
    union = ta | tb
    return len(ta & tb) / len(union) if union else 0.0


def jaccard(a: str, b: str) -> float:
    """``J(a, a') = |T(a) ∩ T(a')| / |T(a) ∪ T(a')|`` (spec §3.3); 0.0 for two empty sets.
    A function of the two strings, so its answers are memoised (the lifecycle's merge pass and
    sibling snapping ask for the same few label pairs at step after step)."""
    return _jaccard(a, b)


def _floats(v: object) -> tuple[float, ...]:
    return tuple(float(x) for x in v)  # type: ignore[attr-defined]


@frozen
class RouteDecision:
    """Where a step goes. ``spawn`` is set when the step creates ``branch_id``.

    ``features``: under ``routing.router: linucb``, the chosen arm's feature vector as seen at
    choice time (:data:`rizz.core.bandit.FEATURES`), which the verdict's bandit update uses;
    () otherwise. The decision travels with a pending answer to its verdict (``feedback_round``),
    across restarts in a snapshot's pending-answer side file, so it holds only plain values: the
    features are Python floats (converted on construction) and left out of ``to_data`` while ().
    """

    branch_id: str
    label: Label
    score: float
    spawn: BranchSpawned | None = None
    snapped: LabelSnapped | None = None
    features: tuple[float, ...] = field(default=(), converter=_floats, metadata={"omit_default": True})


def _answer_branches(state: AdaptiveState, policy: Policy, shape: str | None) -> list[Branch]:
    guard = policy.routing.shape_guard and shape is not None
    return [b for b in state.active_branches()
            if b.label.function != CONTEXT_FUNCTION and not (guard and b.shape is not None and b.shape != shape)]


#: One-entry memo of the last anchor matrix: (the anchors' bytes objects, their stacked rows).
#: Keyed on the anchors, not the branches: a branch is a new object after every step that
#: touches its stats, but keeps its anchor object, so consecutive steps over the same candidates
#: reuse the matrix. The same bytes objects always stack to the same matrix (a pure cache:
#: results are bit-identical with or without it; the memo holds the bytes, so an id is never
#: reused while it is kept).
_ANCHORS: tuple[tuple[bytes, ...], np.ndarray] | None = None


def _anchor_matrix(branches: list[Branch]) -> np.ndarray:
    global _ANCHORS
    memo = _ANCHORS
    keys = tuple([b.anchor for b in branches])
    if memo is not None and len(memo[0]) == len(keys) and all(map(operator.is_, memo[0], keys)):
        return memo[1]
    anchors = np.stack([as_vector(a) for a in keys])
    anchors.flags.writeable = False
    _ANCHORS = (keys, anchors)
    return anchors


def _anchor_cos(branches: list[Branch], embedding: bytes) -> np.ndarray:
    if not branches:
        return np.zeros(0, dtype=np.float32)
    anchors = _anchor_matrix(branches)
    if 4 * anchors.shape[1] != len(embedding):  # a clear error where numpy's matmul would raise its own
        check_dimension(embedding, anchors.shape[1], "StepInput.embedding")
    out: np.ndarray = anchors @ as_vector(embedding)
    return out


def needs_label(state: AdaptiveState, policy: Policy, embedding: bytes, shape: str | None) -> bool:
    """Whether the shell should ask the LLM judge for a label before routing this input.

    Always True under ``routing.judge: always`` (the paper's setting). Under
    ``when_uncertain`` (and ``local``, whose label costs no model call) it is False only when
    the nearest shape-compatible anchor has cosine ≥ ``confident_similarity`` and leads the
    nearest anchor of a branch with a *different function* by ≥ ``confident_margin`` (two
    branches of the same function competing is not doubt about the kind of work).
    """
    if policy.routing.mode == "single":
        return False
    if policy.routing.judge == "always":
        return True
    cands = _answer_branches(state, policy, shape)
    cos = _anchor_cos(cands, embedding)
    if len(cos) == 0:
        return True
    top = int(np.argmax(cos))
    if cos[top] < policy.routing.confident_similarity:
        return True
    rivals = [float(c) for b, c in zip(cands, cos) if b.label.function != cands[top].label.function]
    return bool(rivals) and float(cos[top]) - max(rivals) < policy.routing.confident_margin


def snap_label(state: AdaptiveState, policy: Policy, label: Label, label_embedding: bytes) -> tuple[Label, LabelSnapped | None]:
    """Snap the proposed application to an existing one (spec §3.2–3.3).

    First by label-embedding cosine ≥ ``snap_threshold`` over every existing application;
    otherwise by hyphen-token Jaccard ≥ ``jaccard_threshold`` among same-function siblings.
    Ties break by branch creation order.
    """
    r = policy.routing
    apps: dict[str, bytes] = {}
    siblings: list[str] = []
    for b in state.active_branches():
        if b.label.function == CONTEXT_FUNCTION:
            continue
        apps.setdefault(b.label.application, b.label_embedding)
        if b.label.function == label.function and b.label.application not in siblings:
            siblings.append(b.label.application)
    if label.application in apps:
        return label, None
    if r.snap_enabled and label_embedding:
        q = as_vector(label_embedding)
        best, best_cos = None, -2.0
        for app, emb in apps.items():
            if emb and len(emb) == len(label_embedding):
                c = float(np.dot(as_vector(emb), q))
                if c > best_cos:
                    best, best_cos = app, c
        if best is not None and best_cos >= r.snap_threshold:
            snapped = Label(label.function, best)
            return snapped, LabelSnapped(label, snapped, "embedding", round(best_cos, 6))
    if r.jaccard_enabled:
        best, best_j = None, -1.0
        for app in siblings:
            j = jaccard(label.application, app)
            if j > best_j:
                best, best_j = app, j
        if best is not None and best_j >= r.jaccard_threshold:
            snapped = Label(label.function, best)
            return snapped, LabelSnapped(label, snapped, "jaccard", round(best_j, 6))
    return label, None


def _can_spawn(state: AdaptiveState, policy: Policy) -> bool:
    lc = policy.lifecycle
    return len(state.branches) < lc.max_branches and len(state.active_branches()) < lc.max_active


def _spawn(state: AdaptiveState, inp: StepInput, label: Label, shape: str | None) -> RouteDecision:
    bid = f"b{state.next_branch}"
    ev = BranchSpawned(bid, label, inp.embedding, inp.label_embedding, shape, inp.step)
    return RouteDecision(bid, label, 0.0, spawn=ev)


def route(state: AdaptiveState, policy: Policy, inp: StepInput) -> RouteDecision:
    """Choose the branch for ``inp`` (spec §3.1–3.6); spawn when nothing scores positive.

    Context-only input goes to the nearest spawn anchor, spawning a context branch when the
    bank is empty or the best cosine is below ``context_spawn_similarity``. When the bank is
    full, the best-scoring compatible branch (else the nearest anchor) takes the input.
    """
    r = policy.routing
    if r.mode == "single":
        if state.branches:
            bid = state.branch_ids()[0]
            anchor = state.branches[bid].anchor
            if len(anchor) != len(inp.embedding):  # a clear error before retrieval's numpy meets it
                check_dimension(inp.embedding, len(anchor) // 4, "StepInput.embedding")
            return RouteDecision(bid, state.branches[bid].label, 1.0)
        return _spawn(state, inp, Label("any", "global"), None)

    if inp.context_only:
        actives = state.active_branches()
        cos = _anchor_cos(actives, inp.embedding)
        context_label = Label(CONTEXT_FUNCTION, _norm(inp.scope or "general"))
        if len(cos) and (cos.max() >= r.context_spawn_similarity or not _can_spawn(state, policy)):
            i = int(np.argmax(cos))
            return RouteDecision(actives[i].id, actives[i].label, float(cos[i]))
        return _spawn(state, inp, context_label, None)

    snapped_ev = None
    label: Label | None
    if r.declared_label and inp.declared_label is not None:
        label = inp.declared_label  # a caller-declared route is taken as it is (no snap)
    elif inp.label is not None:
        label, snapped_ev = snap_label(state, policy, inp.label, inp.label_embedding)
    else:
        label = None
    cands = _answer_branches(state, policy, inp.shape)
    cos = _anchor_cos(cands, inp.embedding)
    sk = policy.sketch
    energies = [energy(b.sketch, inp.embedding) for b in cands] if sk.enabled else [0.0] * len(cands)
    if r.declared_label and inp.declared_label is not None:
        declared = inp.declared_label  # == label
        same = [b for b in cands if b.label == declared]
        if same:
            i = max(range(len(same)), key=lambda j: float(np.dot(as_vector(same[j].anchor), as_vector(inp.embedding))))
            return RouteDecision(same[i].id, declared, 1.0)
        if _can_spawn(state, policy):
            d = _spawn(state, inp, declared, inp.shape)
            return RouteDecision(d.branch_id, declared, 0.0, spawn=d.spawn)
    if r.router == "linucb" and cands:
        return _bandit_route(state, policy, inp, label, cands, cos, energies, snapped_ev)
    if label is None:
        if cands:
            i = int(np.argmax(cos))
            return RouteDecision(cands[i].id, cands[i].label, float(cos[i]))
        label = Label("unknown", "unknown")
    scores = _label_scores(policy, cands, cos, energies, label)
    if scores:
        i = int(np.argmax(scores))
        novel = _novel(cands[i], energies[i], policy) and _can_spawn(state, policy)
        if (scores[i] > 0 and not novel) or not _can_spawn(state, policy):
            return RouteDecision(cands[i].id, cands[i].label, round(float(scores[i]), 6), snapped=snapped_ev)
    elif not _can_spawn(state, policy):
        actives = state.active_branches()
        i = int(np.argmax(_anchor_cos(actives, inp.embedding)))
        return RouteDecision(actives[i].id, actives[i].label, 0.0, snapped=snapped_ev)
    d = _spawn(state, inp, label, inp.shape)
    return RouteDecision(d.branch_id, label, 0.0, spawn=d.spawn, snapped=snapped_ev)


def _label_scores(policy: Policy, cands: list[Branch], cos: np.ndarray, energies: list[float], label: Label) -> list[float]:
    """The routing score of each candidate for ``label`` (spec §3.4; plus the sketch energy term)."""
    r, sk = policy.routing, policy.sketch
    scores = [
        r.w_function * (b.label.function == label.function)
        + r.w_application * (b.label.application == label.application)
        + r.w_anchor * float(c)
        - r.score_offset
        for b, c in zip(cands, cos)
    ]
    if sk.enabled and sk.w_energy > 0:
        scores = [s + sk.w_energy * e for s, e in zip(scores, energies)]
    return scores


def route_candidates(state: AdaptiveState, policy: Policy, inp: StepInput, label: Label | None) -> list[tuple[str, float, float | None]]:
    """The branches an answered input was scored against, for a person (``rizz view``).

    Returns ``(branch id, anchor cosine, routing score)`` for each active, shape-compatible
    answer branch of ``state`` (the state *before* the route round), in creation order. The
    score is :func:`route`'s for ``label`` (the snapped label; None when the input had no
    label, under ``routing.router: linucb`` or ``mode: single``, where the choice is not that
    score). Context-only input has no candidates (it goes to the nearest anchor).
    """
    if inp.context_only or policy.routing.mode == "single":
        return []
    cands = _answer_branches(state, policy, inp.shape)
    cos = _anchor_cos(cands, inp.embedding)
    if label is None or policy.routing.router == "linucb":
        return [(b.id, float(c), None) for b, c in zip(cands, cos)]
    energies = [energy(b.sketch, inp.embedding) for b in cands] if policy.sketch.enabled else [0.0] * len(cands)
    return [(b.id, float(c), float(s)) for b, c, s in zip(cands, cos, _label_scores(policy, cands, cos, energies, label))]


def _novel(branch: Branch, e: float, policy: Policy) -> bool:
    """The input lies outside an established branch's subspace: energy < ``spawn_max_energy``
    once the branch's sketch has folded ``rank`` inputs."""
    sk = policy.sketch
    if not sk.enabled or sk.spawn_max_energy <= 0 or branch.sketch is None:
        return False
    return branch.sketch.count >= sk.rank and e < sk.spawn_max_energy


def _mean_recent(b: Branch) -> float:
    rr = b.stats.recent_rewards
    return float(sum(rr) / len(rr)) if len(rr) else 0.0


def _bandit_route(state: AdaptiveState, policy: Policy, inp: StepInput, label: Label | None, cands: list[Branch],
                  cos: np.ndarray, energies: list[float], snapped_ev: LabelSnapped | None) -> RouteDecision:
    """LinUCB over the compatible branches and spawn (:mod:`rizz.core.bandit`). Spawn is an arm
    only when a label is known and capacity remains (without a label the fixed router also
    takes the nearest anchor)."""
    r = policy.routing
    arms = []
    for b, c, e in zip(cands, cos, energies):
        ls = r.w_function * (b.label.function == label.function) + r.w_application * (b.label.application == label.application) if label else 0.0
        arms.append([1.0, float(ls), float(e), float(c), float(b.shape is not None and b.shape == inp.shape), _mean_recent(b), 0.0])
    spawnable = label is not None and _can_spawn(state, policy)
    if spawnable:
        arms.append([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # disjoint spawn arm (rizz.core.bandit)
    i, score = choose(state.router, policy, np.asarray(arms, dtype=np.float64))
    feats = tuple(arms[i])
    if i == len(cands):
        d = _spawn(state, inp, label, inp.shape)  # type: ignore[arg-type]
        return RouteDecision(d.branch_id, label, score, spawn=d.spawn, snapped=snapped_ev, features=feats)  # type: ignore[arg-type]
    return RouteDecision(cands[i].id, cands[i].label, score, snapped=snapped_ev, features=feats)
