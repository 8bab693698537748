"""The agent loop through Session and `rizz run`: tool errors go back to the model, steps are
bounded, the transcript is budgeted, the log replays with no model or tool call, resume."""

from __future__ import annotations

import json
from pathlib import Path

from rizz.adapters.agents.calls import ToolCall, format_call
from rizz.engine.agent_prompt import ELIDED
from rizz.engine.model_agent import GREETING
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream
from tests.agents.conftest import StubModel

DATA = Path(__file__).resolve().parents[2] / "data"
TAU = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements


def _gold(el):
    return [ToolCall(a["name"], a["kwargs"]) for a in json.loads(el.reference)["actions"]]


def _tau_stub(els):
    """Agent: a malformed call, an unknown tool, bad arguments, then the gold one call a step,
    then the outputs. Customer: one opening line, then ###STOP###. Judge/distill: empty."""
    by_brief = {el.user: el for el in els}

    def fn(prompt: str) -> str:
        if prompt.startswith("You are playing a customer"):
            return "Hi, I need help with my order." if prompt.endswith(GREETING) else "###STOP###"
        if "Tools:" not in prompt:
            return ""
        el = next(e for e in els if e.instruction and e.instruction[:200] in prompt and
                  any(f"Tool {c.name}" in prompt for c in _gold(e)[:1]) or e is els[0])
        done = prompt.count("\nTool ")
        script = ["get_order_details(order_id=", "no_such_tool()", "get_order_details(id='#W1')"]
        script += [format_call(c) for c in _gold(el)]
        return script[done] if done < len(script) else (" ".join(json.loads(el.reference)["outputs"]) or "Done.")
    del by_brief
    return fn


def test_tool_errors_return_to_the_model_and_the_run_replays(tmp_path, embedder) -> None:
    el = TAU[0]
    stream = tmp_path / "s.jsonl"
    write_stream(stream, [el])
    model = StubModel(_tau_stub([el]))
    out = tmp_path / "run"
    s = run_stream(stream, load_policy("frozen"), "frozen", out, model, embedder, log=lambda m: None)
    assert s["mean_reward"] == 1.0
    rec = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    ep = rec["episode"]
    errors = [e["result"] for e in ep["transcript"] if e["role"] == "tool" and e["error"]]
    assert len(errors) == 3 and ep["tool_errors"] == 3
    assert errors[0].startswith("Error: malformed call") and "unknown tool 'no_such_tool'" in errors[1]
    assert "unexpected keyword" in errors[2]
    assert ep["model_calls"] == 3 + len(_gold(el)) + 1 and ep["stop"] == "user_stop"
    assert rec["answer"]["extracted"].startswith(format_call(_gold(el)[0]))
    assert s["calls_by_kind"]["user"] == 2 and s["budget_exceeded"] == 0
    n_prompts = len(model.prompts)
    assert replay(out)["state_digest"] == s["state_digest"]
    assert len(model.prompts) == n_prompts  # replay called no model


def test_max_steps_bounds_the_episode(tmp_path, embedder) -> None:
    el = TAU[0]
    stream = tmp_path / "s.jsonl"
    write_stream(stream, [el])
    model = StubModel(lambda p: "think(thought='hmm')" if "Tools:" in p else ("Hi." if "Agent:" not in p else "###STOP###"))
    pol = load_policy("frozen")
    import attrs

    pol = attrs.evolve(pol, agents=attrs.evolve(pol.agents, max_steps=4))
    s = run_stream(stream, pol, "frozen-4", tmp_path / "run", model, embedder, log=lambda m: None)
    rec = json.loads((tmp_path / "run" / "log.jsonl").read_text().splitlines()[0])
    assert rec["episode"]["stop"] == "max_steps" and rec["episode"]["model_calls"] == 4
    assert s["mean_reward"] == 0.0
    assert rec["answer"]["extracted"].startswith("think(thought='hmm')")  # the trajectory, as answered
    assert rec["episode"]["wrong_call"] == "think(thought='hmm')"  # the first wrong call: the anti-pattern text
    from rizz.engine.run import replay as _replay

    assert _replay(tmp_path / "run")["state_digest"] == s["state_digest"]


def test_agent_prompt_reserves_the_policys_reply_tokens(tmp_path, embedder) -> None:
    import attrs

    from rizz.engine.render import TEMPLATE_SLACK

    el = TAU[0]
    stream = tmp_path / "s.jsonl"
    write_stream(stream, [el])
    pol = load_policy("frozen")
    for reply in (256, 3000):
        p = attrs.evolve(pol, agents=attrs.evolve(pol.agents, reply_tokens=reply))
        run_stream(stream, p, "frozen", tmp_path / f"r{reply}", StubModel(_tau_stub([el])), embedder, log=lambda m: None)
        rec = json.loads((tmp_path / f"r{reply}" / "log.jsonl").read_text().splitlines()[0])
        # the stub's window is 8192 tokens: the agent's budget leaves the policy's reply room, not a shape's
        assert rec["prompt"]["budget"] == 8192 - reply - TEMPLATE_SLACK


