"""Verified trajectories reach later prompts of their zone and no others (issue #13).

A prompt-sensitive stub agent calls the right tools only when a verified trajectory of the same
application is in its prompt (or, as a seed, on the first item of applications A and B); it never
gets application C right on its own. Under ``default`` it must improve over the stream and beat
``frozen``, and it must not improve on C, whose trajectories are never verified.
"""

from __future__ import annotations

import json
from pathlib import Path

from rizz.adapters.agents.calls import ToolCall, format_call
from rizz.engine.run import run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import write_stream
from rizz.lab.builders.bfcl import bfcl_elements
from tests.agents.conftest import StubModel

APPS = {"simple_python": "A", "multiple": "B", "parallel": "C"}
N = 4


def _policy(name: str):
    """The shipped policy with the model judge asked when a route is in doubt: the stub's judge
    labels each item by its application, so what these tests vary is what a route reads."""
    import attrs

    p = load_policy(name)
    return attrs.evolve(p, routing=attrs.evolve(p.routing, judge="when_uncertain"))


def _stream():
    groups = [bfcl_elements(cat, "train")[:N] for cat in APPS]
    return [g[i] for i in range(N) for g in groups]  # A0 B0 C0 A1 B1 C1 ...


def _stub(elements):
    cat_of = {el.input: el.metadata["category"] for el in elements}
    first = {el.input for el in elements if el.metadata["bfcl_id"].endswith("_0")}

    def gold(el):
        from rizz.adapters.models.oracle import gold_calls

        return gold_calls(el, None)[0]

    calls = {el.input: gold(el) for el in elements}

    def fn(prompt: str) -> str:
        if prompt.startswith("You label tasks"):
            text = next(t for t in cat_of if t[:300] in prompt)
            return '{"function": "use-tools", "application": "' + cat_of[text].replace("_", "-") + '"'
        if "Tools:" not in prompt:
            return ""  # distillation: no rules
        user = prompt.rindex("\nUser: ")
        text = next(t for t in cat_of if prompt[user:].startswith(f"\nUser: {t}"))
        cat = cat_of[text]
        start = prompt.find("Solved examples:")
        ends = [i for i in (prompt.find("Mistakes to avoid:", start), prompt.find("Recent turns:", start), user) if i > start]
        shown = prompt[start:min(ends)] if start >= 0 else ""
        same_app = any(f"Input: {t}" in shown for t, c in cat_of.items() if c == cat and t != text)
        if (text in first and APPS[cat] != "C") or same_app:
            return "[" + ", ".join(format_call(c) for c in calls[text]) + "]"
        return format_call(ToolCall(calls[text][0].name, {}))  # the right function, no arguments: wrong

    return fn


def test_verified_trajectories_help_their_zone_only(tmp_path, embedder) -> None:
    elements = _stream()
    stream = tmp_path / "bfcl.jsonl"
    write_stream(stream, elements)
    rewards = {}
    for policy in ("frozen", "default", "cross-zone"):
        out = tmp_path / policy
        run_stream(stream, _policy(policy), policy, out, StubModel(_stub(elements)), embedder, log=lambda m: None)
        recs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
        recs = [r for r in recs if r.get("kind", "step") == "step"]  # log format 2: distill records apart
        if policy == "default":  # the first prompt's memory blocks are logged, as for a single-call step
            shown = [r for r in recs if r["prompt"]["episode_keys"]]
            assert shown and all("examples" in r["prompt"]["blocks"] for r in shown)
            assert all(r["prompt"]["blocks"] == [] for r in recs if not r["prompt"]["episode_keys"] and not r["prompt"]["rule_ids"])
        rewards[policy] = {app: [r["verdict"]["reward"] for r in recs if APPS[r["task"]] == app] for app in "ABC"}
    frozen, default, cross = rewards["frozen"], rewards["default"], rewards["cross-zone"]
    assert frozen == {"A": [1.0, 0.0, 0.0, 0.0], "B": [1.0, 0.0, 0.0, 0.0], "C": [0.0] * N}
    # cross-zone reads every branch's examples: A's and B's later items all see their first one's
    assert cross["A"] == [1.0] * N and cross["B"] == [1.0] * N and cross["C"] == [0.0] * N
    # default reads only the routed branch: B's last two items spawn a branch of their own (the
    # judge labels them apart), where B's first trajectory is not read; a fragmentation cost
    assert default["A"] == [1.0] * N and default["B"] == [1.0, 1.0, 0.0, 0.0]
    assert default["C"] == [0.0] * N  # never verified: no help from A's or B's trajectories
    assert sum(map(sum, frozen.values())) < sum(map(sum, default.values())) <= sum(map(sum, cross.values()))


