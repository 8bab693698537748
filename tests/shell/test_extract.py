"""Answer extraction by output shape: verbose models are scored on their answer."""

from __future__ import annotations

import json

import pytest

from rizz.adapters.verifiers import SHAPES, Extraction, extract_answer


@pytest.mark.parametrize(
    ("raw", "letter"),
    [
        ("B", "B"),
        ("B.", "B"),
        ("(B)", "B"),
        ("B) hawkish", "B"),
        ("Answer: B", "B"),
        ("answer: (C)", "C"),
        ("The stance is B. hawkish", "B"),
        ("I think the answer is **C**.", "C"),
        ("Let me reason. A seems wrong, (C) fits best.", "C"),
        ("B\nBecause a declarative sentence is a statement.", "B"),  # ScienceQA reference layout
        ("Option A is tempting, but the correct option is D.", "D"),
        ("After weighing both sides\nC\n", "C"),
        ("态度：C", "C"),  # C-STANCE full-width colon after the prompt's last word
    ],
)
def test_letter_found(raw: str, letter: str) -> None:
    assert extract_answer(raw, "letter") == Extraction(letter, True)


@pytest.mark.parametrize("raw", ["no idea", "A dovish stance overall", "", "Because the text is calm"])
def test_letter_not_found_is_unparsed(raw: str) -> None:
    got = extract_answer(raw, "letter")
    assert got.parsed is False
    assert got.answer == raw.strip()  # the span fallback keeps the text for scoring


@pytest.mark.parametrize(
    ("raw", "number"),
    [
        ("In 2019 there were 3 cats ... The answer is 42", "42"),  # not the preamble's 2019 or 3
        ("42", "42"),
        ("The answer is: 7 apples, not 8", "7"),
        ("It costs $1,200.50 in total.", "1200.50"),
        ("Temperature fell to -3.5 degrees", "-3.5"),
        ("First 10, then 20, finally 35 kg", "35"),  # no keyword: last number, unit dropped
        ("so x = \\boxed{17}", "17"),
        ("work...\n#### 1,024", "1024"),
        ("about .5 of it", "0.5"),
        ("12%", "12"),
    ],
)
def test_number(raw: str, number: str) -> None:
    assert extract_answer(raw, "number") == Extraction(number, True)


def test_number_absent_falls_back_to_span() -> None:
    # NumGLUE-cm has non-numeric references such as "June": the text is kept, parsed=False.
    assert extract_answer("Answer: June", "number") == Extraction("June", False)


def test_label_and_span() -> None:
    assert extract_answer("  hawkish  \nbecause rates rose", "label") == Extraction("hawkish", True)
    assert extract_answer("Answer: neutral", "label") == Extraction("neutral", True)
    assert extract_answer("Let me think.\nThe city is big.\nAnswer: Paris", "span") == Extraction("Paris", True)
    assert extract_answer("Final answer:\nParis\n", "span") == Extraction("Paris", True)
    assert extract_answer("Paris\nIt is the capital.", "span") == Extraction("Paris", True)
    assert extract_answer("\n\n", "span") == Extraction("", False)


@pytest.mark.parametrize("raw, answer", [
    # the embedded model's own HotpotQA outputs on the StreamBench-style train split
    ("\nThe answer is no.\n\nThe answer is no.", "no."),
    (" The answer is no.\n", "no."),
    ("\nThe answer is:\n\nA short answer.", "A short answer."),
    ("The final answer is: 1922", "1922"),
    ("The answer was Lee Hazlewood.", "Lee Hazlewood."),
    # not an answer prefix: kept whole
    ("The answerer is Bob", "The answerer is Bob"),
    ("The answer isn't known", "The answer isn't known"),
])
def test_span_after_the_answer_is(raw: str, answer: str) -> None:
    assert extract_answer(raw, "span") == Extraction(answer, True)


