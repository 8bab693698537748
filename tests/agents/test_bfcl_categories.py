"""Every BFCL category `rizz streams build bfcl` takes beyond the first five: a built slice of
each is scored 1.0 when the oracle replays its gold, and a deliberately wrong answer on each
checker path scores below 1.0 (the live AST categories, Java, JavaScript, irrelevance,
relevance, and the multi-turn miss-function, miss-parameter and long-context categories)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from rizz.adapters.agents.bfcl_env import (
    AST_CATEGORIES,
    CATEGORIES,
    MULTI_TURN_CATEGORIES,
    RELEVANCE_CATEGORIES,
    language_docs,
    load_category,
    shown_tools,
)
from rizz.adapters.agents.calls import ToolCall, format_call
from rizz.adapters.agents.env import make_environment, plain
from rizz.adapters.agents.episode import ToolEpisode
from rizz.adapters.agents.loop import run_episode
from rizz.adapters.models.oracle import NullAgent, OracleAgent, gold_calls
from rizz.adapters.verifiers.episodes import first_wrong_call, verify_episode
from rizz.core.retrieval import Retrieved
from rizz.engine.model_agent import ModelAgent, tools_at_turn
from rizz.formats.policy_file import load_policy
from rizz.lab.builders import BuildOptions, build
from rizz.lab.builders.bfcl import MORE_FUNCTIONS, bfcl_elements, gold_problem
from tests.agents.conftest import StubModel

NEW = ("simple_java", "simple_javascript", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
       "irrelevance", "live_irrelevance", "live_relevance", "multi_turn_miss_func", "multi_turn_miss_param",
       "multi_turn_long_context")


def _slice(category: str, n: int = 4, split: str = "test") -> list:
    return list(build("bfcl", Path("."), BuildOptions(split=split, tasks=(category,), per_task=n)).elements)


def _oracle(el) -> ToolEpisode:
    return run_episode(el, OracleAgent(), make_environment(el.environment), max_steps=200)


def _single(el, calls: list[ToolCall]) -> ToolEpisode:
    """A single-turn episode whose one reply makes ``calls``."""
    reply = {"role": "assistant", "text": "", "calls": [c.to_json() for c in calls]}
    return ToolEpisode(({"role": "user", "text": el.input}, reply), "sha256:", ((tuple(map(format_call, calls)),),),
                       1, 0, 0, "done")


def _multi(el, turns: list[list[ToolCall]]) -> ToolEpisode:
    """A multi-turn episode whose turn i makes the calls ``turns[i]`` (one step) on a fresh environment."""
    env = make_environment(el.environment)
    transcript = []
    for calls in turns:
        transcript.append({"role": "user", "text": "."})
        if calls:
            transcript.append({"role": "assistant", "text": "", "calls": [c.to_json() for c in calls]})
            for c in calls:
                try:
                    env.call(c.name, c.arguments)
                except Exception:  # noqa: BLE001 - a failing call is part of the episode
                    pass
        transcript.append({"role": "assistant", "text": "Done.", "calls": []})
    tc = tuple(((tuple(map(format_call, calls)),) if calls else ()) for calls in turns)
    return ToolEpisode(tuple(transcript), env.state_digest(), tc, len(turns), 0, 0, "done")


def _gold_turns(el) -> list[list[ToolCall]]:
    """The oracle's gold calls of a multi-turn element, one list per user turn."""
    out: list[list[ToolCall]] = [[]]
    for step in gold_calls(el, make_environment(el.environment)):
        if step:
            out[-1].extend(step)
        else:
            out.append([])
    return out[:-1]


def test_every_category_the_wheel_ships_in_the_ast_and_multi_turn_families() -> None:
    assert set(NEW) | {"simple_python", "multiple", "parallel", "parallel_multiple", "multi_turn_base"} == set(CATEGORIES)
    for left_out in ("web_search", "memory", "format_sensitivity"):
        assert left_out not in CATEGORIES


@pytest.mark.parametrize("category", NEW)
def test_oracle_scores_one_on_a_built_slice(category: str) -> None:
    els = _slice(category)
    assert len(els) == 4 and all(e.task == category for e in els)
    for el in els:
        v = verify_episode(el, _oracle(el))
        assert v.reward == 1.0, (el.id, v.detail)


@pytest.mark.parametrize("category", [c for c in NEW if c not in RELEVANCE_CATEGORIES])
def test_doing_nothing_scores_zero(category: str) -> None:
    for el in _slice(category, 2):
        ep = run_episode(el, NullAgent(), make_environment(el.environment), max_steps=50)
        assert verify_episode(el, ep).reward == 0.0


