"""Verifiers against known metric values (published examples and values worked by hand)."""

from __future__ import annotations

import pytest

from rizz.adapters.verifiers import VERIFIER_NAMES, VerifierResult, verify
from rizz.adapters.verifiers.metrics import (
    exact_match,
    first_char,
    fuzzy_ratio,
    judge_prompt,
    label_match,
    py150_clean,
    rouge_l,
    token_f1,
)
from rizz.adapters.verifiers.sari import sari

# HumanEval/0 (openai/human-eval, MIT), as in /work/shared/data/humaneval.
HE_PROMPT = (
    "from typing import List\n\n\n"
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
    "    given threshold.\n"
    "    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n    False\n"
    '    """\n'
)
HE_TESTS = (
    "def check(candidate):\n"
    "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
    "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
    "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True\n"
    "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False\n"
)
HE_META = {"tests": HE_TESTS, "entry_point": "has_close_elements", "prompt": HE_PROMPT, "timeout_s": 5}
HE_BODY = (
    "    for i, a in enumerate(numbers):\n"
    "        for j, b in enumerate(numbers):\n"
    "            if i != j and abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)


def test_names() -> None:
    assert VERIFIER_NAMES == (
        "exact_match", "label_match", "first_char", "fuzzy_ratio", "rouge_l",
        "sari", "token_f1", "code_exec", "llm_judge", "bfcl_ast", "bfcl_multi_turn", "tau_db",
    )


# ------------------------------------------------------------------ exact / label / first char
def test_exact_match() -> None:
    assert exact_match(" B ", "B") == 1.0
    assert exact_match("b", "B") == 0.0  # TRACE compares strings exactly
    assert exact_match("42.0", "42") == 1.0  # numeric when both parse
    assert exact_match("1,000", "1000") == 1.0
    assert exact_match("41.99", "42") == 0.0
    assert exact_match("", "") == 0.0  # TRACE skips empty predictions (scores 0)


def test_verbose_answers_are_scored_on_their_answer() -> None:
    r = verify("exact_match", "In 2019 there were 3 ... The answer is 42", "42", shape="number")
    assert r == VerifierResult(1.0, "exact_match", True, "42", "")
    r = verify("exact_match", "The stance is B. hawkish", "B", metadata={"shape": "letter"})
    assert (r.reward, r.answer, r.parsed) == (1.0, "B", True)
    wrong = verify("exact_match", "Answer: C", "B", shape="letter")
    assert (wrong.reward, wrong.parsed) == (0.0, True)  # a substantive failure
    unparsed = verify("exact_match", "I cannot tell", "B", shape="letter")
    assert (unparsed.reward, unparsed.parsed) == (0.0, False)


def test_an_answer_to_an_item_whose_reference_is_not_of_its_shape_is_parsed() -> None:
    """The demo stream's NumGLUE-cm item with reference "Friday" (shape number) was logged
    ``parsed: false`` with reward 1.0: no number in "Friday", so the span reading was scored,
    and matched (TRACE's metric: exact match of the text). That reading is the reference's own
    form, so the answer is parsed, right ("Friday") or wrong ("Saturday": a substantive
    failure, not an unparsed one); the reward is unchanged."""
    from pathlib import Path

    from pyrsistent import thaw

    from rizz.formats.streams import read_stream

    demo = Path(__file__).resolve().parents[2] / "data" / "trace-mini" / "test.jsonl"
    el = next(e for e in read_stream(demo).elements if e.id == "numglue-cm-test-0000")
    assert (el.shape, el.references, el.verifier) == ("number", ("Friday",), "exact_match")
    right = verify(el.verifier, "Friday", el.references, metadata=thaw(el.metadata))
    assert (right.reward, right.parsed, right.answer) == (1.0, True, "Friday")
    wrong = verify("exact_match", "Saturday", "Friday", shape="number")
    assert (wrong.reward, wrong.parsed) == (0.0, True)
    numbered = verify("exact_match", "It ends on the 90th day", "Friday", shape="number")  # read as a number, as before
    assert (numbered.reward, numbered.parsed, numbered.answer) == (0.0, True, "90")
    assert verify("exact_match", "", "Friday", shape="number").parsed is False  # nothing to read
    # references of the shape keep the shape's reading: an answer with no number is unparsed
    assert verify("exact_match", "Friday", "42", shape="number").parsed is False
    assert verify("exact_match", "Friday", ["42", "42.0"], shape="number").parsed is False
    either = verify("exact_match", "Friday", ["Friday", "5"], shape="number")  # one reference is not a number
    assert (either.reward, either.parsed) == (1.0, True)


def test_label_match() -> None:
    assert label_match("Hawkish.", "hawkish") == 1.0
    assert label_match("  NOT   entailment ", "not-entailment") == 1.0  # punctuation becomes a space
    assert label_match("not entailment!", "Not entailment") == 1.0
    assert label_match("neutral", "hawkish") == 0.0
    assert label_match("...", "...") == 0.0  # nothing left after normalising


def test_first_char_scienceqa() -> None:
    reference = "B\nThere are four kinds of sentences."  # TRACE ScienceQA answer layout
    assert first_char("B. declarative", reference) == 1.0
    assert first_char("C", reference) == 0.0
    assert verify("first_char", "Answer: B\nBecause it states a fact.", reference, shape="letter").reward == 1.0


def test_list_reference_takes_the_max() -> None:
    r = verify("exact_match", "Paris", ["London", "Paris"], shape="span")
    assert r.reward == 1.0
    r = verify("token_f1", "the Eiffel Tower", ["tower", "Eiffel Tower in Paris"])
    # "eiffel tower" vs "tower": P=1/2 R=1 F=2/3; vs "eiffel tower in paris": P=1 R=1/2 F=2/3
    assert r.reward == pytest.approx(2 / 3)


# ------------------------------------------------------------------ Py150 fuzzy ratio
def test_py150_clean_follows_trace_postprocess() -> None:
    assert py150_clean("x = <NUM_LIT> + <NUM_LIT:7>") == "x = 0 + 7"
    assert py150_clean("url = '<STR_LIT>' ,") == "url = '' ,"
    assert py150_clean("c = '<CHAR_LIT>' + '<STR_LIT:http://x>'") == "c = '' + 'http://x'"
    # decoding stops at the first <EOL>; sequence markers go
    assert py150_clean("<s> else : <EOL> return x </s>") == "else :"
    assert py150_clean("\nelse :\nreturn x") == "else :"


def test_fuzzy_ratio_values() -> None:
    assert fuzzy_ratio("else :", "else :") == 1.0
    assert fuzzy_ratio("else : <EOL> pass", "else :") == 1.0
    # Indel ratio: "abc" vs "abd": LCS 2, distance 6 - 2*2 = 2, 1 - 2/6 = 66.67 -> round 67
    assert fuzzy_ratio("abc", "abd") == 0.67
    # "url = 'http://x' ," (18 chars) vs "url = '' ," (10): LCS 10, 1 - 8/28 = 71.43 -> 71
    assert fuzzy_ratio("url = '<STR_LIT:http://x>' ,", "url = '<STR_LIT>' ,") == 0.71
    assert fuzzy_ratio("", "else :") == 0.0
    assert verify("fuzzy_ratio", "```python\nelse :\n```", "else :", shape="code").reward == 1.0


# ------------------------------------------------------------------ ROUGE-L
def test_rouge_l_values() -> None:
    # LCS("the cat sat on the mat", "the cat was on the mat") = 5 of 6 tokens: P = R = F = 5/6
    assert rouge_l("the cat sat on the mat", "the cat was on the mat") == pytest.approx(5 / 6)
    # pred 3 tokens, ref 6, LCS 3: P=1, R=1/2, F=2/3
    assert rouge_l("the council approved", "The council approved the budget today.") == pytest.approx(2 / 3)
    assert rouge_l("", "anything") == 0.0
    assert verify("rouge_l", "  Budget approved.  ", "budget approved").reward == pytest.approx(1.0)


# ------------------------------------------------------------------ SARI
def test_sari_published_example() -> None:
    # HF evaluate metrics/sari README / docstring example: {'sari': 26.953601953601954}
    source = "About 95 species are currently accepted ."
    prediction = "About 95 you now get in ."
    references = [
        "About 95 species are currently known .",
        "About 95 species are now accepted .",
        "95 species are now accepted .",
    ]
    assert sari(source, prediction, references) == pytest.approx(26.953601953601954, abs=1e-9)
    # the README's perfect-match example: 100.0
    assert sari(source, source, [source]) == pytest.approx(100.0)
    r = verify("sari", prediction, references, metadata={"source": source})
    assert r.reward == pytest.approx(0.26953601953601954)


def test_sari_hand_computed() -> None:
    # source "a b c", prediction "a d", reference "a d c" (one reference):
    #   n=1 keep P=1 R=1/2 F=2/3; del P=(1/1)/2=1/2; add P=R=1 F=1
    #   n=2 keep 1 (0/0); del 1; add P=1 R=1/2 F=2/3
    #   n=3 keep 1; del 1; add P=1 (0/0) R=0 F=0;   n=4 all 1
    #   keep 11/12, del 7/8, add 2/3 -> (11/12 + 7/8 + 2/3) / 3 = 59/72
    assert sari("a b c", "a d", ["a d c"]) == pytest.approx(100 * 59 / 72)


def test_sari_needs_source() -> None:
    with pytest.raises(ValueError, match="metadata\\['source'\\]"):
        verify("sari", "x", "y")


# ------------------------------------------------------------------ token F1
def test_token_f1_hotpotqa() -> None:
    # "eiffel tower in paris" (4) vs "eiffel tower" (2): common 2, P=1/2, R=1, F=2/3
    assert token_f1("The Eiffel Tower, in Paris.", "Eiffel Tower") == pytest.approx(2 / 3)
    assert token_f1("an apple", "The apple!") == 1.0  # articles and punctuation drop
    assert token_f1("yes", "no") == 0.0
    assert token_f1("yes it is", "yes") == 0.0  # HotpotQA: yes/no/noanswer must match exactly
    assert token_f1("no", "No.") == 1.0
    assert token_f1("Paris", "London") == 0.0


def test_token_f1_variants() -> None:
    # "the cat cat" -> "cat cat" vs "cat cat dog": multiset common 2: P=1, R=2/3, F=0.8
    assert token_f1("the cat cat", "cat cat dog") == pytest.approx(0.8)
    # StreamBench counts a set: common 1, P=1/2, R=1/3, F=0.4
    assert token_f1("the cat cat", "cat cat dog", "set") == pytest.approx(0.4)
    # LoCoMo stems: running->run, dogs->dog
    assert token_f1("running dogs", "run dog", "stem") == 1.0
    assert token_f1("running dogs", "run dog") == 0.0
    assert verify("token_f1", "running dogs", "run dog", metadata={"f1_variant": "stem"}).reward == 1.0
    with pytest.raises(ValueError, match="hotpotqa, set, stem"):
        token_f1("a", "b", "rouge")


# ------------------------------------------------------------------ code execution
def test_code_exec_body_completion_passes() -> None:
    r = verify("code_exec", HE_BODY, "", metadata=HE_META)
    assert (r.reward, r.parsed, r.detail) == (1.0, True, "ok")


def test_code_exec_full_function_in_fence_gets_prompt_imports() -> None:
    # the model's function uses List without importing it: the prompt's imports are kept
    raw = "Sure:\n```python\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n" + HE_BODY + "```"
    assert verify("code_exec", raw, "", metadata=HE_META).reward == 1.0


def test_code_exec_wrong_and_broken() -> None:
    wrong = verify("code_exec", "    return False\n", "", metadata=HE_META)
    assert (wrong.reward, wrong.parsed) == (0.0, True)
    assert wrong.detail.startswith("exit 1: AssertionError")
    broken = verify("code_exec", "    return (\n", "", metadata=HE_META)
    assert (broken.reward, broken.parsed, broken.detail) == (0.0, False, "syntax error")
    with pytest.raises(ValueError, match="tests"):
        verify("code_exec", HE_BODY, "", metadata={"entry_point": "f"})


# ------------------------------------------------------------------ LLM judge
def test_llm_judge() -> None:
    prompts: list[str] = []

    def judge(prompt: str) -> str:
        prompts.append(prompt)
        return "Yes." if "Paris" in prompt.split("Candidate answer:")[1] else "No, it differs."

    r = verify("llm_judge", "Answer: It is Paris", "Paris", shape="span",
               metadata={"question": "Capital of France?"}, judge=judge)
    assert (r.reward, r.answer, r.detail) == (1.0, "It is Paris", "judge: yes")
    assert "Capital of France?" in prompts[0] and "- Paris" in prompts[0]
    assert verify("llm_judge", "Lyon", "Paris", judge=judge).reward == 0.0
    assert verify("llm_judge", "Lyon", "Paris", judge=lambda p: "hmm").detail == "judge: unreadable reply"
    assert judge_prompt("Q", ["a", "b"], "c").count("\n- ") == 2
    with pytest.raises(ValueError, match="judge"):
        verify("llm_judge", "Lyon", "Paris")


# ------------------------------------------------------------------ errors
def test_unknown_names_raise() -> None:
    with pytest.raises(ValueError, match="exact_match, label_match, first_char"):
        verify("bleu", "x", "x")
    with pytest.raises(ValueError, match="letter, number, label"):
        verify("exact_match", "x", "x", shape="choice")
    with pytest.raises(ValueError, match="non-empty"):
        verify("exact_match", "x", [])


def test_result_reward_is_validated() -> None:
    with pytest.raises(ValueError, match="\\[0, 1\\]"):
        VerifierResult(1.5, "exact_match", True, "x")
    with pytest.raises(ValueError):
        VerifierResult(1.0, "bleu", True, "x")
