"""Agent episodes through each API backend's native tool calling, against local stub servers:
Anthropic Messages ``tool_use`` blocks (the SDK's real client path) and OpenAI chat completions
``tools`` / ``tool_calls``. The stub servers play a model that replays a τ-bench task's gold."""

from __future__ import annotations

import json
from pathlib import Path

from rizz.adapters.models.anthropic_backend import AnthropicModel
from rizz.adapters.models.openai_backend import OpenAICompatModel
from rizz.engine.model_agent import GREETING
from rizz.engine.native_agent import json_schema
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream

DATA = Path(__file__).resolve().parents[2] / "data"
EL = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements[0]
GOLD = json.loads(EL.reference)


def _step(body) -> int:
    """How many tool results the prompt (the last, user, turn) already shows."""
    text = body["messages"][-1]["content"]
    text = text if isinstance(text, str) else "".join(part.get("text", "") for part in text)
    return text.count("\nTool ")


def _user_text(body) -> str:
    content = body["messages"][-1]["content"]  # the customer's turn: the agent's newest line
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return "Hi, I need help." if text == GREETING else "###STOP###"  # stop once the agent spoke after its greeting


def _anthropic_route(seen):
    def route(method, path, body):
        if path.startswith("/v1/messages/count_tokens"):
            return 200, {"input_tokens": 7}, {}
        seen.append(body)
        if "tools" not in body:
            content = [{"type": "text", "text": _user_text(body)}]
        else:
            k = _step(body)
            if k < len(GOLD["actions"]):
                a = GOLD["actions"][k]
                content = [{"type": "tool_use", "id": f"toolu_{k}", "name": a["name"], "input": a["kwargs"]}]
            else:
                content = [{"type": "text", "text": " ".join(GOLD["outputs"]) or "Done."}]
        return 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5-20251001",
                     "content": content, "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 11, "output_tokens": 5}}, {}
    return route


def _openai_route(seen):
    def route(method, path, body):
        if not path.endswith("/chat/completions"):
            return 404, {"error": "no"}, {}
        seen.append(body)
        msg = {"role": "assistant", "content": None}
        if "tools" not in body:
            msg["content"] = _user_text(body)
        else:
            k = _step(body)
            if k == 0:  # first a malformed call: its error goes back to the model
                msg["tool_calls"] = [{"id": "c0", "type": "function", "function": {"name": "think", "arguments": "[1"}}]
            elif k - 1 < len(GOLD["actions"]):
                a = GOLD["actions"][k - 1]
                msg["tool_calls"] = [{"id": f"c{k}", "type": "function",
                                      "function": {"name": a["name"], "arguments": json.dumps(a["kwargs"])}}]
            else:
                msg["content"] = " ".join(GOLD["outputs"]) or "Done."
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}, {}
    return route


def _run(tmp_path, model):
    from rizz.adapters.embedder import Embedder

    stream = tmp_path / "s.jsonl"
    write_stream(stream, [EL])
    out = tmp_path / "run"
    s = run_stream(stream, load_policy("frozen"), "frozen", out, model, Embedder(), log=lambda m: None)
    rec = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    return s, rec, out


def test_anthropic_tool_use_blocks(tmp_path, http_server) -> None:
    seen: list = []
    srv = http_server(_anthropic_route(seen))
    s, rec, out = _run(tmp_path, AnthropicModel(api_key="sk-ant-test", base_url=srv.url))
    assert s["mean_reward"] == 1.0
    agent = [b for b in seen if "tools" in b]
    assert {t["name"] for t in agent[0]["tools"]} == {t["name"] for t in EL.tools}
    assert all("input_schema" in t for t in agent[0]["tools"])
    assert rec["episode"]["model_calls"] == len(GOLD["actions"]) + 1
    assert replay(out)["state_digest"] == s["state_digest"]


def test_openai_tools_and_tool_calls(tmp_path, http_server) -> None:
    seen: list = []
    srv = http_server(_openai_route(seen))
    s, rec, _ = _run(tmp_path, OpenAICompatModel(srv.url, "m"))
    assert s["mean_reward"] == 1.0
    agent = [b for b in seen if "tools" in b]
    assert agent[0]["tools"][0]["type"] == "function" and "parameters" in agent[0]["tools"][0]["function"]
    # llama.cpp's chatml-function-calling lists the tools only in a system turn and calls only with "auto"
    assert agent[0]["tool_choice"] == "auto" and [m["role"] for m in agent[0]["messages"]] == ["system", "user"]
    assert agent[0]["temperature"] == 0.0 and agent[0]["seed"] == 0
    assert "Python call syntax" not in agent[0]["messages"][1]["content"]  # the native protocol line instead
    assert rec["episode"]["tool_errors"] == 1
    assert "malformed call" in next(e["result"] for e in rec["episode"]["transcript"] if e["role"] == "tool")


