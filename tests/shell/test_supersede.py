"""Issue #12 §5 through the Session: the newest verified answer wins (fake model, bag-of-words embedder).

"What does the Pro plan cost per month, in dollars?" (shape ``number``) is asked seven
times: three verified against ``10``, then, after a price change, four against ``12``.
"""

from __future__ import annotations

import attrs

from rizz.core import events as ev
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import StreamElement
from tests.shell.test_walls import BowEmbedder

Q = "What does the Pro plan cost per month, in dollars?"


def _run(supersede: bool, fake_model, answers, refs):
    base = load_policy("default")
    # the episodes/anti-patterns part alone (the derived part has its own tests below)
    policy = attrs.evolve(base, write=attrs.evolve(base.write, supersede=supersede, supersede_derived=False))
    prompts, events, s = _pro_plan(policy, fake_model, answers, refs, lambda text: "no rules")
    return [p.text for p in prompts], events, s


def _pro_plan(policy, fake_model, answers, refs, distill):
    """Ask the Pro-plan question once per reference through a live Session; the model says
    ``answers`` in order, labels every input alike and answers a distillation request with
    ``distill(request text)``. Returns (compiled prompts, events per fold, the session)."""
    said = iter(answers)

    def reply(messages) -> str:
        text = messages[-1].content
        if text.endswith("Reply with the final number only."):
            return next(said)
        if '"function"' in text:
            return '{"function": "answer-question", "application": "plan-prices"}'
        return distill(text)

    s = Session(policy, fake_model(reply), BowEmbedder())
    prompts, events = [], []
    for i, ref in enumerate(refs):
        p = s.answer(StreamElement(f"q{i}", Q, metadata={"shape": "number"}, reference=ref, verifier="exact_match"))
        prompts.append(p.prompt)
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
    assert [a.answer for a in b.anti_patterns.records] == ["10"]
    assert [(q.answer, q.reason) for q in b.quarantine] == [("10", "superseded: answer '10' failed verification at step 3")]


def test_a_price_back_to_its_old_value_retires_the_newer_episode_and_the_mistake(fake_model) -> None:
    refs = REFS + ["10", "10"]
    said = SAID + ["10", "10"]
    prompts, events, s = _run(True, fake_model, said, refs)
    retired = sorted((e.store, e.reason) for e in events[7] if isinstance(e, ev.MemoryRetired))
    assert retired == [("anti_patterns", "superseded: answer '10' verified at step 7"), ("episodes", "superseded: answer '10' verified at step 7")]
    assert "Answer: 10" in prompts[8] and "Answer: 12" not in prompts[8] and "Wrong answer: 10" not in prompts[8]


# -- write.supersede_derived: the two gaps (working memory, distilled rules) -----------------
def _run_all_blocks(derived: bool, fake_model, answers, refs):
    """The Pro-plan stream with every memory block shown: working memory (4 turns) and rules
    distilled after each verified success, whose text quotes the answers they were shown."""
    import re

    base = load_policy("default")
    policy = attrs.evolve(base, write=attrs.evolve(base.write, supersede=True, supersede_derived=derived),
                          retrieval=attrs.evolve(base.retrieval, working_memory_k=4),
                          rules=attrs.evolve(base.rules, distill_every=1, distill_growth=1.0, distill_after_miss=False))

    def distill(text: str) -> str:  # rules that quote the answers the request showed
        shown = re.findall(r"Correct answer: (\S+)", text)
        return "\n".join(f"IF the question asks the Pro plan price THEN Answer: {a}" for a in shown)

    return _pro_plan(policy, fake_model, answers, refs, distill)


def _blocks(prompt) -> dict[str, str]:
    return {b: prompt.section(b).text() for b in ("examples", "rules", "mistakes", "working_memory") if prompt.section(b)}


def test_without_derived_retirement_rules_and_turns_still_show_the_old_answer(fake_model) -> None:
    prompts, _, _ = _run_all_blocks(False, fake_model, SAID, REFS)
    last = _blocks(prompts[-1])
    assert "Answer: 10" in last["rules"] and "Answer: 10" in last["working_memory"]  # the two gaps of #12 §5
    assert "Answer: 10" not in last["examples"]  # episodes were already retired


