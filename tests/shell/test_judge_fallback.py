"""The judge's fallback application as a policy choice (issue #10 §4, results/2026-12-01-label-quality-train.md):
``routing.fallback_application: content_words`` (the core's default) or ``first_line`` (the shipped default policy's since 2026-12-04)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from rizz.core import Policy
from rizz.core.serialize import canonical_json
from rizz.engine.judge import fallback_label, label_input, read_label
from rizz.formats.policy_file import PolicyError, load_policy, parse_policy, policy_data

ROOT = Path(__file__).resolve().parents[2]
HEAD = "Choose an answer for the following question and give your reasons.\n\nQuestion:\n"
SCIENCEQA = [  # one task (its instruction on the first line), three topics
    HEAD + "Which figure of speech is used in this text?\nLuke's room is as tidy as a pigsty.\n\nChoices:\nA. verbal irony\nB. pun\n\nAnswer:",
    HEAD + "Compare the motion of three ducks. Which duck was moving at the lowest speed?\n\nChoices:\nA. a duck that moved 45 miles\nB. a duck that moved 30 miles\n\nAnswer:",
    HEAD + "Which tense does the sentence use?\nMolly will wash the dishes after dinner.\n\nChoices:\nA. past tense\nB. future tense\n\nAnswer:",
]
ANSWERED = "A. verbal irony\n\nThe answer is B. pun"  # the 135M judge answers instead of labelling (§11a)


def test_first_line_gives_one_application_for_one_task_of_many_topics():
    apps = {fallback_label(x, instruction=None, shape="letter", fallback_application="first_line")[1] for x in SCIENCEQA}
    assert apps == {"reasons"}
    # today's default names each question's topic: three applications for one task
    topics = [fallback_label(x, instruction=None, shape="letter")[1] for x in SCIENCEQA]
    assert len(set(topics)) == 3 and "reasons" not in topics


def test_first_line_takes_the_instruction_when_there_is_one_and_keeps_the_function_and_script():
    fn, app = fallback_label("Leading blank line\n\nThe Committee raised the federal funds rate.",
                             instruction="Classify the monetary policy stance.", shape="letter", fallback_application="first_line")
    assert (fn, app) == ("classify", "monetary-policy-stance")
    fn, app = fallback_label("\n\n  \nWhat is the monetary policy stance? Choose A, B or C.\nText:\nRates rose.",
                             instruction="   ", shape="letter", fallback_application="first_line")
    assert (fn, app) == ("classify", "monetary-policy-stance")  # blank instruction and lines skipped
    # the script name reads the whole input's letters (the function: the line, else the shape)
    fn, app = fallback_label("Label the text below.\n\u6211\u8ba4\u4e3a\u8fd9\u4e2a\u653f\u7b56\u5f88\u597d\u6211\u8ba4\u4e3a\u8fd9\u4e2a",
                             instruction=None, shape="label", fallback_application="first_line")
    assert (fn, app) == ("classify", "label-chinese")
    assert fallback_label("?!\nstance of the rates", instruction=None, shape=None,
                          fallback_application="first_line") == ("answer-question", "general")  # the line has no word
    assert fallback_label("?!\nstance of the rates", instruction=None, shape=None)[0] == "classify"  # content_words


def test_first_line_reads_the_function_from_the_task_line_too():
    # data/trace-mini's first ScienceQA item: an answer option mentions translating
    item = HEAD + ("Which is a compound sentence?\n\nChoices:\nA. Open and honest communication is the foundation "
                   "of a healthy relationship.\nB. I can translate these French words for you, or you can use an "
                   "online dictionary.\n\nAnswer:")
    assert fallback_label(item, instruction=None, shape="letter", fallback_application="first_line") == (
        "answer-question", "reasons")
    assert fallback_label(item, instruction=None, shape="letter")[0] == "translate"  # content_words: the whole input
    # a task line that names its function keeps it
    assert fallback_label("Solve the following math problem.\nA train leaves at 3 pm ...", instruction=None,
                          shape="number", fallback_application="first_line") == ("solve-math", "math-problem")
    assert fallback_label("Which is right?\nPlease translate the Spanish first.", instruction=None, shape=None,
                          fallback_application="first_line")[0] == "answer-question"


def test_an_unknown_source_is_refused():
    with pytest.raises(ValueError, match="fallback_application: expected one of content_words, first_line, got 'topic'"):
        fallback_label("x", instruction=None, shape=None, fallback_application="topic")


def test_label_input_uses_the_source_only_for_missing_parts(fake_model):
    jl = label_input(fake_model([ANSWERED] * 3), SCIENCEQA[0], shape="letter", fallback_application="first_line")
    assert (jl.function, jl.application, jl.fallback, jl.raw) == ("answer-question", "reasons", True, ANSWERED)
    assert jl.generation is not None
    # the same reply read again without a call gives the same label (what judge_probe --from-run does)
    again = read_label(ANSWERED, SCIENCEQA[0], instruction=None, shape="letter", fallback_application="first_line")
    assert (again.function, again.application, again.fallback, again.generation) == (jl.function, jl.application, True, None)
    # an application the model gave is kept under either source
    part = label_input(fake_model(['{"application": "grammar-tense"']), SCIENCEQA[2], shape="letter", fallback_application="first_line")
    assert (part.function, part.application, part.fallback) == ("answer-question", "grammar-tense", True)
    # the default reads the reply as before this field existed
    default = label_input(fake_model([ANSWERED]), SCIENCEQA[0], shape="letter")
    assert default.application == fallback_label(SCIENCEQA[0], instruction=None, shape="letter")[1] != "reasons"


def test_the_core_default_is_content_words_the_shipped_default_first_line_and_both_are_validated():
    assert Policy().routing.fallback_application == "content_words"
    # left out of the policy's digest while it holds the core's default (content-words: the
    # shipped default until 2026-12-04, so its runs' digests did not move) ...
    assert "fallback_application" not in canonical_json(load_policy("content-words"))
    # ... and in it where a policy sets first_line, as the shipped default does
    assert load_policy("default").routing.fallback_application == "first_line"
    assert '"fallback_application":"first_line"' in canonical_json(load_policy("default")).replace(" ", "")
    p = parse_policy({"routing": {"fallback_application": "first_line"}}, "p.yaml")
    assert p.routing.fallback_application == "first_line"
    assert policy_data(p)["routing"]["fallback_application"] == "first_line"
    assert '"fallback_application":"first_line"' in canonical_json(p).replace(" ", "")
    with pytest.raises(PolicyError) as info:
        parse_policy({"routing": {"fallback_application": "topic"}}, "p.yaml")
    assert info.value.errors == ["$.routing.fallback_application: expected one of content_words, first_line, got 'topic'"]
    with pytest.raises(ValueError, match="fallback_application"):
        attrs.evolve(Policy().routing, fallback_application="first-line")
    assert load_policy(ROOT / "policies/labels-tuned.yaml").routing.fallback_application == "first_line"


def _stream(tmp_path: Path) -> Path:
    lines = [json.loads(l) for l in (ROOT / "data/trace-mini/test.jsonl").read_text().splitlines() if '"task": "ScienceQA"' in l][:6]
    assert len(lines) == 6 and all(el["input"].startswith(HEAD) for el in lines)
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(el) + "\n" for el in lines))
    return f


def _reply(messages) -> str:
    return ANSWERED if messages[0].content.startswith("You label tasks") else "A"


@pytest.mark.parametrize("source", ["content_words", "first_line"])
def test_a_run_logs_the_label_of_its_policy_and_replays_without_a_judge(tmp_path, fake_model, source):
    from rizz.adapters.embedder import Embedder
    from rizz.engine.run import replay, run_stream

    base = load_policy("judge-always")
    pol = attrs.evolve(base, routing=attrs.evolve(base.routing, fallback_application=source))
    out = tmp_path / source
    s = run_stream(_stream(tmp_path), pol, "judge-always", out, fake_model(_reply), Embedder(), log=lambda m: None)
    recs = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    judged = [r["judge"] for r in recs if r.get("judge")]
    assert len(judged) == 6 and all(j["fallback"] and j["raw"] == ANSWERED for j in judged)
    apps = {j["application"] for j in judged}
    if source == "first_line":
        assert apps == {"reasons"}
    else:
        assert len(apps) >= 5 and "reasons" not in apps  # one topic per question
    assert replay(out)["state_digest"] == s["state_digest"]  # the logged label: no judge on replay
    # benchmarks/judge_probe.py --from-run reads the logged replies with the library's read_label:
    # under the run's own source it gives the logged labels back, under the other one it changes them
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import judge_probe

    logged = {r["id"]: (r["judge"]["function"], r["judge"]["application"]) for r in recs if r.get("judge")}
    again, tasks = judge_probe.from_run(str(out), source)
    assert {k: (v["function"], v["application"]) for k, v in again.items()} == logged and set(tasks.values()) == {"ScienceQA"}
    other, _ = judge_probe.from_run(str(out), "first_line" if source == "content_words" else "content_words")
    assert {v["application"] for v in other.values()} != apps


def test_a_local_judge_labels_without_a_model_call_and_replays(tmp_path, fake_model):
    """``routing.judge: local`` (policies/judge-local.yaml): the inputs a ``when_uncertain``
    judge would be asked about get the fallback label, and the model sees only answers."""
    from rizz.adapters.embedder import Embedder
    from rizz.engine.run import replay, run_stream

    seen: list[str] = []

    def reply(messages) -> str:
        seen.append(messages[0].content[:20])
        return "A"

    out = tmp_path / "local"
    s = run_stream(_stream(tmp_path), load_policy("judge-local"), "judge-local", out, fake_model(reply), Embedder(), log=lambda m: None)
    recs = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines() if json.loads(l).get("kind") == "step"]
    judged = [r for r in recs if r.get("judge")]
    assert judged and all(r["judge"]["fallback"] and r["judge"]["raw"] == "" for r in judged)
    assert all(c["kind"] == "answer" for r in recs for c in r["calls"]) and len(seen) == len(recs)
    first = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])  # step 0: nothing to route to, so always labelled
    fn, app = fallback_label(first["input"], instruction=first.get("instruction"), shape=first["metadata"]["shape"])
    assert recs[0]["judge"]["function"] == fn and recs[0]["judge"]["application"] == app
    assert replay(out)["state_digest"] == s["state_digest"]
    # rizz diff and rizz view name such a label as the fallback's, with one wording naming the words it read
    from rizz.formats.wording import FALLBACK_LABEL
    from rizz.lab.diff import diff_run
    from rizz.lab.view import view_data

    words = "made from the content words of the instruction and the whole input with no model call (routing.judge: local)"
    assert f"  label {fn}/{app} {words}" in diff_run(out, 0, 0).splitlines()
    data = view_data(out)
    assert data["runs"][0]["fallback_label"] == words and data["fallback_label"] == FALLBACK_LABEL


def test_diff_and_view_name_the_task_line_as_the_fallbacks_source_under_first_line(tmp_path, fake_model):
    """A newcomer read "fallback from the input's words" under the default policy, whose fallback
    reads the input's task line (routing.fallback_application: first_line)."""
    from rizz.adapters.embedder import Embedder
    from rizz.engine.run import run_stream
    from rizz.lab.diff import diff_run
    from rizz.lab.view import view_data

    out = tmp_path / "default"
    run_stream(_stream(tmp_path), load_policy("default"), "default", out, fake_model(lambda m: "A"), Embedder(), limit=2, log=lambda m: None)
    first = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
    fn, app = fallback_label(first["input"], instruction=first.get("instruction"), shape=first["metadata"]["shape"],
                             fallback_application="first_line")
    words = "made from the input's task line (its instruction, else its first line) with no model call (routing.judge: local)"
    assert f"  label {fn}/{app} {words}" in diff_run(out, 0, 0).splitlines()
    assert view_data(out)["runs"][0]["fallback_label"] == words


