"""The Anthropic backend sends each Claude model only the fields it accepts (issue #12 §1).

Every request goes through the ``anthropic`` SDK's real client to a local Messages server
(loopback only); the assertions are on the JSON body the server received.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anthropic
import pytest

from rizz.adapters.models import Message, ModelRequestError
from rizz.adapters.models.anthropic_backend import AnthropicModel
from rizz.adapters.models.anthropic_params import REQUEST_RULES, rejected_parameter, request_options

MSGS = [Message("system", "Answer with one word."), Message("user", "Sentiment of: a wonderful film?")]
BASE = {"max_tokens": 16, "messages": [{"role": "user", "content": "Sentiment of: a wonderful film?"}],
        "system": "Answer with one word."}


def _server(http_server, content=None, *, status=200, error=None):
    def route(method, path, body):
        if path.startswith("/v1/messages/count_tokens"):
            return 200, {"input_tokens": 7}, {}
        if status != 200:
            return status, {"type": "error", "error": error}, {}
        return 200, {"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
                     "content": content or [{"type": "text", "text": "positive"}], "stop_reason": "end_turn",
                     "stop_sequence": None, "usage": {"input_tokens": 20, "output_tokens": 4}}, {}

    return http_server(route)


def _sent(srv) -> dict:
    posts = [r for r in srv.requests if r["path"].startswith("/v1/messages") and "count_tokens" not in r["path"]]
    assert len(posts) == 1
    return posts[0]["body"]


@pytest.mark.parametrize(("model_id", "reasoning", "extra"), [
    # 4.5-era: temperature taken; manual thinking with a budget
    ("claude-haiku-4-5", 0, {"temperature": 0.0}),
    ("claude-haiku-4-5-20251001", 2048, {"max_tokens": 16 + 2048, "thinking": {"type": "enabled", "budget_tokens": 2048}}),
    ("claude-opus-4-5", 0, {"temperature": 0.0}),
    ("claude-sonnet-4-6", 1024, {"max_tokens": 16 + 1024, "thinking": {"type": "enabled", "budget_tokens": 1024}}),
    # Opus 4.7 / 4.8: no temperature, thinking off unless asked, adaptive when asked
    ("claude-opus-4-7", 0, {}),
    ("claude-opus-4-8", 1024, {"max_tokens": 16 + 1024, "thinking": {"type": "adaptive", "display": "summarized"}}),
    # 5.x: thinking on by default -> turned off the way each model takes it
    ("claude-sonnet-5", 0, {"thinking": {"type": "disabled"}}),
    ("claude-opus-5", 0, {"thinking": {"type": "disabled"}}),
    ("claude-haiku-5-5", 0, {"thinking": {"type": "disabled"}}),
    ("claude-sonnet-5-5", 0, {"thinking": {"type": "between_tools"}}),
    ("claude-sonnet-5-5", 4096, {"max_tokens": 16 + 4096, "thinking": {"type": "adaptive", "display": "summarized"}}),
    # always thinking: lowest effort without an allowance; an allowance below 1024 is fine (no budget)
    ("claude-opus-5-5", 0, {"output_config": {"effort": "low"}}),
    ("claude-fable-5-2", 0, {"output_config": {"effort": "low"}}),
    ("claude-mythos-5-1-latest", 0, {"output_config": {"effort": "low"}}),
    ("claude-opus-5-5", 512, {"max_tokens": 16 + 512, "thinking": {"type": "adaptive", "display": "summarized"}}),
    # not in the table: today's request
    ("claude-nova-7", 0, {"temperature": 0.0}),
    ("claude-nova-7", 1024, {"max_tokens": 16 + 1024, "thinking": {"type": "enabled", "budget_tokens": 1024}}),
])
@pytest.mark.filterwarnings("error::DeprecationWarning")  # issue #29 §11: the SDK's warning showed in the test run
def test_exact_request_body_per_model(http_server, model_id, reasoning, extra):
    import contextlib

    from anthropic.resources.messages import DEPRECATED_MODELS

    srv = _server(http_server)
    m = AnthropicModel(model_id, api_key="k", base_url=srv.url, reasoning_tokens=reasoning)
    # the SDK warns for a model it lists as deprecated (claude-opus-4-5: end of life 2027-01-22); expected here
    retiring = pytest.warns(DeprecationWarning, match=f"'{model_id}' is deprecated") if model_id in DEPRECATED_MODELS else contextlib.nullcontext()
    with retiring:
        g = m.generate(MSGS, max_tokens=16)
    assert _sent(srv) == {"model": model_id, **BASE, **extra}
    assert g.text == "positive"
    # what run.json records is what went on the wire
    sent = {k: v for k, v in extra.items() if k != "max_tokens"}
    assert m.request_options == {"max_tokens_added": reasoning, "send": sent,
                                 "rules": None if model_id == "claude-nova-7" else model_id.replace("-20251001", "").replace("-latest", "")}


def test_every_priced_model_has_request_rules():
    from rizz.adapters.models.anthropic_backend import PRICES_USD_PER_MTOK

    assert set(PRICES_USD_PER_MTOK) <= set(REQUEST_RULES)
    no_temperature = [k for k, r in REQUEST_RULES.items() if not r.sampling]
    assert "claude-opus-4-7" in no_temperature and "claude-haiku-4-5" not in no_temperature


def test_manual_budget_floor_only_where_the_budget_is_manual():
    with pytest.raises(ValueError, match="1024.*claude-haiku-4-5"):
        AnthropicModel("claude-haiku-4-5", api_key="k", reasoning_tokens=500)
    assert request_options("claude-sonnet-5", 500, 0.0)["send"] == {"thinking": {"type": "adaptive", "display": "summarized"}}
    assert request_options("claude-haiku-4-5", 0, None)["send"] == {}  # temperature=None omits it


def test_thinking_before_text_stays_out_of_the_answer_on_a_5x_model(http_server):
    # adaptive thinking on Sonnet 5.5: thinking blocks come first; one summarized, one omitted (empty)
    content = [{"type": "thinking", "thinking": "Glowing words: positive.", "signature": "s1"},
               {"type": "thinking", "thinking": "", "signature": "s2"},
               {"type": "text", "text": "positive"}]
    srv = _server(http_server, content)
    g = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=srv.url, reasoning_tokens=2048).generate(MSGS, max_tokens=16)
    assert g.text == "positive"
    assert g.reasoning == "Glowing words: positive.\n\n[omitted thinking]"
    assert g.cost_usd == pytest.approx((20 * 2 + 4 * 10) / 1e6)


@pytest.mark.parametrize(("message", "param"), [
    ("`temperature` is deprecated for this model.", "temperature"),
    ('"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
     '"output_config.effort" to control thinking behavior.', "thinking.type.enabled"),
    ('"thinking.type.disabled" is not supported for this model.', "thinking.type.disabled"),
])
def test_a_400_names_the_model_and_the_field(http_server, message, param):
    srv = _server(http_server, status=400, error={"type": "invalid_request_error", "message": message})
    m = AnthropicModel("claude-nova-7", api_key="k", base_url=srv.url)
    with pytest.raises(ModelRequestError) as info:
        m.generate(MSGS, max_tokens=16)
    text = str(info.value)
    assert text.startswith(f"anthropic:claude-nova-7: the Messages API rejected `{param}` (HTTP 400")
    assert "not in the table" in text and isinstance(info.value.__cause__, anthropic.BadRequestError)
    assert rejected_parameter(message) == param


def test_a_404_for_an_unknown_model_id_is_a_clear_refusal(http_server):
    srv = _server(http_server, status=404, error={"type": "not_found_error", "message": "model: claude-nova-7"})
    with pytest.raises(ModelRequestError, match=r"anthropic:claude-nova-7: the Messages API refused the request \(HTTP 404 not_found_error"):
        AnthropicModel("claude-nova-7", api_key="k", base_url=srv.url).generate(MSGS, max_tokens=16)
    assert len(srv.requests) == 1  # not retried


def test_cli_run_stops_on_a_400_without_a_traceback_and_keeps_finished_steps(tmp_path, http_server, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import run_refused_second

    def route(method, path, body):
        if path.startswith("/v1/messages/count_tokens"):
            return 200, {"input_tokens": 7}, {}
        if "Review 0" not in json.dumps(body):  # the second element's calls are refused
            return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": "`temperature` is deprecated for this model."}}, {}
        return 200, {"id": "m", "type": "message", "role": "assistant", "model": body["model"],
                     "content": [{"type": "text", "text": "positive"}], "stop_reason": "end_turn",
                     "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}, {}

    srv = http_server(route)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    code, err, steps = run_refused_second(tmp_path, monkeypatch, "anthropic:claude-nova-7")
    assert code == 2, err
    assert "anthropic:claude-nova-7: the Messages API rejected `temperature`" in err
    assert "run the same command again to resume" in err and "Traceback" not in err
    assert [s.get("id") for s in steps if s.get("kind", "step") == "step"][:1] == ["r0"]
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["request_options"] == {"max_tokens_added": 0, "rules": None, "send": {"temperature": 0.0}}
