"""How often is an anchor route in doubt, and what would a looser doubt test cost? (issue #27 §3)

Usage::

    python benchmarks/judge_doubt.py [STREAM ...] [--limit N] [--centroid-grid]

    python benchmarks/judge_doubt.py data/trace-mini/test.jsonl data/interference-mini/test.jsonl

``routing.judge: when_uncertain`` asks the LLM judge for a label whenever the nearest branch
anchor has cosine below ``routing.confident_similarity`` or leads the nearest anchor of another
function by less than ``routing.confident_margin`` (:func:`rizz.core.routing.needs_label`). The
judge is what keeps `default` above 1.10 calls per answered step on every shipped stream. This
benchmark asks, without any model, whether the embeddings alone could decide more of those
routes: it replays a stream's inputs (the shipped MiniLM embedder) through an abstract router
with one branch per task and an **oracle judge** (asked, it names the element's own task;
``metadata.task``), and counts, per doubt test,

- ``judge``: the inputs the test sends to the judge (each a model call in a real run), and
- ``misrouted``: the inputs it calls confident that land in another task's branch.

Doubt tests: ``anchor`` is :func:`~rizz.core.routing.needs_label` (one anchor per branch, the
first input routed there) with the default policy's thresholds and looser ones (``floor`` /
``lead``: confident also when the top cosine is at least ``floor`` and leads every rival of
another task by ``lead``); ``members`` compares with every input already routed to a branch
(the nearest of its newest 16), a k-NN router; ``centroid`` with the normalised mean of
every input routed to a branch (its centroid, as the quarantine's centroid test keeps it); ``trusted
after N`` is ``anchor`` except that a branch the judge has named as the nearest branch's task N
times in a row is routed to without asking (a judge answer naming another task resets it). A real run spawns more branches than tasks
(fragmentation), so its judge counts are lower than ``anchor``'s here; the comparison between
tests is what this measures. Prints one table per stream.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rizz.adapters.embedder import Embedder  # noqa: E402
from rizz.formats.policy_file import load_policy  # noqa: E402
from rizz.formats.streams import read_stream  # noqa: E402

#: Newest inputs per branch the ``members`` test compares with (rizz's choice for this probe).
MEMBERS_KEPT = 16


def _centroid(rows: list[np.ndarray]) -> np.ndarray:
    m = np.mean(np.stack(rows), axis=0)
    out: np.ndarray = m / max(float(np.linalg.norm(m)), 1e-12)
    return out[None, :]


def _rows(members: list[np.ndarray], *, knn: bool, centroid: bool) -> np.ndarray:
    """What an input is compared with for one branch: its newest members (k-NN), its centroid,
    or its anchor (the first member)."""
    if knn:
        return np.stack(members[-MEMBERS_KEPT:])
    return _centroid(members) if centroid else members[0][None, :]


def route_all(tasks: list[str], vecs: np.ndarray, confident: float, margin: float, *, floor: float | None = None,
              lead: float = 0.0, members: bool = False, centroid: bool = False, trust: int | None = None,
              trust_floor: float = -1.0) -> tuple[int, int]:
    """(judge calls, misrouted) of one doubt test over the stream (see the module docstring)."""
    branches: dict[str, list[np.ndarray]] = {}
    confirmed: dict[str, int] = {}  # judge answers that named the nearest branch, in a row
    judge = wrong = 0
    for task, x in zip(tasks, vecs):
        sure, top = False, ""
        if branches:
            names = list(branches)
            rows = [_rows(branches[n], knn=members, centroid=centroid) for n in names]
            cos = np.array([float((r @ x).max()) for r in rows])
            i = int(np.argmax(cos))
            top = names[i]
            rival = max((c for n, c in zip(names, cos) if n != top), default=-1.0)
            sure = cos[i] >= confident and cos[i] - rival >= margin
            if not sure and floor is not None:
                sure = cos[i] >= floor and cos[i] - rival >= lead
            if not sure and trust is not None:
                sure = confirmed.get(top, 0) >= trust and cos[i] >= trust_floor
        if sure:
            wrong += top != task
            branches[top].append(x)
        else:
            judge += 1
            if top:
                confirmed[top] = confirmed.get(top, 0) + 1 if task == top else 0
            branches.setdefault(task, []).append(x)
    return judge, wrong


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("streams", nargs="*", default=["data/trace-mini/test.jsonl", "data/interference-mini/test.jsonl",
                                                   "data/streambench-mini/test.jsonl"])
    ap.add_argument("--limit", type=int, default=None, help="first N elements of each stream")
    ap.add_argument("--centroid-grid", action="store_true",
                    help="print the centroid test over confident cos 0.30-0.50 x lead 0.05/0.10 (how its threshold was chosen on train streams)")
    args = ap.parse_args(argv)
    r = load_policy("default").routing
    c, m = r.confident_similarity, r.confident_margin
    tests = [(f"anchor (default: cos >= {c:.2f}, lead >= {m:.2f})", {}),
             ("anchor, or cos >= 0.15 and lead >= 0.10", {"floor": 0.15, "lead": 0.10}),
             ("members (k-NN), default thresholds", {"members": True}),
             ("members (k-NN), cos >= 0.40", {"members": True, "confident": 0.40}),
             ("centroid, default thresholds", {"centroid": True}),
             ("centroid, cos >= 0.40", {"centroid": True, "confident": 0.40}),
             ("anchor, trusted after 2 confirmations", {"trust": 2}),
             ("anchor, trusted after 3 confirmations", {"trust": 3}),
             ("anchor, trusted after 3, only cos >= 0.30", {"trust": 3, "trust_floor": 0.30}),
             ("anchor, trusted after 5 confirmations", {"trust": 5})]
    emb = Embedder()
    for path in args.streams:
        els = [e for e in read_stream(path).elements if not e.context_only][: args.limit]
        tasks = [str(e.metadata.get("task")) for e in els]
        vecs = emb.embed([e.input if not e.instruction else f"{e.instruction}\n\n{e.input}" for e in els])
        print(f"\n{path}: {len(els)} answered elements, {len(set(tasks))} tasks")
        print(f"  {'doubt test':<48} {'judge':>6} {'misrouted':>10}")
        grid = [(f"centroid, cos >= {g:.2f}, lead >= {lead:.2f}", {"centroid": True, "confident": g, "margin": lead})
                for g in (0.30, 0.35, 0.40, 0.45, 0.50) for lead in (0.05, 0.10)]
        for name, kw in tests[:1] + grid if args.centroid_grid else tests:
            kw = dict(kw)
            j, w = route_all(tasks, vecs, kw.pop("confident", c), kw.pop("margin", m), **kw)
            print(f"  {name:<48} {j:>6} {w:>10}")


if __name__ == "__main__":
    main()