def test_transcript_elides_oldest_tool_results_first_under_budget(tmp_path, embedder) -> None:
    el = TAU[0]
    stream = tmp_path / "s.jsonl"
    write_stream(stream, [el])
    model = StubModel(_tau_stub([el]))
    task_tokens = len(el.instruction.split()) + 1200  # the tool list is long; leave room for little else
    s = run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "run", model, embedder, log=lambda m: None,
                   budget=task_tokens)
    agent_prompts = [p for p in model.prompts if "Tools:" in p]
    assert s["budget_exceeded"] == 0
    assert all(len(p.split()) <= task_tokens for p in agent_prompts)
    late = agent_prompts[-1]
    assert ELIDED in late and el.instruction[:100] in late and "Tools:" in late
    first_tool = late.index("\nTool ")
    assert late[first_tool:].split("\n")[1].endswith(ELIDED) or ELIDED in late[first_tool: first_tool + 200]


def test_resume_equals_uninterrupted(tmp_path, embedder) -> None:
    stream = tmp_path / "s.jsonl"
    write_stream(stream, TAU[:3])
    full = run_stream(stream, load_policy("default"), "default", tmp_path / "a", StubModel(_tau_stub(TAU[:3])), embedder,
                      log=lambda m: None)
    run_stream(stream, load_policy("default"), "default", tmp_path / "b", StubModel(_tau_stub(TAU[:3])), embedder,
               log=lambda m: None, limit=1)
    resumed = run_stream(stream, load_policy("default"), "default", tmp_path / "b", StubModel(_tau_stub(TAU[:3])), embedder,
                         log=lambda m: None)
    assert resumed["state_digest"] == full["state_digest"] and resumed["steps"] == 3


def test_diff_shows_the_episode_readably(tmp_path, embedder) -> None:
    from rizz.adapters.models.spec import load_model
    from rizz.lab.diff import diff_run

    stream = tmp_path / "s.jsonl"
    write_stream(stream, TAU[:1])
    run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "run", load_model("oracle"), embedder, log=lambda m: None)
    text = diff_run(tmp_path / "run", 0, 0)
    first = _gold(TAU[0])[0]
    assert f"  episode: {len(_gold(TAU[0])) + 1} agent calls, 0 tool errors, 2 user turns, stop user_stop" in text
    assert "    user: Hi, I need help." in text
    assert f"    agent: {first.name}(" in text and f"    tool {first.name}: " in text


def test_bench_report_has_episode_columns_per_category(tmp_path, embedder) -> None:
    from rizz.adapters.models.spec import load_model
    from rizz.lab.report import build_report

    bfcl = read_stream(DATA / "bfcl-mini" / "test.jsonl").elements
    stream = tmp_path / "s.jsonl"
    write_stream(stream, [e for e in bfcl if e.task in ("simple_python", "multi_turn_base")][:6])
    for pol in ("frozen", "default"):
        run_stream(stream, load_policy(pol), pol, tmp_path / "bench" / pol, load_model("oracle"), embedder, log=lambda m: None)
    res = build_report(tmp_path / "bench", ["frozen", "default"], title="t", command="c")
    eps = res["results"]["default"]["episodes"]
    assert set(eps) == {"simple_python", "multi_turn_base"} and eps["simple_python"]["mean_reward"] == 1.0
    assert eps["multi_turn_base"]["turns_per_episode"] > 1 and eps["simple_python"]["model_calls_per_episode"] == 1.0
    md = (tmp_path / "bench" / "report.md").read_text()
    assert "## Episodes per category" in md and "| simple_python | default | 1.000 (n=4) | 1.00 | 0 | 1.00 |" in md


def test_oracle_agent_with_a_model_playing_the_customer(tmp_path, embedder) -> None:
    from rizz.adapters.models.spec import load_model

    stream = tmp_path / "s.jsonl"
    write_stream(stream, TAU[:1])
    # the customer's first prompt holds only the agent's greeting (model_agent.GREETING); it stops once the agent has spoken
    user = StubModel(lambda p: "I want to sort out my order." if p.endswith(GREETING) else "###STOP###", name="stub:user")
    s = run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "run", load_model("oracle"), embedder,
                   log=lambda m: None, user_model=user)
    rec = json.loads((tmp_path / "run" / "log.jsonl").read_text().splitlines()[0])
    said = [e["text"] for e in rec["episode"]["transcript"] if e["role"] == "user"]
    assert said == ["I want to sort out my order.", "###STOP###"] and rec["episode"]["user_calls"] == 2
    assert len(user.prompts) == 2 and TAU[0].user in user.prompts[0]  # the hidden brief reached the customer only
    assert s["mean_reward"] == 1.0 and json.loads((tmp_path / "run" / "run.json").read_text())["user_model"] == "stub:user"
    assert replay(tmp_path / "run")["state_digest"] == s["state_digest"]
