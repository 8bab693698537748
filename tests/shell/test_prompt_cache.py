"""Issue #27 §4: evaluated prompt tokens per call (what the backend evaluated, not what it was
sent), the cache-friendly layout, and the stable prefix marked cacheable for Anthropic."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rizz.adapters.models import Generation, Message
from rizz.adapters.models.anthropic_backend import AnthropicModel, cache_min_tokens, price_usd
from rizz.core.compiler import compile_prompt, prompt_blocks
from rizz.core.retrieval import Retrieved
from rizz.engine.render import render, stable_prefix
from rizz.formats.logrecord import CallPart, LogRecord, unstructure
from rizz.formats.policy_file import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_models_anthropic import KEY, message_body  # noqa: E402


def _prompt(policy_name: str, instruction: str = "Classify the stance of the text. " * 200):
    pol = load_policy(policy_name)
    blocks = prompt_blocks(Retrieved((), (), (), (), ()), "the current input", instruction, "some evidence")
    return compile_prompt(blocks, pol.compiler, lambda t: len(t) // 4, 60000)


def test_the_prefix_cache_layout_leads_with_the_stable_blocks_and_render_marks_them():
    default, cached = _prompt("default"), _prompt("prefix-cache")
    assert [s.block for s in cached.sections][:1] == ["instruction"]  # preamble: only with memory shown
    assert load_policy("prefix-cache").compiler.layout[:3] == ("preamble", "instruction", "rules")
    for rendering in ("raw", "chat"):
        (msg,) = render(cached, "label", rendering)
        pre = stable_prefix(cached)
        assert pre.startswith("Classify the stance") and msg.content.startswith(pre) and msg.cache_prefix == len(pre)
        assert msg == Message("user", msg.content)  # a hint only: equality, and the response-cache key, ignore it
    (turns,) = render(cached, "label", "chat-turns")
    assert turns.cache_prefix == 0
    # default's layout puts evidence right after the instruction; its prefix is the instruction alone
    assert stable_prefix(default) == default.sections[0].text() and default.sections[1].block == "evidence"


def test_the_anthropic_backend_sends_the_stable_prefix_as_a_cached_block_and_prices_the_usage(http_server):
    body = message_body("against", n_in=40, n_out=2)
    body["usage"].update(cache_creation_input_tokens=0, cache_read_input_tokens=5000)
    srv = http_server(lambda method, path, b: (200, body, {}))
    m = AnthropicModel(api_key=KEY, base_url=srv.url)
    prefix = "Classify the stance of the text. " * 600  # ~5,700 estimated tokens, above Haiku 4.5's 4,096
    msg = Message("user", prefix + "\n\nThe text: ...", cache_prefix=len(prefix))
    g = m.generate([msg], max_tokens=8)
    sent = [r for r in srv.requests if r["path"].startswith("/v1/messages")][-1]["body"]["messages"][0]["content"]
    assert sent == [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "\n\nThe text: ..."}]
    assert "".join(b["text"] for b in sent) == msg.content  # the same text, in two blocks
    assert (g.prompt_tokens, g.evaluated_prompt_tokens) == (5040, 40)
    assert g.cost_usd == pytest.approx((40 * 1.0 + 5000 * 0.1 + 2 * 5.0) / 1e6)
    assert price_usd("claude-haiku-4-5", 40, 2, cache_write=100) == pytest.approx((40 + 125 + 10) / 1e6)
    short = Message("user", "Short prefix. Then the text.", cache_prefix=13)
    m.generate([short], max_tokens=8)  # below the model's minimum: sent as one plain string
    assert [r for r in srv.requests if r["path"].startswith("/v1/messages")][-1]["body"]["messages"][0]["content"] == short.content
    assert cache_min_tokens("claude-haiku-4-5-20251001") == 4096 and cache_min_tokens("claude-fable-5-2") == 1024


def test_an_openai_compatible_servers_cached_tokens_are_not_counted_as_evaluated(http_server):
    from rizz.adapters.models.openai_backend import OpenAICompatModel

    reply = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 900, "completion_tokens": 1, "total_tokens": 901,
                       "prompt_tokens_details": {"cached_tokens": 768}}}

    def route(method, path, b):
        if path.endswith("/models"):
            return 200, {"data": [{"id": "m"}]}, {}
        if path.endswith("/chat/completions"):
            return 200, reply, {}
        return 404, {}, {}

    srv = http_server(route)
    g = OpenAICompatModel(srv.url, "m", max_retries=0).generate([Message("user", "q")], max_tokens=4)
    assert (g.prompt_tokens, g.evaluated_prompt_tokens) == (900, 132)
    del reply["usage"]["prompt_tokens_details"]
    g = OpenAICompatModel(srv.url, "m", max_retries=0).generate([Message("user", "q")], max_tokens=4)
    assert g.evaluated_prompt_tokens is None and g.evaluated == 900


def test_a_call_records_evaluated_tokens_only_when_fewer_were_evaluated():
    full = Generation("a", 100, 2, 0.1, None, "m", "stop", evaluated_prompt_tokens=100)
    part = Generation("a", 100, 2, 0.1, None, "m", "stop", evaluated_prompt_tokens=30)
    hit = Generation("a", 100, 2, 0.0, None, "m", "stop", cached=True, evaluated_prompt_tokens=30)
    calls = [CallPart.of("answer", g) for g in (full, part, hit)]
    assert [c.evaluated_tokens for c in calls] == [None, 30, None]
    assert [c.evaluated for c in calls] == [100, 30, 0]  # a response-cache hit evaluates nothing
    line = unstructure(LogRecord(step=0, id="x", v=2, kind="verdict", calls=[calls[0], calls[1]]))
    assert "evaluated_tokens" not in line["calls"][0] and line["calls"][1]["evaluated_tokens"] == 30


def test_summary_json_totals_sent_and_evaluated_prompt_tokens(tmp_path):
    from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream

    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.engine.run import run_stream

    class HalfCached(ArithmeticModel):
        def generate(self, messages, **kw):
            g = super().generate(messages, **kw)
            return Generation(g.text, g.prompt_tokens, g.completion_tokens, g.latency_s, g.cost_usd, g.model, g.finish_reason,
                              evaluated_prompt_tokens=g.prompt_tokens // 2)

    stream = arithmetic_stream(tmp_path / "s.jsonl", 12)
    out = tmp_path / "r"
    out.mkdir()
    with ResponseCache(out / "responses.sqlite") as cache:
        s = run_stream(stream, load_policy("default"), "default", out, CachedModel(HalfCached(), cache), HashEmbedder(),
                       rendering="chat", log=lambda m: None)
    calls = [c for ln in (out / "log.jsonl").read_text().splitlines() for c in json.loads(ln).get("calls", [])]
    sent = sum(c["prompt_tokens"] for c in calls if not c["cached"])
    assert s["prompt_tokens_sent"] == sent > 0 and s["prompt_tokens"] >= sent
    assert s["prompt_tokens_evaluated"] == sum(c.get("evaluated_tokens", c["prompt_tokens"]) for c in calls if not c["cached"])
    assert s["prompt_tokens_evaluated"] < s["prompt_tokens_sent"]
