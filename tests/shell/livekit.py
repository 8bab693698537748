"""Stand-ins for live-session tests (tests only): a hash embedder, a scripted model, elements.

Importable by the tests and by the kill -9 child process (``python tests/shell/livekit.py``),
with ``tests/shell`` on ``sys.path`` (the model's boilerplate is ``stubs.StubBackend``).
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import numpy as np
from stubs import StubBackend  # tests/shell is on sys.path (pytest, the child below, the benches)

from tests.core.helpers import unit


class HashEmbedder:
    """Deterministic stand-in for the embedder: a unit vector from the text's hash, nudged by
    its family word so elements of one family are near each other."""

    name = "fake:hash"
    dim = 16

    def embed(self, texts):
        rows = []
        for t in texts:
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
            v = rng.standard_normal(self.dim).astype(np.float32) * 0.3
            v[0 if "sum" in t else 1 if "stance" in t else 2] += 3.0
            rows.append(unit(v))
        return np.stack(rows)


class StubModel(StubBackend):
    """Scripted backend: judge labels by family word, answers from the input, rules for distillation."""

    name = "fake:live"

    def reply(self, messages) -> str:
        text = messages[-1].content
        if any('"function"' in m.content for m in messages):
            return '{"function": "solve-math", "application": "sum"}' if "sum" in text else '{"function": "classify", "application": "stance"}'
        if any("IF-THEN" in m.content for m in messages):
            return "IF the question asks for a sum THEN add the numbers\nIF a stance is asked THEN answer with one letter"
        h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
        return str(h % 7) if "sum" in text[-200:] else "ABC"[h % 3]


def element(i: int) -> dict[str, Any]:
    """Element ``i``: even ids are sums (shape number), odd ones stances (shape letter)."""
    if i % 2 == 0:
        return {"id": f"q{i}", "input": f"What is the sum of {i} and {i % 5}?", "metadata": {"shape": "number", "task": "sum"}}
    return {"id": f"q{i}", "input": f"What is the stance of text {i}? A, B or C.", "metadata": {"shape": "letter", "task": "stance"}}


def late_verdict_session(app_dir: Any) -> str:
    """A live session in ``app_dir``: two answers, then both verdicts, so step 0's verdict is
    logged after step 1's answer; returns the final digest."""
    from rizz.engine.session import Session

    with Session.open(app_dir, policy="default", model=StubModel(), embedder=HashEmbedder()) as s:
        p0 = s.answer({"id": "q0", "input": "What is the sum of 2 and 2?", "metadata": {"shape": "number"}})
        p1 = s.answer({"id": "q1", "input": "What is the sum of 3 and 4?", "metadata": {"shape": "number"}})
        s.fold(p0, 1.0)  # step 0's verdict arrives after step 1's answer
        s.fold(p1, 1.0)
        return s.digest()


def _child(path: str, n: int, durability: str = "disk") -> None:
    """Answer n elements and fold every other one, a verdict two answers late; print each return."""
    from rizz import Session, Verdict

    s = Session.open(path, policy="default", model=StubModel(), embedder=HashEmbedder(), snapshot_every=3, durability=durability)
    start = s.step_index
    for i in range(start, n):
        el = element(i)
        if el["id"] not in s.pending_ids():
            s.answer(el)
            print("answered", el["id"], flush=True)
        j = i - 2
        if j >= 0 and j % 2 == 0 and f"q{j}" in s.pending_ids():
            s.fold(f"q{j}", Verdict(1.0 if j % 4 == 0 else 0.0, "exact_match"))
            print("folded", f"q{j}", flush=True)
    s.close()


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4])
