"""Judge labelling: well-formed, repairable and garbage answers; the real embedded model."""

from __future__ import annotations

import re

import pytest

from rizz.engine.judge import (
    FUNCTIONS,
    JudgeLabel,
    fallback_label,
    hyphenate,
    judge_messages,
    label_input,
    parse_label,
)

LABEL = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
FOMC = ("The Committee decided to raise the target range for the federal funds rate to "
        "5-1/4 to 5-1/2 percent. A: hawkish B: dovish C: neutral")


def test_well_formed_json_is_taken_as_is(fake_model):
    model = fake_model(['{"function": "classify", "application": "monetary-policy-stance"}'])
    label = label_input(model, FOMC, instruction="Classify the stance.", shape="letter")
    assert (label.function, label.application) == ("classify", "monetary-policy-stance")
    assert (label.repaired, label.fallback) == (False, False)
    assert label.raw.startswith('{"function"')
    assert label.generation is not None and label.generation.model == "fake:scripted"
    call = model.calls[0]
    assert call["rendering"] == "chat" and call["max_tokens"] == 40
    assert call["messages"][0].role == "system"
    assert "Input: The Committee decided" in call["messages"][-1].content
    # the shape is not shown to the judge (Qwen 1.5B labelled every letter task "…/letter")
    assert "letter" not in call["messages"][-1].content and "Expected output" not in call["messages"][1].content


@pytest.mark.parametrize(
    "raw, expected",
    [
        # single quotes, capitals, spaces, missing brace
        ("{'function': 'Classification', 'application': 'Monetary Policy Stance'",
         ("classify", "monetary-policy-stance")),
        # prose around JSON
        ('Sure! Here is the label:\n{"function": "summarise", "application": "news_articles"}'
         " Hope it helps.", ("summarize", "news-articles")),
        # key: value lines
        ("Function: question answering\nApplication: Medical Exam (USMLE)",
         ("answer-question", "medical-exam-usmle")),
        # JSON with junk values around a valid function, application too long -> 5 tokens
        ('{"function": "  Write-Code!! ", "application": "python string utility helpers for '
         'beginners"}', ("write-code", "python-string-utility-helpers-for")),
        # unknown but sane function is kept (hyphenated, <= 3 tokens)
        ('{"function": "Rank Documents By Relevance", "application": "web-search"}',
         ("rank-documents-by", "web-search")),
    ],
)
def test_malformed_but_repairable(fake_model, raw, expected):
    label = label_input(fake_model([raw]), "some input text", instruction=None, shape=None)
    assert (label.function, label.application) == expected
    assert label.repaired is True and label.fallback is False
    assert label.raw == raw


@pytest.mark.parametrize(
    "raw",
    ["", "I am SmolLM, how can I help?", '{"function": "f", "application": "a"}',
     "{{{{", '{"function": null}', "\u4f60\u597d"],
)
def test_garbage_falls_back_to_a_deterministic_label(fake_model, raw):
    label = label_input(fake_model([raw]), FOMC, instruction="Classify the stance.",
                        shape="letter")
    assert (label.function, label.application) == fallback_label(
        FOMC, instruction="Classify the stance.", shape="letter")
    assert label.function == "classify"
    assert LABEL.match(label.application)
    assert label.fallback is True and label.repaired is True


def test_partial_answer_keeps_the_good_part(fake_model):
    label = label_input(fake_model(["function: summarize"]), "The city council voted ...",
                        instruction=None, shape="text")
    assert label.function == "summarize"
    assert label.application == fallback_label(
        "The city council voted ...", instruction=None, shape="text")[1]
    assert label.fallback is True


@pytest.mark.parametrize(
    "text, instruction, shape, expected",
    [
        (FOMC, "Classify the monetary policy stance.", "letter",
         ("classify", "monetary-policy-stance")),
        (FOMC, None, "letter", ("classify", "committee-decided-raise")),
        ("def add(a, b):\n    ", "Complete the function.", "code", ("complete-code", None)),
        ("Return the n-th Fibonacci number.", "Write a Python function.", "code",
         ("write-code", None)),
        ("What is 17 * 23?", None, "number", ("solve-math", None)),
        ("The patient, who was very ill, was admitted.", "Simplify this sentence.", "text",
         ("simplify-text", None)),
        ("Long article text here.", "Summarize the article.", "text", ("summarize", None)),
        ("Who wrote Hamlet?", None, "span", ("answer-question", None)),
        ("Tell me something.", None, None, ("answer-question", None)),
    ],
)
def test_fallback_function_rules(text, instruction, shape, expected):
    function, application = fallback_label(text, instruction=instruction, shape=shape)
    assert function == expected[0]
    if expected[1] is not None:
        assert application == expected[1]
    assert LABEL.match(function) and LABEL.match(application)


def test_fallback_application_words_and_script():
    fn, app = fallback_label("\u6211\u8ba4\u4e3a\u8fd9\u4e2a\u653f\u7b56\u5f88\u597d",
                             instruction="Detect the stance toward the target.", shape="label")
    assert (fn, app) == ("classify", "stance-target-chinese")
    assert fallback_label("?!", instruction=None, shape=None) == ("answer-question", "general")
    # deterministic: same inputs, same label
    assert fallback_label(FOMC, instruction=None, shape="letter") == fallback_label(
        FOMC, instruction=None, shape="letter")


def test_hyphenate_and_parse_label_edges():
    assert hyphenate("  Caf\u00e9  Menu_Items ") == "cafe-menu-items"
    assert hyphenate("a b c d e f", max_tokens=3) == "a-b-c"
    assert parse_label('{"function": "classify", "application": "x y"}') == (
        "classify", "x-y", True)
    assert parse_label("") == ("", "", True)


def test_long_inputs_are_clipped_in_the_prompt():
    msgs = judge_messages("word " * 5000, instruction="i " * 2000)
    assert len(msgs[-1].content) < 2200
    assert all(f in msgs[0].content for f in FUNCTIONS)


@pytest.mark.model
def test_real_embedded_model_gives_a_well_formed_label(embedded_model):
    label = label_input(embedded_model, FOMC, instruction="Classify the monetary policy stance.",
                        shape="letter")
    assert isinstance(label, JudgeLabel)
    assert LABEL.match(label.function) and LABEL.match(label.application)
    assert label.generation is not None and label.generation.completion_tokens <= 40
    assert label.generation.model == "embedded:SmolLM2-135M-Instruct.Q4_1"
    # the same element is labelled the same way again (greedy, reset model)
    again = label_input(embedded_model, FOMC, instruction="Classify the monetary policy stance.",
                        shape="letter")
    assert (again.function, again.application, again.raw) == (
        label.function, label.application, label.raw)