def test_corrections_teach_a_zone_its_model_never_gets_right(tmp_path, embedder) -> None:
    """Under ``corrections`` a failed single-turn BFCL episode is written as a verified example
    of its gold calls (the verdict's correction), so application C, never right on its own,
    is right once a corrected trajectory of C is in the prompt; ``default`` never learns C."""
    elements = _stream()
    stream = tmp_path / "bfcl.jsonl"
    write_stream(stream, elements)
    got = {}
    for policy in ("default", "corrections"):
        out = tmp_path / policy
        run_stream(stream, _policy(policy), policy, out, StubModel(_stub(elements)), embedder, log=lambda m: None)
        recs = [r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if r.get("kind", "step") == "step"]
        got[policy] = {app: [r["verdict"]["reward"] for r in recs if APPS[r["task"]] == app] for app in "ABC"}
        if policy == "corrections":  # the correction is logged with the verdict, so replay writes the same example
            first_c = next(r for r in recs if APPS[r["task"]] == "C")
            gold = "; ".join(format_call(c) for c in _gold(elements, first_c["input"]["text"]))
            assert first_c["verdict"]["correction"] == gold
    assert got["default"]["C"] == [0.0] * N
    assert got["corrections"]["C"][0] == 0.0 and sum(got["corrections"]["C"]) >= N - 2
    assert sum(map(sum, got["corrections"].values())) > sum(map(sum, got["default"].values()))


def _gold(elements, text):
    from rizz.adapters.models.oracle import gold_calls

    el = next(e for e in elements if e.input == text)
    return gold_calls(el, None)[0]


def test_an_irrelevance_item_is_corrected_to_no_call() -> None:
    from rizz.engine.agent_step import episode_correction

    el = bfcl_elements("irrelevance", "train")[0]
    assert episode_correction(el) == "(no tool call)"
    multi = type("El", (), {"verifier": "bfcl_multi_turn"})()
    assert episode_correction(multi) is None


def test_a_tau_bench_task_is_corrected_to_its_gold_actions_and_outputs() -> None:
    """A failed τ-bench episode's correction: the gold database actions in order, then the
    outputs the agent must say, in the form a verified trajectory is written."""
    from rizz.engine.agent_step import episode_correction
    from rizz.formats.streams import read_stream

    els = read_stream(Path(__file__).resolve().parents[2] / "data" / "tau-bench-mini" / "test.jsonl").elements
    retail = next(e for e in els if e.id == "tau-retail-test-000")
    assert episode_correction(retail) == (
        "find_user_id_by_name_zip(first_name='Yusuf', last_name='Rossi', zip='19122'); "
        "get_order_details(order_id='#W2378156'); get_product_details(product_id='1656367028'); "
        "get_product_details(product_id='4896585277'); exchange_delivered_order_items(order_id='#W2378156', "
        "item_ids=['1151293680', '4983901480'], new_item_ids=['7706410293', '7747408585'], "
        "payment_method_id='credit_card_9513926')")
    said = next(e for e in els if json.loads(e.reference)["outputs"])
    fix = episode_correction(said)
    assert fix is not None and fix.endswith(" -> " + "; ".join(json.loads(said.reference)["outputs"]))