def test_live_ast_wrong_value_wrong_function_and_missing_call_fail() -> None:
    el = _slice("live_simple", 1)[0]
    (gold,) = gold_calls(el, make_environment(el.environment))
    assert verify_episode(el, _single(el, list(gold))).reward == 1.0
    ((name, args),) = [(c.name, c.arguments) for c in gold]
    key = next(k for k, v in args.items() if isinstance(v, str))
    wrong = verify_episode(el, _single(el, [ToolCall(name, dict(args, **{key: args[key] + " elsewhere"}))]))
    assert wrong.reward == 0.0 and key in wrong.detail
    multi = _slice("live_multiple", 1)[0]
    (gold,) = gold_calls(multi, make_environment(multi.environment))
    other = next(t["name"] for t in multi.tools if t["name"] != gold[0].name)
    assert verify_episode(multi, _single(multi, [ToolCall(other, gold[0].arguments)])).reward == 0.0
    for category in ("live_parallel", "live_parallel_multiple"):
        par = _slice(category, 1)[0]
        (gold,) = gold_calls(par, make_environment(par.environment))
        assert len(gold) > 1 and verify_episode(par, _single(par, list(gold))).reward == 1.0
        assert verify_episode(par, _single(par, list(gold[:-1]))).reward == 0.0


def test_live_system_message_is_the_instruction_and_history_is_labelled() -> None:
    els = {e.id: e for e in bfcl_elements("live_irrelevance", "test")}
    hist = els["bfcl-live_irrelevance_549-169-2"]
    assert hist.input.startswith("User: whats the weather like In India\n\nAssistant: I'm sorry")
    assert hist.input.endswith("User: tell me the weather ")
    with_system = next(e for e in bfcl_elements("live_simple", "train") if e.instruction)
    entry = next(e for e, _ in load_category("live_simple") if e["id"] == with_system.metadata["bfcl_id"])
    assert with_system.instruction == entry["question"][0][0]["content"] and entry["question"][0][0]["role"] == "system"
    assert with_system.input == entry["question"][0][1]["content"]


def _by_id(category: str, bfcl_id: str):
    return next(e for e in bfcl_elements(category, "test") if e.metadata["bfcl_id"] == bfcl_id)


def test_java_and_javascript_tools_are_strings_and_the_checker_converts_them() -> None:
    el = _by_id("simple_java", "simple_java_98")  # trueCountLocal: long, falseCountLocal: integer
    raw = {d["name"]: d for d in json.loads(el.reference)["function"]}
    for tool in el.tools:  # as BFCL shows them: the language note, every parameter a string
        assert tool["description"].endswith("Note that the provided function is in Java 8 SDK syntax.")
        assert {p["type"] for p in tool["parameters"]["properties"].values()} == {"string"}
        assert "long" in {p["type"] for p in raw[tool["name"]]["parameters"]["properties"].values()}
    ((call,),) = gold_calls(el, make_environment(el.environment))
    assert call.arguments["trueCountLocal"] == "150L" and call.arguments["falseCountLocal"] == "50"
    assert verify_episode(el, _single(el, [call])).reward == 1.0
    typed = verify_episode(el, _single(el, [ToolCall(call.name, dict(call.arguments, trueCountLocal=150))]))
    assert typed.reward == 0.0 and "Expected type String" in typed.detail  # a Java value is written as a string
    for bad in ("150", "151L"):  # an int literal where a long is due; a wrong long
        ep = _single(el, [ToolCall(call.name, dict(call.arguments, trueCountLocal=bad))])
        assert verify_episode(el, ep).reward == 0.0

    el = _by_id("simple_javascript", "simple_javascript_37")  # property: array of String
    assert json.loads(el.reference)["function"][0]["parameters"]["properties"]["property"]["type"] == "array"
    ((call,),) = gold_calls(el, make_environment(el.environment))
    assert call.arguments["property"] == '["width", "height"]' and verify_episode(el, _single(el, [call])).reward == 1.0
    swapped = _single(el, [ToolCall(call.name, dict(call.arguments, property='["height", "width"]'))])
    assert verify_episode(el, swapped).reward == 1.0  # BFCL accepts either order here
    for bad in ('["width", "depth"]', ["width", "height"]):  # a wrong array; a JSON array, not JavaScript text
        ep = _single(el, [ToolCall(call.name, dict(call.arguments, property=bad))])
        assert verify_episode(el, ep).reward == 0.0


def test_language_docs_leave_python_alone_and_copy() -> None:
    entry, _ = load_category("simple_javascript")[2]
    before = json.dumps(entry["function"])
    docs = language_docs(entry["function"], "simple_javascript")
    assert json.dumps(entry["function"]) == before and "items" not in docs[0]["parameters"]["properties"]["status"]
    assert "The list elements are of type String" in docs[0]["parameters"]["properties"]["status"]["description"]
    py = load_category("simple_python")[0][0]["function"]
    assert language_docs(py, "simple_python") is py