def test_bfcl_types_become_json_schema() -> None:
    bfcl = {"type": "dict", "properties": {"x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "any"}}}}
    assert json_schema(bfcl) == {"type": "object", "properties": {"x": {"type": "number"},
                                                                 "t": {"type": "array", "items": {"type": "string"}}}}


def test_bench_user_model_plays_the_customer(tmp_path, http_server) -> None:
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    agent_seen: list = []
    user_seen: list = []
    agent_srv = http_server(_openai_route(agent_seen))
    user_srv = http_server(_openai_route(user_seen))
    stream = tmp_path / "s.jsonl"
    write_stream(stream, [EL])
    out = tmp_path / "bench"
    res = CliRunner().invoke(app, ["bench", str(stream), "-P", "frozen", "-o", str(out), "--model", f"openai:{agent_srv.url}#m",
                                   "--user-model", f"openai:{user_srv.url}#u"])
    assert res.exit_code == 0, res.output
    customer = [b for b in user_seen if b["messages"][0]["content"].startswith("You are playing a customer")]
    assert len(customer) == 2 and len(customer) == len(user_seen)  # opening line, then ###STOP###
    assert all("tools" in b for b in agent_seen)  # the agent's model never played the customer
    meta = json.loads((out / "frozen" / "run.json").read_text())
    assert meta["user_model"].startswith(f"openai:{user_srv.url}") and meta["model"].startswith(f"openai:{agent_srv.url}")
    assert json.loads((out / "results.json").read_text())["results"]["frozen"]["mean_reward"] == 1.0
    res = CliRunner().invoke(app, ["bench", str(stream), "-P", "frozen", "-o", str(tmp_path / "b2"), "--model", "oracle",
                                   "--user-model", "nonsense:x"])
    assert res.exit_code != 0 and "bad model spec 'nonsense:x'" in res.output


def test_a_server_whose_window_fills_ends_the_episode_as_overflow(tmp_path, http_server) -> None:
    """llama-cpp-python's chatml-function-calling handler ignores max_tokens while writing calls;
    a model that keeps calling fills n_ctx and the server answers 500: the episode ends as
    ``overflow`` (reward 0), the run goes on and replays."""
    seen: list = []

    def route(method, path, body):
        if not path.endswith("/chat/completions"):
            return 404, {"error": "no"}, {}
        seen.append(body)
        if "tools" in body:
            return 500, {"error": {"message": "Requested tokens (4097) exceed context window of 4096", "type": "internal_server_error"}}, {}
        return _openai_route([])(method, path, body)

    srv = http_server(route)
    s, rec, out = _run(tmp_path, OpenAICompatModel(srv.url, "m", max_retries=0))
    assert s["steps"] == 1 and s["mean_reward"] == 0.0
    assert rec["episode"]["stop"] == "overflow" and rec["episode"]["model_calls"] == 1
    assert len([b for b in seen if "tools" in b]) == 1
    assert replay(out)["state_digest"] == s["state_digest"]


def test_a_prompt_over_the_budget_is_no_request_and_no_model_call(tmp_path, http_server) -> None:
    """A prompt rizz's own budget refuses never leaves rizz: the episode ends as ``overflow``
    with no agent request and no model call (a server's refusal, above, is one)."""
    from rizz.adapters.embedder import Embedder

    seen: list = []
    srv = http_server(_openai_route(seen))
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, [EL])
    s = run_stream(stream, load_policy("frozen"), "frozen", out, OpenAICompatModel(srv.url, "m", max_retries=0), Embedder(),
                   log=lambda m: None, budget=200)  # the tool list alone is over 1,000 tokens
    rec = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    assert rec["episode"]["stop"] == "overflow" and rec["episode"]["model_calls"] == 0
    assert not [b for b in seen if "tools" in b]
    assert replay(out)["state_digest"] == s["state_digest"]


def test_under_serve_the_shared_queue_carries_native_tool_calls(tmp_path, http_server) -> None:
    """``rizz serve`` wraps every tenant's model as CachedModel(FairModel(backend)): episodes
    still use the API's native tool calling, each request waits its turn in the shared queue,
    and the queue's metrics hook sees every call with its tokens."""
    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.apps.serve.tenants import FairModel
    from rizz.engine.native_agent import native_kind

    seen: list = []
    calls: list = []
    srv = http_server(_anthropic_route(seen))
    fair = FairModel(AnthropicModel(api_key="sk-ant-test", base_url=srv.url),
                     on_call=lambda tenant, gen, s: calls.append(None if gen is None else (gen.prompt_tokens, gen.completion_tokens)))
    model = CachedModel(fair, ResponseCache(tmp_path / "responses.sqlite"))
    assert native_kind(model) == "anthropic"
    s, rec, _ = _run(tmp_path, model)
    assert s["mean_reward"] == 1.0
    agent = [b for b in seen if "tools" in b]
    assert len(agent) == rec["episode"]["model_calls"] == len(GOLD["actions"]) + 1
    assert calls.count((11, 5)) == len(seen) and fair.waiting == 0  # every request went through the queue


def _refusing_route(seen, answered: int = 0):
    """The OpenAI stub above, whose agent requests after the first ``answered`` get llama.cpp's
    500 for a request over the context window."""
    inner = _openai_route([])

    def route(method, path, body):
        if path.endswith("/chat/completions"):
            seen.append(body)
            if "tools" in body and sum(1 for b in seen if "tools" in b) > answered:
                return 500, {"error": {"message": "Requested tokens (4097) exceed context window of 4096",
                                       "type": "internal_server_error"}}, {}
        return inner(method, path, body)
    return route


def test_a_request_the_server_refused_is_a_logged_call_marked_refused(tmp_path, http_server) -> None:
    """The refused request is one of the episode's model_calls and has its call in the record
    (kind answer, rizz's count of its prompt, no completion, ``refused``), so the summary's
    calls agree with model_calls; a call that was answered writes no ``refused`` key, and the
    run replays to the same digest and figures."""
    from tests.shell.stubs import HashEmbedder

    seen: list = []
    srv = http_server(_refusing_route(seen, answered=1))
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, [EL])
    s = run_stream(stream, load_policy("frozen"), "frozen", out, OpenAICompatModel(srv.url, "m", max_retries=0), HashEmbedder(),
                   log=lambda m: None)
    rec = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    assert rec["episode"]["stop"] == "overflow" and rec["episode"]["model_calls"] == 2
    assert len([b for b in seen if "tools" in b]) == 2
    answers = [c for c in rec["calls"] if c["kind"] == "answer"]
    assert len(answers) == rec["episode"]["model_calls"] == 2
    assert "refused" not in answers[0] and answers[0]["completion_tokens"] > 0
    assert answers[1]["refused"] is True and answers[1]["completion_tokens"] == 0 and answers[1]["usage_estimated"] is True
    assert answers[1]["prompt_tokens"] == rec["prompt"]["tokens"] > 0  # the longer prompt: it holds the first reply
    assert answers[1]["cost_usd"] is None and "attempts" not in answers[1]
    assert [c["kind"] for c in rec["calls"]] == ["answer", "answer", "user"]  # the customer's opening line
    assert s["calls_by_kind"]["answer"] == 2 and s["model_calls"] == 3 == rec["episode"]["model_calls"] + rec["episode"]["user_calls"]
    assert [e["model_calls_per_episode"] for e in s["episodes"].values()] == [2.0]
    r = replay(out)
    assert r["state_digest"] == s["state_digest"] and r["model_calls"] == s["model_calls"] and r["calls_by_kind"] == s["calls_by_kind"]


