"""Where a τ-bench run's episodes route, with the whole agent policy in front of the embedded text
and with its task line only (no model: routing alone).

    python benchmarks/tau_routes.py runs/tau10c/default

Reads the RUN_DIR's ``log.jsonl`` (each episode's logged customer opening, ``input.text``, and
its verdict) and the shipped ``data/tau-bench-mini/test.jsonl`` (each element's instruction),
and folds the episodes through the policy's core (default: ``default``) twice: once embedding
``f"{instruction}\\n\\n{opening}"`` (the text before commit 89701e5), once
:func:`rizz.engine.answering.embedding_text` (its task line and the opening). A route in doubt
is labelled by the engine's :func:`~rizz.engine.answering.step_label` as under ``routing.judge:
local`` (the judge's deterministic fallback, no model).
Prints, per text, each episode's branch and the label it was given when the router asked for
one. The episodes' own answers are not recomputed: routing does not depend on them, only the
verdicts are folded. Used in results/2026-12-05-tau-embedding-text.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import attrs
import numpy as np

from rizz import load_policy
from rizz.adapters.embedder import Embedder
from rizz.core import StepInput, Verdict, needs_label, rizz
from rizz.core.routing import route
from rizz.engine.answering import embedding_text, label_text, step_label
from rizz.formats.streams import read_stream

STREAM = Path(__file__).resolve().parents[1] / "data" / "tau-bench-mini" / "test.jsonl"


def routes(run_dir: Path, policy_name: str, text_of) -> list[tuple[str, str, str]]:
    """``(element id, branch id, label asked for or "")`` per episode of ``run_dir``'s log."""
    elements = {e.id: e for e in read_stream(STREAM).elements}
    records = [json.loads(line) for line in (run_dir / "log.jsonl").open(encoding="utf-8")]
    policy, embedder = load_policy(policy_name), Embedder()
    core = rizz(policy)
    state = core.init()

    def vec(text: str) -> bytes:
        return np.asarray(embedder.embed([text])[0], dtype=np.float32).tobytes()

    out = []
    for rec in (r for r in records if r.get("kind", "step") == "step" and r.get("episode")):
        el, seen = elements[rec["id"]], rec["input"]["text"]
        x = StepInput(step=rec["step"], item_id=el.id, text=seen, embedding=vec(text_of(el.instruction, seen)),
                      instruction=el.instruction, shape=el.shape)
        asked = ""
        if needs_label(state, policy, x.embedding, el.shape):
            label, _ = step_label(el, seen, policy, None)  # the judge's fallback, as routing.judge: local
            x = attrs.evolve(x, label=label, label_embedding=vec(label_text(label)))
            asked = f"{label.function}/{label.application}"
        out.append((el.id, route(state, policy, x).branch_id, asked))
        state = core.step(state, x, Verdict(float(rec["verdict"]["reward"]), "tau_db"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a τ-bench RUN_DIR (one policy's folder of a bench)")
    ap.add_argument("--policy", default="default", help="the policy whose core routes (default: default)")
    a = ap.parse_args()
    texts = {"whole instruction": lambda ins, seen: f"{ins}\n\n{seen}" if ins else seen, "task line": embedding_text}
    for name, fn in texts.items():
        rows = routes(a.run_dir, a.policy, fn)
        print(f"{name}: " + ", ".join(f"{i} {b}" + (f" ({lab})" if lab else "") for i, b, lab in rows))


if __name__ == "__main__":
    main()
