"""Issue #12 §5 through the Session: the newest verified answer wins (fake model, bag-of-words embedder).

"What does the Pro plan cost per month, in dollars?" (shape ``number``) is asked seven
times: three verified against ``10``, then, after a price change, four against ``12``.
"""

from __future__ import annotations

import attrs

from rizz.core import events as ev
from rizz.shell.policy_file import load_policy
from rizz.shell.session import Session
from rizz.shell.streams import StreamElement
from tests.shell.test_walls import BowEmbedder

Q = "What does the Pro plan cost per month, in dollars?"


def _run(supersede: bool, fake_model, answers, refs):
    base = load_policy("default")
    policy = attrs.evolve(base, write=attrs.evolve(base.write, supersede=supersede))
    said = iter(answers)

    def reply(messages) -> str:
        text = messages[-1].content
        if text.endswith("Reply with the final number only."):
            return next(said)
        if '"function"' in text:
            return '{"function": "answer-question", "application": "plan-prices"}'
        return "no rules"  # a distillation request

    s = Session(policy, fake_model(reply), BowEmbedder())
    prompts, events = [], []
    for i, ref in enumerate(refs):
        p = s.answer(StreamElement(f"q{i}", Q, metadata={"shape": "number"}, reference=ref, verifier="exact_match"))
        prompts.append(p.prompt.text)
        _, evs, _ = s.fold(p, s.verify(p))
        events.append(evs)
    return prompts, events, s


REFS = ["10"] * 3 + ["12"] * 4
SAID = ["10", "10", "10", "10", "12", "12", "12"]


def test_without_supersede_the_contradiction_of_the_issue_is_reproduced(fake_model) -> None:
    prompts, _, _ = _run(False, fake_model, SAID, REFS)
    last = prompts[-1]
    assert "Answer: 10" in last and "Answer: 12" in last and "Wrong answer: 10" in last


def test_the_newest_verified_answer_wins(fake_model) -> None:
    prompts, events, s = _run(True, fake_model, SAID, REFS)
    # steps 1-3 see the verified 10; the failure of 10 at step 3 retires it
    assert "Answer: 10" in prompts[3]
    assert "Answer: 10" not in prompts[4] and "Wrong answer: 10" in prompts[4]
    retired = [e for e in events[3] if isinstance(e, ev.MemoryRetired)]
    assert [(e.store, e.reason) for e in retired] == [("episodes", "superseded: answer '10' failed verification at step 3")]
    # once 12 is verified the prompt shows it, and 10 only as a mistake
    for text in prompts[5:]:
        assert "Answer: 12" in text and "Wrong answer: 10" in text and "Answer: 10" not in text
    (b,) = s.state.branches.values()
    assert [e.answer for e in b.episodes.records] == ["12"]
    assert [a.answer for a in b.failures.records] == ["10"]
    assert [(q.answer, q.reason) for q in b.quarantine] == [("10", "superseded: answer '10' failed verification at step 3")]


def test_a_price_back_to_its_old_value_retires_the_newer_episode_and_the_mistake(fake_model) -> None:
    refs = REFS + ["10", "10"]
    said = SAID + ["10", "10"]
    prompts, events, s = _run(True, fake_model, said, refs)
    retired = sorted((e.store, e.reason) for e in events[7] if isinstance(e, ev.MemoryRetired))
    assert retired == [("episodes", "superseded: answer '10' verified at step 7"), ("failures", "superseded: answer '10' verified at step 7")]
    assert "Answer: 10" in prompts[8] and "Answer: 12" not in prompts[8] and "Wrong answer: 10" not in prompts[8]
