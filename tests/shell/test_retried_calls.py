"""Retried calls are counted (issue #12 §3): a request the API client sent again after an HTTP
429/529/5xx is one call with ``attempts`` > 1, in the Generation, the log and ``summary.json``.

Every request goes through the real ``openai`` / ``anthropic`` SDK clients to a local server
(loopback only) that refuses the first request of each prompt and answers the second.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rizz.adapters.models import Message
from rizz.adapters.models.anthropic_backend import AnthropicModel, price_usd
from rizz.adapters.models.cache import CachedModel, ResponseCache
from rizz.adapters.models.openai_backend import OpenAICompatModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stubs import HashEmbedder  # noqa: E402

USAGE = {"prompt_tokens": 30, "completion_tokens": 2, "total_tokens": 32}
# the SDKs honour retry-after-ms, so the test waits 1 ms instead of their 0.5-8 s back-off
BUSY = {"retry-after-ms": "1"}


def _refusing_first(http_server, *, fail_first: int, status: int, reply):
    """A server that answers HTTP ``status`` to the first ``fail_first`` requests of every
    distinct body, then ``reply(body)``; ``srv.posts`` counts requests per prompt text."""
    seen: dict[str, int] = {}

    def route(method, path, body):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "x"}]}, {}
        if "count_tokens" in path:
            return 200, {"input_tokens": 7}, {}
        key = json.dumps(body.get("messages") or body.get("prompt"), sort_keys=True)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= fail_first:
            return status, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, BUSY
        return 200, reply(body), {}

    srv = http_server(route)
    srv.posts = seen
    return srv


def _chat(body):
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "usage": USAGE,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "positive"}}]}


def _message(body):
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": "positive"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 4}}


@pytest.mark.parametrize("status", [429, 503])
def test_openai_call_retried_by_the_client_counts_each_attempt(http_server, status):
    srv = _refusing_first(http_server, fail_first=2, status=status, reply=_chat)
    m = OpenAICompatModel(srv.url, max_retries=2)
    g = m.generate([Message("user", "Is this review positive?")], max_tokens=8)
    assert (g.text, g.attempts) == ("positive", 3) and sum(srv.posts.values()) == 3
    assert (g.prompt_tokens, g.completion_tokens) == (30, 2)  # the answered attempt's usage only
    srv.posts.clear()
    srv.posts[json.dumps([{"role": "user", "content": "Another?"}], sort_keys=True)] = 99  # never refused
    assert m.generate([Message("user", "Another?")], max_tokens=8).attempts == 1


def test_anthropic_call_retried_by_the_sdk_counts_each_attempt_and_prices_the_answer(http_server):
    srv = _refusing_first(http_server, fail_first=1, status=529, reply=_message)
    m = AnthropicModel("claude-haiku-4-5", api_key="k", base_url=srv.url, max_retries=2)
    g = m.generate([Message("user", "Sentiment of: a wonderful film?")], max_tokens=8)
    assert (g.text, g.attempts) == ("positive", 2) and sum(srv.posts.values()) == 2
    assert g.cost_usd == pytest.approx(price_usd("claude-haiku-4-5", 20, 4))  # refused attempts are not billed


def test_a_cache_hit_makes_no_request_and_counts_one(http_server, tmp_path):
    srv = _refusing_first(http_server, fail_first=1, status=429, reply=_chat)
    m = CachedModel(OpenAICompatModel(srv.url, max_retries=2), ResponseCache(tmp_path / "c.sqlite"))
    first = m.generate([Message("user", "x")], max_tokens=8)
    again = m.generate([Message("user", "x")], max_tokens=8)
    assert (first.attempts, first.cached) == (2, False)
    assert (again.attempts, again.cached) == (1, True) and sum(srv.posts.values()) == 2


def test_run_summary_and_log_count_retried_calls(http_server, tmp_path):
    """Three elements, the second refused once: the log writes ``attempts`` on that call only
    (other lines are as before the field existed), the summary counts it."""
    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    seen: dict[str, int] = {}

    def route(method, path, body):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "x"}]}, {}
        text = json.dumps(body.get("messages"))
        seen[text] = seen.get(text, 0) + 1
        if "Review 1" in text and seen[text] == 1:
            return 429, {"error": {"message": "rate limited"}}, BUSY
        return 200, _chat(body), {}

    srv = http_server(route)
    stream = tmp_path / "s.jsonl"
    stream.write_text("".join(json.dumps({"id": f"r{i}", "input": f"Review {i}: a wonderful film.",
                                          "metadata": {"shape": "label", "task": "sst"},
                                          "reference": "positive", "verifier": "label_match"}) + "\n" for i in range(3)))
    summary = run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "run", OpenAICompatModel(srv.url, max_retries=2),
                         HashEmbedder(), log=lambda m: None)
    assert summary["model_calls"] == 3 and summary["retried_calls"] == 1 and summary["model_requests"] == 4
    recs = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [[c.get("attempts") for c in r["calls"]] for r in recs] == [[None], [2], [None]]
    # the replay reads it back: the same summary from the log alone
    from rizz.formats.logrecord import parse

    assert [c.attempts for r in recs for c in parse(r).calls] == [1, 2, 1]


def test_a_priced_run_counts_and_prices_judge_distill_and_retried_calls(http_server, tmp_path):
    """§3 "judge, distillation and retried calls are all counted": a default-policy run over the
    Anthropic SDK (loopback Messages server, a priced model id). Every call kind appears in
    ``calls_by_kind``, and ``cost_usd`` is the price of every call's tokens, retried ones included."""
    from stubs import ArithmeticModel, arithmetic_stream

    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    script = ArithmeticModel()
    seen: dict[str, int] = {}

    def route(method, path, body):
        if "count_tokens" in path:
            return 200, {"input_tokens": 7}, {}
        text = body["messages"][-1]["content"]
        text = text if isinstance(text, str) else " ".join(b.get("text", "") for b in text)
        seen[text] = seen.get(text, 0) + 1
        if len(seen) % 5 == 0 and seen[text] == 1:  # every fifth distinct request is refused once
            return 529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, BUSY
        reply = script.reply([Message("user", text)])
        return 200, {"id": "m", "type": "message", "role": "assistant", "model": body["model"],
                     "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 10 + len(text) // 4, "output_tokens": 3}}, {}

    srv = http_server(route)
    model = AnthropicModel("claude-haiku-4-5", api_key="k", base_url=srv.url, max_retries=2)
    summary = run_stream(arithmetic_stream(tmp_path / "s.jsonl", 21), load_policy("judge-uncertain"), "judge-uncertain", tmp_path / "run",
                         model, HashEmbedder(), log=lambda m: None)
    kinds = summary["calls_by_kind"]
    assert kinds["judge"] >= 1 and kinds["distill"] >= 1 and kinds["answer"] == summary["answered"] == 18
    assert summary["model_calls"] == sum(kinds.values())
    recs = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    calls = [c for r in recs for c in r.get("calls", [])]
    assert {c["kind"] for c in calls} >= {"judge", "answer", "distill"}
    assert all(c["cost_usd"] == pytest.approx(price_usd("claude-haiku-4-5", c["prompt_tokens"], c["completion_tokens"]))
               for c in calls)
    assert summary["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls)) and summary["cost_usd"] > 0
    retried = [c for c in calls if c.get("attempts", 1) > 1]
    assert retried and summary["retried_calls"] == len(retried)
    assert summary["model_requests"] == summary["model_calls"] + sum(c["attempts"] - 1 for c in retried)
    assert sum(seen.values()) == summary["model_requests"]  # the server saw exactly that many requests
