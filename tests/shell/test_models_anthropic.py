"""Anthropic backend through the SDK's real client path, against a local Messages server."""

from __future__ import annotations

import anthropic
import pytest

from rizz.adapters.models import Message, ModelRequestError, ModelUnavailableError, estimate_tokens, load_model
from rizz.adapters.models.anthropic_backend import AnthropicModel, price_usd
from rizz.adapters.models.base import MESSAGE_FRAME_TOKENS, REPLY_PRIMING_TOKENS, sent_tokens

KEY = "sk-ant-test-key"


def message_body(text: str, stop_reason: str = "end_turn", n_in: int = 12, n_out: int = 3):
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": n_in, "output_tokens": n_out},
    }


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def scripted(*responses):
    """Route answering /v1/messages from ``responses`` in order, count_tokens with 7."""
    queue = list(responses)

    def route(method, path, body):
        if path.startswith("/v1/messages/count_tokens"):
            return 200, {"input_tokens": 7}, {}
        if path.startswith("/v1/messages"):
            return queue.pop(0) if len(queue) > 1 else queue[0]
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}, {}

    return route


def sent_key(headers: dict) -> str | None:
    """The API key as sent: ``x-api-key`` (SDK 0.x) or ``Authorization: Bearer`` (SDK 2.x)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth[len("Bearer "):] if auth.startswith("Bearer ") else None


def make(server, **kw) -> AnthropicModel:
    return AnthropicModel(api_key=KEY, base_url=server.url, **kw)


def test_retries_529_then_succeeds_and_sends_the_messages_wire_format(http_server):
    srv = http_server(scripted(
        (529, OVERLOADED, {"retry-after-ms": "10"}),
        (200, message_body("Paris"), {}),
    ))
    model = make(srv)
    gen = model.generate(
        [Message("system", "Answer briefly."), Message("user", "Capital of France?")],
        max_tokens=16, stop=["\nQ:"],
    )
    posts = [r for r in srv.requests if r["path"].startswith("/v1/messages")]
    assert len(posts) == 2  # the 529 was retried once
    assert posts[0]["body"] == posts[1]["body"]
    assert posts[1]["body"] == {
        "model": "claude-haiku-4-5",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Capital of France?"}],
        "system": "Answer briefly.",
        "temperature": 0.0,
        "stop_sequences": ["\nQ:"],
    }
    assert sent_key(posts[1]["headers"]) == KEY
    assert "anthropic-version" in posts[1]["headers"]
    assert gen.text == "Paris"
    assert (gen.prompt_tokens, gen.completion_tokens) == (12, 3)
    assert gen.cost_usd == pytest.approx(12 * 1e-6 + 3 * 5e-6)
    assert gen.model == "anthropic:claude-haiku-4-5"
    assert gen.finish_reason == "stop"
    assert gen.cached is False and gen.latency_s > 0


def test_500_is_retried_and_max_tokens_maps_to_length(http_server):
    err = {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    srv = http_server(scripted(
        (500, err, {"retry-after-ms": "5"}),
        (500, err, {"retry-after-ms": "5"}),
        (200, message_body("a b c d", stop_reason="max_tokens", n_in=5, n_out=4), {}),
    ))
    gen = make(srv).generate([Message("user", "count")], max_tokens=4)
    assert len([r for r in srv.requests if r["path"].startswith("/v1/messages")]) == 3
    assert gen.finish_reason == "length"
    assert gen.cost_usd == pytest.approx(5e-6 + 4 * 5e-6)


def test_400_is_not_retried(http_server):
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    srv = http_server(scripted((400, bad, {})))
    with pytest.raises(ModelRequestError, match=r"anthropic:claude-haiku-4-5: .*HTTP 400 invalid_request_error: bad") as info:
        make(srv).generate([Message("user", "x")], max_tokens=4)
    assert isinstance(info.value.__cause__, anthropic.BadRequestError)  # the SDK's error is kept as the cause
    assert len(srv.requests) == 1


def test_gives_up_after_max_retries(http_server):
    srv = http_server(scripted((529, OVERLOADED, {"retry-after-ms": "1"})))
    with pytest.raises(anthropic.APIStatusError) as info:
        make(srv, max_retries=2).generate([Message("user", "x")], max_tokens=4)
    assert info.value.status_code == 529
    assert len(srv.requests) == 3  # first try + 2 retries


def test_raw_rendering_falls_back_to_one_user_turn(http_server):
    srv = http_server(scripted((200, message_body("ok"), {})))
    make(srv).generate(
        [Message("system", "S"), Message("user", "U")], max_tokens=8, rendering="raw"
    )
    body = srv.requests[-1]["body"]
    assert body["messages"] == [{"role": "user", "content": "S\n\nU"}]
    assert "system" not in body and "stop_sequences" not in body


def test_whitespace_only_stops_are_applied_client_side(http_server):
    srv = http_server(scripted((200, message_body("Paris\n\nExplanation: ..."), {})))
    gen = make(srv).generate([Message("user", "q")], max_tokens=30, stop=["\n\n", "###"])
    assert srv.requests[-1]["body"]["stop_sequences"] == ["###"]
    assert gen.text == "Paris" and gen.finish_reason == "stop"


def test_count_tokens_uses_the_api_then_falls_back_offline(http_server):
    state = {"fail": False}

    def route(method, path, body):
        if state["fail"]:
            return 500, {"type": "error", "error": {"type": "api_error", "message": "x"}}, {
                "retry-after-ms": "1"}
        return 200, {"input_tokens": 7}, {}

    srv = http_server(route)
    model = make(srv)
    assert model.count_tokens("hello there") == 7
    assert srv.requests[-1]["body"] == {
        "model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hello there"}]}
    assert model.count_tokens("hello there") == 7  # memoised: no second request
    assert len(srv.requests) == 1
    state["fail"] = True
    text = "a different text of some length"
    assert model.count_tokens(text) == estimate_tokens(text)
    n_requests = len(srv.requests)
    assert model.count_tokens("yet another") == estimate_tokens("yet another")
    assert len(srv.requests) == n_requests  # stays offline after the failure
    assert model.count_tokens("") == 0


def test_estimate_mode_never_calls_the_api(http_server):
    srv = http_server(scripted((200, message_body("ok"), {})))
    model = make(srv, token_counting="estimate")
    assert model.count_tokens("x" * 35) == 10
    assert srv.requests == []


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelUnavailableError, match="ANTHROPIC_API_KEY"):
        load_model("anthropic:claude-haiku-4-5")


def test_load_model_spec_and_env_key(monkeypatch, http_server):
    srv = http_server(scripted((200, message_body("hi"), {})))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    model = load_model("anthropic", base_url=srv.url)
    assert model.name == "anthropic:claude-haiku-4-5" and model.context_window == 200_000
    assert load_model("anthropic:claude-sonnet-4-5", base_url=srv.url).name == (
        "anthropic:claude-sonnet-4-5")
    model.generate([Message("user", "hi")], max_tokens=2)
    assert sent_key(srv.requests[-1]["headers"]) == "sk-ant-from-env"


def test_price_table():
    assert price_usd("claude-haiku-4-5", 1_000_000, 0) == 1.0
    assert price_usd("claude-haiku-4-5", 0, 1_000_000) == 5.0
    assert price_usd("claude-unknown", 10, 10) is None


def test_count_sent_tokens_counts_the_request_once(http_server):
    """The prompt as sent is one count of the request (system field, turns, their frames), not a
    sum of per-text counts that would each carry a frame; offline it leaves the estimate to
    base.sent_tokens."""
    counts = {"n": 0}

    def route(method, path, body):
        counts["n"] += 1
        return 200, {"input_tokens": 25 + len(body["messages"]) + (3 if "system" in body else 0)}, {}

    srv = http_server(route)
    model = make(srv)
    msgs = [Message("system", "Answer briefly."), Message("user", "Capital of France?")]
    assert model.count_sent_tokens(msgs, "chat") == 29
    assert srv.requests[-1]["body"] == {
        "model": "claude-haiku-4-5", "system": "Answer briefly.",
        "messages": [{"role": "user", "content": "Capital of France?"}]}
    assert model.count_sent_tokens(msgs, "chat") == 29 and counts["n"] == 1  # memoised
    assert model.count_sent_tokens(msgs, "raw") == 26  # one user turn, no system field
    assert sent_tokens(model, msgs, "chat") == 29
    # a text alone: one user turn (a separate memo entry)
    assert model.count_tokens("Capital of France?") == 26
    offline = make(srv, token_counting="estimate")
    assert offline.count_sent_tokens(msgs, "chat") is None
    assert sent_tokens(offline, msgs, "chat") == (estimate_tokens("Answer briefly.") + estimate_tokens(
        "Capital of France?") + 2 * MESSAGE_FRAME_TOKENS + REPLY_PRIMING_TOKENS)