def test_diff_and_view_say_a_model_judges_reply_was_empty_and_a_local_judge_asked_none(tmp_path, fake_model):
    """Under the default (routing.judge: local) a step read "the judge's fallback ..., no model
    reply", as if the model had failed; there the deterministic label is the chosen path. Under a
    judge that asks the model, the fallback is what an empty reply leaves."""
    from rizz.adapters.embedder import Embedder
    from rizz.engine.run import run_stream
    from rizz.lab.diff import diff_run
    from rizz.lab.view import view_data

    said = {}
    for policy in ("default", "judge-uncertain"):
        out = tmp_path / policy
        run_stream(_stream(tmp_path), load_policy(policy), policy, out, fake_model(lambda m: "" if m[0].content.startswith("You label") else "A"),
                   Embedder(), limit=1, log=lambda m: None)
        (label,) = [line for line in diff_run(out, 0, 0).splitlines() if line.startswith("  label ")]
        said[policy] = label.split(" made ", 1)[1]
        assert view_data(out)["runs"][0]["fallback_label"] == "made " + said[policy]
    assert said == {"default": "from the input's task line (its instruction, else its first line) with no model call (routing.judge: local)",
                    "judge-uncertain": "by the judge's fallback from the content words of the instruction and the whole input: "
                                       "the model's reply was empty"}
    assert not any("no model reply" in s for s in said.values())
