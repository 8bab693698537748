"""Branch lifecycle (spec §3.7): merge redundant branches, deactivate or prune stale ones, caps.

Runs after the step's writes. Merges and staleness checks run every ``merge_every`` steps;
the caps on active and total branches are enforced at every step.
"""

from __future__ import annotations

import numpy as np

from rizz.core import events as ev
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, Branch
from rizz.core.routing import jaccard
from rizz.core.sketch import overlap
from rizz.core.vec import as_vector

__all__ = ["decide_lifecycle", "redundant"]


def redundant(a: Branch, b: Branch, policy: Policy) -> bool:
    """Two branches are redundant when they share function and shape, their applications are
    equal or overlap by Jaccard ≥ ``merge_label_jaccard``, and their anchors have cosine ≥
    ``merge_anchor_similarity``; or (``sketch.merge_overlap`` < 1) when they share function and
    shape and their subspace sketches overlap by at least ``sketch.merge_overlap``."""
    lc = policy.lifecycle
    if a.label.function != b.label.function or a.shape != b.shape:
        return False
    sk = policy.sketch
    if sk.enabled and sk.merge_overlap < 1.0 and overlap(a.sketch, b.sketch) >= sk.merge_overlap:
        return True
    if a.label.application != b.label.application and jaccard(a.label.application, b.label.application) < lc.merge_label_jaccard:
        return False
    return float(np.dot(as_vector(a.anchor), as_vector(b.anchor))) >= lc.merge_anchor_similarity


def decide_lifecycle(state: AdaptiveState, policy: Policy, step: int, current: str) -> list[object]:
    """Merge / deactivate / prune events at ``step``; ``current`` (this step's branch) is kept active."""
    lc = policy.lifecycle
    out: list[object] = []
    if policy.routing.mode == "single":
        return out
    periodic = (step + 1) % lc.merge_every == 0
    if not periodic and len(state.branches) <= min(lc.max_active, lc.max_branches):
        return out  # no pass due and neither cap can be exceeded (most steps: skips ordering the branches)
    gone: set[str] = set()
    actives = state.active_branches()
    if periodic and lc.merge_enabled:
        for i, a in enumerate(actives):
            if a.id in gone:
                continue
            for b in actives[i + 1 :]:
                if b.id not in gone and redundant(a, b, policy):
                    out.append(ev.BranchesMerged(a.id, b.id))
                    gone.add(b.id)
    if periodic:
        for b in actives:
            if b.id in gone or b.id == current or step - b.stats.last_used < lc.stale_after:
                continue
            if b.stats.answered and b.stats.mean_reward < lc.prune_min_reward:
                out.append(ev.BranchPruned(b.id, f"stale for {step - b.stats.last_used} steps, mean reward {b.stats.mean_reward:.3f}"))
            else:
                out.append(ev.BranchDeactivated(b.id, f"stale for {step - b.stats.last_used} steps"))
            gone.add(b.id)
    still = [b for b in actives if b.id not in gone]
    if len(still) > lc.max_active:
        lru = sorted((b for b in still if b.id != current), key=lambda b: (b.stats.last_used, int(b.id[1:])))
        for b in lru[: len(still) - lc.max_active]:
            out.append(ev.BranchDeactivated(b.id, f"over the cap of {lc.max_active} active branches"))
            gone.add(b.id)
    pruned = {e.branch_id for e in out if isinstance(e, ev.BranchPruned)} | {e.absorbed for e in out if isinstance(e, ev.BranchesMerged)}
    total = len(state.branches) - len(pruned)
    if total > lc.max_branches:
        inactive = [b for b in state.branches.values() if b.id not in pruned and b.id != current and (not b.active or b.id in gone)]
        inactive.sort(key=lambda b: (b.stats.last_used, int(b.id[1:])))
        for b in inactive[: total - lc.max_branches]:
            out.append(ev.BranchPruned(b.id, f"over the cap of {lc.max_branches} branches"))
    return out