def test_the_overflow_note_says_the_server_refused_the_prompt(tmp_path, http_server) -> None:
    """A step whose request the server refused was sent: the note does not say it was not, nor
    that it did not fit the prompt budget; with steps over the budget too, it counts each."""
    import attrs

    from rizz.lab.overflow import overflow_note
    from tests.shell.stubs import HashEmbedder

    big = attrs.evolve(EL, id="big", tools=tuple({**t, "name": f"{t['name']}_{i}"} for i in range(6) for t in EL.tools))
    for els, budget in (([EL], None), ([EL, big], 4000)):
        srv = http_server(_refusing_route([]))
        stream, out = tmp_path / f"s{len(els)}.jsonl", tmp_path / f"run{len(els)}"
        write_stream(stream, els)
        s = run_stream(stream, load_policy("frozen"), "frozen", out, OpenAICompatModel(srv.url, "m", max_retries=0),
                       HashEmbedder(), log=lambda m: None, budget=budget)
        recs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
        assert [r["overflow"] for r in recs] == [True] * len(els) and s["overflow"] == len(els)
        assert [any(c.get("refused") for c in r["calls"]) for r in recs] == [True, False][:len(els)]
        task = recs[0]["task"]
        if len(els) == 1:
            assert overflow_note(out, s, window=8192) == (
                f"frozen: 1 of 1 step was scored 0: the server refused its prompt as too long for its context window ({task}: 1); "
                "a larger context window on the server may let them run")
        else:
            assert overflow_note(out, s, window=8192) == (
                "frozen: 2 of 2 steps overflowed and were scored 0: 1 did not fit the prompt budget (--budget 4000) and was not "
                f"sent to the model, the server refused 1 as too long for its context window ({task}: 2); for those over the "
                "budget, a larger --budget (up to the model's window, 8192 tokens, less the reply's) may let them run; for the "
                "refused, a larger context window on the server may let them run")
    # the bench report counts the refused among the overflowed (results.json and report.md)
    from rizz.lab.report import build_report

    for name, n in (("run1", 1), ("run2", 2)):
        res = build_report(tmp_path, [name], title="t", command="c")["results"][name]
        assert (res["overflow"], res["overflow_refused"]) == (n, 1)
        assert (f"{name} {n} of {n} ({task}: {n}), 1 of them refused by the model's server as too long for its window. A larger "
                "prompt budget (`--budget`, up to the model's window) may let them run; a larger window on the server, the refused "
                "ones.") in (tmp_path / "report.md").read_text()