def test_text_and_none() -> None:
    assert extract_answer("  two\nlines  ", "text") == Extraction("two\nlines", True)
    assert extract_answer("  two\nlines  ", None) == Extraction("two\nlines", True)
    assert extract_answer("   ", "text") == Extraction("", False)


def test_code_prefers_fenced_definition() -> None:
    raw = (
        "Here is my solution:\n```python\ndef add(a, b):\n    return a + b\n```\n"
        "Example:\n```python\nprint(add(1, 2))\n```"
    )
    assert extract_answer(raw, "code") == Extraction("def add(a, b):\n    return a + b", True)
    # usage block first, definition second: the definition wins
    raw2 = "```\nprint(f())\n```\n```py\ndef f():\n    return 1\n```"
    assert extract_answer(raw2, "code").answer == "def f():\n    return 1"
    # an unclosed fence (truncated output) runs to the end; no fence: the whole text
    assert extract_answer("```python\nreturn x + 1\n", "code").answer == "return x + 1"
    assert extract_answer("    return x + 1\n", "code").answer == "    return x + 1"


def test_json_canonical() -> None:
    got = extract_answer('Sure! {"b": 1, "a": [1, 2], "c": "é"} hope it helps {"x": 2}', "json")
    assert got == Extraction('{"a":[1,2],"b":1,"c":"é"}', True)
    assert json.loads(got.answer) == {"a": [1, 2], "b": 1, "c": "é"}
    assert extract_answer('text [1, 2] more', "json") == Extraction("[1,2]", True)
    assert extract_answer('```json\n{"k": null}\n```', "json") == Extraction('{"k":null}', True)
    bad = extract_answer("{not json", "json")
    assert bad.parsed is False


def test_unknown_shape_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="letter, number, label, span, text, code, json"):
        extract_answer("x", "choice")
    assert SHAPES == ("letter", "number", "label", "span", "text", "code", "json")


# Issue #12 §6: a clear leading answer wins over later mentions, in every shape that reads one.
@pytest.mark.parametrize(("raw", "shape", "answer"), [
    ("B. Because option C is wrong, the answer is not C", "letter", "B"),  # the example
    ("B. hawkish; the answer could also be C.", "letter", "B"),
    ("(B) although one might answer: C", "letter", "B"),
    ("**B.** Option D is a distractor", "letter", "B"),
    ("Answer: B. Option C is wrong.", "letter", "B"),
    ("The answer is B.\nStance: C was considered", "letter", "B"),
    ("42\nbecause 6 * 7 = 42 and 3 more steps follow", "number", "42"),
    ("Answer: 12\nIn 2019 the total was 10", "number", "12"),
    ("$12.\nLast year it was $10.", "number", "12"),
    ("12 dollars\nThe old price was 10", "number", "12"),
    ("Answer: Paris\nAnswer: London is a common mistake", "span", "Paris"),
    ('{"a": 1}\n```json\n{"b": 2}\n```', "json", '{"a":1}'),
    ("hawkish\nThe answer might be dovish", "label", "hawkish"),
])
def test_a_clear_leading_answer_wins(raw: str, shape: str, answer: str) -> None:
    assert extract_answer(raw, shape) == Extraction(answer, True)


@pytest.mark.parametrize(("raw", "shape", "answer"), [
    ("Option A is tempting, but the correct option is D.", "letter", "D"),  # not a leading answer
    ("A dovish tone. Answer: C", "letter", "C"),                             # "A" is an article
    ("1. Compute 6 * 7\n2. So the answer is 42", "number", "42"),           # a numbered list
    ("In 2019 there were 3 cats. The answer is 42", "number", "42"),
    ("Let me think.\nAnswer: Paris", "span", "Paris"),
    ("E.g., the policy was tightened, so the answer is C.", "letter", "C"),  # an abbreviation, not "E."
    ("A.M. trading fell; the stance is B.", "letter", "B"),
])
def test_no_leading_answer_keeps_the_later_reading(raw: str, shape: str, answer: str) -> None:
    assert extract_answer(raw, shape).answer == answer