def test_after_a_verified_12_no_block_shows_answer_10(fake_model) -> None:
    prompts, events, s = _run_all_blocks(True, fake_model, SAID, REFS)
    # before the price change every block may teach 10
    assert "Answer: 10" in _blocks(prompts[1])["rules"] and "Answer: 10" in _blocks(prompts[1])["working_memory"]
    # the failure of 10 at step 3 retires the episode, the rule distilled from it and the turns
    retired = sorted((e.store, e.key, e.reason) for e in events[3] if isinstance(e, ev.MemoryRetired))
    why = "superseded: answer '10' failed verification at step 3"
    assert retired == sorted([("episodes", retired[0][1], why), ("rules", "r0-0", why + ": distilled from the retired answer '10'"),
                              ("working_memory", "turn-0", why), ("working_memory", "turn-1", why), ("working_memory", "turn-2", why)])
    for p in prompts[4:]:
        assert "Answer: 10" not in p.text, p.text  # solved examples, rules, working memory: none
        assert "Wrong answer: 10" in _blocks(p)["mistakes"]
    for p in prompts[5:]:  # once 12 is verified, every block that teaches an answer teaches 12
        b = _blocks(p)
        assert "Answer: 12" in b["examples"] and "THEN Answer: 12" in b["rules"] and "Answer: 12" in b["working_memory"]
    (b,) = s.state.branches.values()
    assert [r.strategy for r in b.rules] == ["Answer: 12"] and b.rules[0].sources == (b.episodes.records[0].key,)
    assert s.state.rule_ledger["r0-0"].status == "retired"
    assert {t.answer for t in s.state.working_memory} == {"12"}  # the failing turn of 10 was never remembered
    reasons = [(q.key, q.reason) for q in b.quarantine]
    assert ("r0-0", why + ": distilled from the retired answer '10'") in reasons and ("turn-0", why) in reasons


def test_a_price_back_to_10_retires_the_rule_and_turns_of_12(fake_model) -> None:
    refs, said = REFS + ["10", "10"], SAID + ["10", "10"]
    prompts, events, s = _run_all_blocks(True, fake_model, said, refs)
    stores = sorted(e.store for e in events[7] if isinstance(e, ev.MemoryRetired))
    assert stores == ["anti_patterns", "episodes", "rules", "working_memory", "working_memory", "working_memory"]
    b = _blocks(prompts[8])
    assert "Answer: 12" not in prompts[8].text and "THEN Answer: 10" in b["rules"] and "Answer: 10" in b["working_memory"]


def test_the_retirement_and_its_reason_are_in_the_run_and_rizz_diff_shows_them(fake_model, tmp_path) -> None:
    """§5's "with a logged reason": a durable session's log refolds to the retirement, and
    ``rizz diff`` of the step that contradicted the stored answer prints it with its reason."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    said = iter(SAID)

    def reply(messages) -> str:
        text = messages[-1].content
        if text.endswith("Reply with the final number only."):
            return next(said)
        return '{"function": "answer-question", "application": "plan-prices"}' if '"function"' in text else "no rules"

    base = load_policy("default")
    policy = attrs.evolve(base, write=attrs.evolve(base.write, supersede=True, supersede_derived=False))
    s = Session.open(tmp_path / "run", policy, fake_model(reply), embedder=BowEmbedder(), durability="os")
    for i, ref in enumerate(REFS):
        p = s.answer(StreamElement(f"q{i}", Q, metadata={"shape": "number"}, reference=ref, verifier="exact_match"))
        s.fold(p, s.verify(p))
    s.close()
    res = CliRunner().invoke(app, ["diff", str(tmp_path / "run"), "--at", "3"])
    assert res.exit_code == 0, res.output
    assert "episodes" in res.output and "retired (superseded: answer '10' failed verification at step 3)" in res.output
    before = CliRunner().invoke(app, ["diff", str(tmp_path / "run"), "--at", "2"])
    assert before.exit_code == 0 and "retired" not in before.output  # nothing was contradicted before step 3
