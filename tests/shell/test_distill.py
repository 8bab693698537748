"""Rule distillation: robust IF-THEN parsing, garbage -> (), the prompt sent."""

from __future__ import annotations

import pytest

from rizz.engine.distill import CandidateRule, DistillResult, distill_rules, parse_rules

EXAMPLES = [
    ("The Committee raised rates by 25bp. A: hawkish B: dovish C: neutral", "A"),
    ("Inflation eased; the Committee cut rates. A: hawkish B: dovish C: neutral", "B"),
]


def test_well_formed_rules(fake_model):
    model = fake_model([
        "IF the sentence says rates were raised THEN answer A\n"
        "IF the sentence says rates were cut THEN answer B\n"
    ])
    result = distill_rules(model, EXAMPLES, function="classify",
                           application="monetary-policy-stance")
    assert result.rules == (
        CandidateRule("the sentence says rates were raised", "answer A"),
        CandidateRule("the sentence says rates were cut", "answer B"),
    )
    assert result.generation is not None and result.generation.model == "fake:scripted"
    call = model.calls[0]
    assert call["max_tokens"] == 180
    prompt = call["messages"][-1].content
    assert "classify / monetary-policy-stance" in prompt
    assert "Correct answer: A" in prompt and "Correct answer: B" in prompt
    assert "at most 3 rules" in call["messages"][0].content


def test_messy_rules_are_parsed():
    raw = (
        "Here are some rules:\n"
        "1. **IF** the text mentions raising rates, **THEN** answer A (hawkish).\n"
        "- Rule 2: If inflation is falling\n"
        "  then: answer B.\n"
        "* \"IF the statement is balanced THEN pick C\"\n"
        "(d) if the input is empty; then say unknown\n"
        "IF x THEN y\n"                                    # too short: dropped
        "IF the text mentions raising rates THEN answer A (hawkish)\n"  # duplicate
        "THEN orphan strategy\n"
        "Some closing remark.\n"
    )
    assert parse_rules(raw) == (
        CandidateRule("the text mentions raising rates", "answer A (hawkish)"),
        CandidateRule("inflation is falling", "answer B"),
        CandidateRule("the statement is balanced", "pick C"),
        CandidateRule("the input is empty", "say unknown"),
    )
    assert len(parse_rules(raw, max_rules=2)) == 2


@pytest.mark.parametrize(
    "raw", ["", "I cannot help with that.", "IF THEN", "{}\n\n\n", "if if if then", "x" * 5000,
            "IF " + "a" * 400 + " THEN do it"],
)
def test_garbage_gives_no_rules(fake_model, raw):
    result = distill_rules(fake_model([raw]), EXAMPLES, function="f", application="a")
    assert result == DistillResult((), result.generation)
    assert result.generation.text == raw


def test_max_rules_caps_output_and_budget(fake_model):
    raw = "\n".join(f"IF case number {i} holds THEN do step {i}" for i in range(6))
    model = fake_model([raw])
    result = distill_rules(model, EXAMPLES, function="f", application="a", max_rules=2)
    assert [r.antecedent for r in result.rules] == ["case number 0 holds", "case number 1 holds"]
    assert model.calls[0]["max_tokens"] == 120


def test_no_examples_makes_no_call(fake_model):
    model = fake_model(["IF a b c THEN d e f"])
    assert distill_rules(model, [], function="f", application="a") == DistillResult((), None)
    assert model.calls == []
    with pytest.raises(ValueError):
        distill_rules(model, EXAMPLES, function="f", application="a", max_rules=0)


def test_long_examples_are_clipped(fake_model):
    model = fake_model(["nothing"])
    many = [("q" * 5000, "a" * 5000)] * 20
    distill_rules(model, many, function="f", application="a")
    prompt = model.calls[0]["messages"][-1].content
    assert prompt.count("Example ") == 8
    assert len(prompt) < 8 * 2 * 620 + 500


def test_candidate_rule_rejects_empty_parts():
    with pytest.raises(ValueError):
        CandidateRule("  ", "x")


@pytest.mark.model
def test_real_embedded_model_never_raises(embedded_model):
    result = distill_rules(embedded_model, EXAMPLES, function="classify",
                           application="monetary-policy-stance", max_rules=2)
    assert len(result.rules) <= 2
    assert all(r.antecedent.strip() and r.strategy.strip() for r in result.rules)
    assert result.generation is not None and result.generation.completion_tokens <= 120
