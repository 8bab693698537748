"""Session.fold takes each pending answer once, in the step it was answered (fake model and embedder)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from rizz.core import Verdict
from rizz.shell.policy_file import load_policy
from rizz.shell.session import Session
from rizz.shell.streams import StreamElement, read_stream

TRACE_MINI = Path(__file__).resolve().parents[2] / "data" / "trace-mini" / "test.jsonl"


class HashEmbedder:
    """Deterministic stand-in for the embedder: a unit vector seeded by the text's hash."""

    name = "fake:hash"
    dim = 16

    def embed(self, texts):
        rows = []
        for t in texts:
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
            v = rng.standard_normal(self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


def _reply(messages) -> str:
    text = messages[-1].content
    if "function" in text:
        return '{"function": "classify", "application": "stance"}'
    return "A"


@pytest.fixture
def session(fake_model) -> Session:
    return Session(load_policy("default"), fake_model(_reply), HashEmbedder())


@pytest.fixture(scope="module")
def elements() -> tuple[StreamElement, ...]:
    return read_stream(TRACE_MINI).elements[:3]


def _episodes(s: Session) -> int:
    return sum(len(b.episodes) for b in s.state.branches.values())


def test_folding_the_same_pending_twice_is_refused(session, elements) -> None:
    p = session.answer(elements[0])
    session.fold(p, Verdict(1.0, "exact_match"))
    state, logged = session.state, _episodes(session)
    assert (session.step_index, logged) == (1, 1)
    with pytest.raises(ValueError) as err:
        session.fold(p, Verdict(1.0, "exact_match"))
    assert str(err.value) == (
        f"fold: pending {elements[0].id!r} was answered at step 0, but the session is at step 1; each "
        "answer is folded once, in the step it was answered (call answer() again to fold the element now)")
    assert session.state is state and session.step_index == 1 and _episodes(session) == 1


def test_a_pending_from_an_earlier_step_is_refused(session, elements) -> None:
    first = session.answer(elements[0])
    session.fold(first, Verdict(1.0, "exact_match"))
    second = session.answer(elements[1])
    with pytest.raises(ValueError, match=r"^fold: pending '[^']+' was answered at step 0, but the session is at step 1; "):
        session.fold(first, Verdict(1.0, "exact_match"))
    # two answers in one step: the first folded makes the other stale
    other = session.answer(elements[2])
    session.fold(second, Verdict(1.0, "exact_match"))
    with pytest.raises(ValueError, match=rf"^fold: pending {elements[2].id!r} was answered at step 1, but the session is at step 2; "):
        session.fold(other, None)
    assert session.step_index == 2 and _episodes(session) == 2


def test_a_pending_of_another_session_is_refused(session, elements, fake_model) -> None:
    stranger = Session(load_policy("default"), fake_model(_reply), HashEmbedder()).answer(elements[0])
    assert stranger.step_input.step == session.step_index == 0
    with pytest.raises(ValueError) as err:
        session.fold(stranger, Verdict(1.0, "exact_match"))
    assert str(err.value) == (f"fold: pending {elements[0].id!r} was not answered by this session at step 0 "
                              "(fold what this session's answer() returned)")
    assert session.step_index == 0 and _episodes(session) == 0
