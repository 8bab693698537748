"""Issue #24: verdicts that carry a correction, through the Session and its log (fake model,
bag-of-words embedder): under ``corrections`` a wrong answer teaches the reference; replay
refolds the log to the same digest; ``default`` ignores the same log's corrections."""

from __future__ import annotations

import json

from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import StreamElement
from tests.shell.test_walls import BowEmbedder

Q = "Which is a mammal? A. trout B. whale C. shark. Answer with the letter."


def _ask(policy_name, fake_model, tmp_path=None):
    def reply(messages) -> str:
        text = messages[-1].content
        if '"function"' in text:
            return '{"function": "classify", "application": "animals"}'
        return "A"  # always the wrong letter

    s = Session(load_policy(policy_name), fake_model(reply), BowEmbedder())
    prompts = []
    for i in range(3):
        p = s.answer(StreamElement(f"q{i}", Q + " " * i, metadata={"shape": "letter"}, reference="B\nWhales are mammals.",
                                   verifier="exact_match"))
        prompts.append(p.prompt.text)
        v = s.verify(p)
        s.fold(p, v)
    return s, prompts, v


def test_corrections_write_the_reference_and_show_it_as_a_solved_example(fake_model):
    s, prompts, v = _ask("corrections", fake_model)
    assert v.reward == 0.0 and v.correction == "B"  # the reference in the letter's shape
    assert "Answer: B" in prompts[1] and "Wrong answer" not in prompts[1]
    b = s.state.branches["b0"]
    assert [e.answer for e in b.episodes.records] == ["B", "B", "B"] and len(b.anti_patterns) == 0


def test_without_the_setting_the_verdict_has_no_correction_and_failures_stay_anti_patterns(fake_model):
    s, prompts, v = _ask("default", fake_model)
    assert v.correction is None
    assert "Wrong answer: A" in prompts[1] and "Answer: B" not in prompts[1]


def test_the_log_keeps_the_correction_and_replays_to_the_same_digest(fake_model, tmp_path):
    from rizz.engine.run import replay

    s = Session.open(tmp_path / "r", policy="corrections", model=fake_model(
        lambda m: '{"function": "classify", "application": "animals"}' if '"function"' in m[-1].content else "A"),
        embedder=BowEmbedder())
    for i in range(2):
        s.run_element(StreamElement(f"q{i}", Q + " " * i, metadata={"shape": "letter"}, reference="B", verifier="exact_match"))
    digest = s.digest()
    s.close()
    steps = [json.loads(line) for line in (tmp_path / "r" / "log.jsonl").read_text().splitlines()]
    assert [r["verdict"].get("correction") for r in steps if r.get("kind") == "step"] == ["B", "B"]
    assert replay(tmp_path / "r", write_summary=False)["state_digest"] == digest
