"""Issue #11 §6: Python names follow specs/glossary.md; the serialized names stay as recorded,
so states, snapshots and digests written before a rename read and hash the same."""

from __future__ import annotations

import json

from rizz.core import Policy, Verdict, digest, from_data, rizz, to_data
from rizz.core.records import AdaptiveState, History
from tests.core.helpers import make_input


def _state() -> AdaptiveState:
    r = rizz(Policy())
    s = r.init()
    for t in range(12):
        s = r.step(s, make_input(t, t % 4, seed=t, answer=str(t % 3)), Verdict(float(t % 3 == 0), "exact_match"))
    return s


def test_history_is_serialised_under_its_wire_names() -> None:
    s = _state()
    assert isinstance(s.history, History) and len(s.history.records) == 12
    data = to_data(s)
    assert data["diagnostics"]["_t"] == "Diagnostics" and "history" not in data
    assert from_data(json.loads(json.dumps(data))) == s
    # a tree written before the rename (the same keys by construction) reads back to the state
    assert digest(from_data(data)) == digest(s)


def test_anti_patterns_keep_the_wire_key_failures() -> None:
    s = _state()
    b = next(b for b in s.branches.values() if len(b.anti_patterns))
    data = to_data(b)
    assert data["failures"]["_t"] == "MemoryStore" and "anti_patterns" not in data
    assert from_data(data) == b
    r = rizz(Policy())
    plan = r.plan(s, make_input(12, 0, seed=0))
    assert len(plan.retrieved.episodes) > 0