@pytest.mark.parametrize("category", ["irrelevance", "live_irrelevance"])
def test_irrelevance_any_call_fails(category: str) -> None:
    el = _slice(category, 1)[0]
    assert json.loads(el.reference) == {"call": False}
    call = ToolCall(el.tools[0]["name"], {})
    v = verify_episode(el, _single(el, [call]))
    assert v.reward == 0.0 and v.parsed and "a function call where none fits" in v.detail
    assert first_wrong_call(el, _single(el, [call])) == format_call(call)


def test_relevance_no_call_fails_any_call_passes() -> None:
    el = _slice("live_relevance", 1)[0]
    assert json.loads(el.reference) == {"call": True}
    assert verify_episode(el, _single(el, [])).reward == 0.0
    assert verify_episode(el, _single(el, [ToolCall(el.tools[-1]["name"], {"x": 1})])).reward == 1.0


def test_items_no_correct_answer_passes_are_dropped_with_a_note() -> None:
    notes: list[str] = []
    ids = {e.metadata["bfcl_id"] for e in bfcl_elements("simple_java", "test", notes)}
    assert "simple_java_64" not in ids and "simple_java_65" not in ids and len(ids) == 48
    assert any("simple_java_65" in n and "reads its elements as strings" in n for n in notes)
    notes = []
    bfcl_elements("live_simple", "train", notes)
    assert any("live_simple_112-68-0" in n and "no acceptable value" in n for n in notes)
    notes = []
    assert len(bfcl_elements("live_irrelevance", "train", notes)) == 438
    assert sum("no function docs" in n for n in notes) == 4
    entry, answer = load_category("simple_java")[64]
    assert gold_problem(entry, answer["ground_truth"], "simple_java") is not None
    entry, answer = load_category("simple_java")[0]
    assert gold_problem(entry, answer["ground_truth"], "simple_java") is None


def test_miss_func_holds_tools_out_until_their_turn() -> None:
    el = _slice("multi_turn_miss_func", 1)[0]
    missed = plain(el.environment)["missed_function"]
    ((turn, names),) = missed.items()
    k = int(turn)
    assert el.turns[k - 1] == MORE_FUNCTIONS and [t["name"] for t in el.tools[-len(names):]] == names
    for t in range(len(el.turns) + 1):
        shown = {x["name"] for x in shown_tools(el.tools, el.environment, t)}
        assert (set(names) <= shown) == (t >= k)
    gold = _gold_turns(el)
    assert gold[k - 1] == [] and gold[k]  # the turn lacking the function: no call; the function's turn: its call
    assert verify_episode(el, _multi(el, gold)).reward == 1.0
    skipped = [calls if i != k else [] for i, calls in enumerate(gold)]
    v = verify_episode(el, _multi(el, skipped))
    assert v.reward == 0.0 and f"turn {k}" in v.detail


def test_miss_func_prompt_lists_held_out_tools_only_from_their_turn() -> None:
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    assert MORE_FUNCTIONS == DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    el = _slice("multi_turn_miss_func", 1)[0]
    ((turn, names),) = plain(el.environment)["missed_function"].items()
    model = StubModel(lambda prompt: "Nothing to do.")
    agent = ModelAgent(model, load_policy("frozen"), Retrieved(), 1 << 16, "chat")
    run_episode(el, agent, make_environment(el.environment), max_steps=50)
    assert len(model.prompts) == len(el.turns) + 1  # one reply a turn
    listed = [f'"name": "{names[0]}"' in p for p in model.prompts]
    assert listed == [i >= int(turn) for i in range(len(model.prompts))]
    base = _slice("multi_turn_base", 1)[0]
    assert tools_at_turn(base, [{"role": "user", "text": "x"}]) is base


def test_miss_param_asks_instead_of_calling() -> None:
    el = next(e for e in _slice("multi_turn_miss_param", 4) if [] in json.loads(e.reference))
    gold = _gold_turns(el)
    empty = gold.index([])
    assert gold[empty + 1] and verify_episode(el, _multi(el, gold)).reward == 1.0
    # the call the missing value unblocks, never made: fails
    assert verify_episode(el, _multi(el, [c if i != empty + 1 else [] for i, c in enumerate(gold)])).reward == 0.0


def test_long_context_loads_the_padded_scenario() -> None:
    el = _slice("multi_turn_long_context", 1)[0]
    env = plain(el.environment)
    assert env["long_context"] is True
    short = make_environment(dict(env, long_context=False))
    assert make_environment(el.environment).state_digest() != short.state_digest()
    gold = _gold_turns(el)
    assert verify_episode(el, _multi(el, gold)).reward == 1.0
    assert verify_episode(el, _multi(el, gold[:-1] + [[]])).reward == 0.0


def test_multi_turn_checker_loads_the_scenario_the_episode_ran_on(monkeypatch) -> None:
    """BFCL's checker reads ``long_context`` off the entry id; the id it gets follows the
    element's ``environment.long_context``, whatever ``metadata`` says."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as mtc

    seen: list[str] = []
    monkeypatch.setattr(mtc, "multi_turn_checker", lambda res, gold, entry, cat, name: seen.append(entry["id"]) or {"valid": True})
    long_el, base_el = _slice("multi_turn_long_context", 1)[0], _slice("multi_turn_base", 1)[0]
    cases = [(long_el, "multi_turn_long_context_100"), (base_el, "multi_turn_base_100"),
             (attrs.evolve(long_el, metadata={"task": "x"}), "multi_turn_long_context_x"),
             (attrs.evolve(long_el, metadata={"bfcl_id": "multi_turn_base_7"}), "multi_turn_long_context_x"),
             (attrs.evolve(base_el, metadata={"bfcl_id": "multi_turn_long_context_7"}), "multi_turn_base_x")]
    for el, want in cases:
        assert verify_episode(el, _multi(el, [[]])).reward == 1.0
        assert seen[-1] == want


def test_categories_partition() -> None:
    assert set(AST_CATEGORIES) | set(RELEVANCE_CATEGORIES) | set(MULTI_TURN_CATEGORIES) == set(CATEGORIES)


class _Scripted:
    """An agent that writes the replies of ``script`` in turn (the last one from then on)."""

    def __init__(self, script):
        self.script, self.asked = list(script), 0

    def reply(self, el, transcript, env):
        from rizz.adapters.agents.loop import AgentReply

        text, error = self.script[min(self.asked, len(self.script) - 1)]
        self.asked += 1
        return AgentReply(text, error=error)


def test_the_same_malformed_reply_written_twice_in_a_row_ends_the_episode() -> None:
    el = _slice("multi_turn_base", 1)[0]
    bad = ("```json\n{'name': 'x'}\n```", "malformed call: not JSON")
    stuck = _Scripted([bad])
    ep = run_episode(el, stuck, make_environment(el.environment), max_steps=30, repeat_stop=2)
    assert (ep.stop, ep.model_calls, ep.tool_errors, stuck.asked) == ("repeat", 2, 2, 2)
    # without the stop the same agent runs to max_steps
    ep = run_episode(el, _Scripted([bad]), make_environment(el.environment), max_steps=30)
    assert (ep.stop, ep.model_calls) == ("max_steps", 30)
    # different malformed replies, or a good reply between two equal ones, do not count as a repeat
    other = ("```json\n{'name': 'y'}\n```", "malformed call: not JSON")
    ep = run_episode(el, _Scripted([bad, other, bad, other, ("Nothing to do.", None)]), make_environment(el.environment),
                     max_steps=30, repeat_stop=2)
    assert ep.stop != "repeat" and ep.tool_errors == 4
    assert load_policy("default").agents.repeat_stop == 2


class _CallLoop:
    """An agent that writes the same successful call every time (the 1.5B's 30 orders)."""

    def __init__(self, call):
        self.call, self.asked = call, 0

    def reply(self, el, transcript, env):
        from rizz.adapters.agents.loop import AgentReply

        self.asked += 1
        return AgentReply("", (self.call,))


@pytest.mark.parametrize("repeat_stop, runs_per_turn", [(2, 3), (1, 2)])
def test_the_same_successful_call_repeated_ends_the_turn_not_the_episode(repeat_stop, runs_per_turn) -> None:
    from rizz.adapters.agents.calls import ToolCall

    el = next(e for e in _slice("multi_turn_base", 4) if e.id == "bfcl-multi_turn_base_102")
    order = ToolCall("place_order", {"order_type": "Buy", "symbol": "TSLA", "price": 700, "amount": 100})
    agent = _CallLoop(order)
    ep = run_episode(el, agent, make_environment(el.environment), max_steps=30, repeat_stop=repeat_stop)
    turns = 1 + len(el.turns or ())
    # every turn: the order runs repeat_stop + 1 times, then the turn ends; the episode reaches every turn
    assert ep.stop == "done" and agent.asked == turns * runs_per_turn and ep.tool_errors == 0
    assert sum(1 for e in ep.transcript if e["role"] == "user") == turns
    marked = [e for e in ep.transcript if e.get("repeated")]
    assert len(marked) == turns and all(e["calls"] == [order.to_json()] for e in marked)
    # 0: never; the same agent runs to max_steps in its first turn
    ep = run_episode(el, _CallLoop(order), make_environment(el.environment), max_steps=30)
    assert (ep.stop, ep.model_calls) == ("max_steps", 30)
