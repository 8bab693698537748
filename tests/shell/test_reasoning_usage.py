"""Issue #12 §1 (reasoning replies) and §3 (honest usage), through the real SDK client paths.

The OpenAI-compatible cases run the ``openai`` SDK against a scripted local server speaking
the ``/v1/chat/completions`` wire format (the shapes vLLM / llama.cpp send for reasoning
models); the Anthropic ones run the ``anthropic`` SDK against a local Messages server.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from rizz.adapters.models import Message, load_model
from rizz.adapters.models.anthropic_backend import AnthropicModel, price_usd
from rizz.adapters.models.base import MESSAGE_FRAME_TOKENS, REPLY_PRIMING_TOKENS
from rizz.adapters.models.openai_backend import OpenAICompatModel
from rizz.adapters.models.reasoning import split_reasoning
from rizz.adapters.models.spec import split_options
from rizz.adapters.verifiers import extract_answer, verify
from rizz.core import Policy
from rizz.engine.run import summarise
from rizz.engine.session import Session
from rizz.formats.streams import element_from_json

THINK_REPLY = "<think>Let me think step by step about what is asked here.</think>\npositive"

# Every inline form of reasoning the issue names, with the answer that must remain.
INLINE = [
    (THINK_REPLY, "positive"),
    ("<thinking>\nThe text praises it.\n</thinking>\n\npositive", "positive"),
    ("<THINK>upper case tag</THINK>positive", "positive"),
    ("The template opened the tag.\n</think>\n\npositive", "positive"),  # DeepSeek-R1 style
    ("<think>a</think> <think>b</think>\npositive", "positive"),
    ("<think>Cut by max_tokens while still thinking about positive", ""),
]


@pytest.mark.parametrize(("raw", "answer"), INLINE)
def test_inline_reasoning_is_never_the_answer(raw, answer):
    text, reasoning = split_reasoning(raw)
    assert text == answer
    assert reasoning and "<" not in reasoning
    assert extract_answer(raw, "label").answer == answer
    reward = verify("label_match", raw, "positive").reward
    assert reward == (1.0 if answer else 0.0)


def test_the_issue_example_scores_one_under_every_verifier_reading_text():
    for name in ("exact_match", "label_match", "fuzzy_ratio", "rouge_l", "token_f1"):
        assert verify(name, THINK_REPLY, "positive", shape="label").reward == 1.0, name
    assert verify("exact_match", "<think>Maybe C? No.</think>\nB", "B", shape="letter").reward == 1.0
    assert verify("exact_match", "<think>7 or 8</think>\n42", "42", shape="number").reward == 1.0
    code = "<think>def wrong(): pass</think>\n```python\ndef add(a, b):\n    return a + b\n```"
    assert extract_answer(code, "code").answer == "def add(a, b):\n    return a + b"
    judged = verify("llm_judge", "Paris", "Paris", judge=lambda p: "<think>no, hmm</think>yes")
    assert judged.reward == 1.0


def test_no_reasoning_leaves_text_unchanged():
    for raw in ("a < b and c > d", "plain\n", "  B  ", "x <thinker> y"):
        assert split_reasoning(raw) == (raw, "")


# ------------------------------------------------------------------ OpenAI-compatible server
def _chat_server(http_server, message: dict, usage: dict | None, finish: str = "stop"):
    def route(method, path, body):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "r1", "object": "model",
                                                     "created": 0, "owned_by": "x"}]}, {}
        if path == "/v1/chat/completions":
            out = {"id": "c1", "object": "chat.completion", "created": 0, "model": "r1",
                   "choices": [{"index": 0, "finish_reason": finish,
                                "message": dict({"role": "assistant"}, **message)}]}
            if usage is not None:
                out["usage"] = usage
            return 200, out, {}
        return 404, {"error": "not found"}, {}

    return http_server(route)


USAGE = {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}


def test_openai_think_block_and_reasoning_content(http_server):
    srv = _chat_server(http_server, {"content": THINK_REPLY}, USAGE)
    g = OpenAICompatModel(srv.url, max_retries=0).generate([Message("user", "Sentiment?")], max_tokens=8)
    assert (g.text, g.reply, g.usage_estimated) == ("positive", THINK_REPLY, False)
    assert g.reasoning == "Let me think step by step about what is asked here."
    srv2 = _chat_server(http_server, {"content": "positive", "reasoning_content": "It praises."}, USAGE)
    g2 = OpenAICompatModel(srv2.url, max_retries=0).generate([Message("user", "x")], max_tokens=8)
    assert (g2.text, g2.reasoning, g2.raw) == ("positive", "It praises.", None)


def test_openai_unclosed_think_cut_by_max_tokens(http_server):
    srv = _chat_server(http_server, {"content": "<think>still going and going"}, USAGE, "length")
    g = OpenAICompatModel(srv.url, max_retries=0).generate([Message("user", "x")], max_tokens=8)
    assert (g.text, g.reasoning, g.finish_reason) == ("", "still going and going", "length")


def test_openai_reasoning_allowance_is_sent_and_named(http_server):
    srv = _chat_server(http_server, {"content": "positive"}, USAGE)
    m = load_model(f"openai:{srv.url}#r1?reasoning=1024", max_retries=0)
    assert m.name.endswith("#r1?reasoning=1024") and m.reasoning_tokens == 1024
    m.generate([Message("user", "x")], max_tokens=8)
    body = [r for r in srv.requests if r["path"] == "/v1/chat/completions"][-1]["body"]
    assert body["max_tokens"] == 8 + 1024


@pytest.mark.parametrize("bad", ["embedded?reasoning=x", "embedded?reasoning=-1", "embedded?think=5",
                                 "embedded?reasoning=1&reasoning=2", "embedded?reasoning=999999"])
def test_bad_spec_options_are_refused(bad):
    with pytest.raises(ValueError, match="bad model spec"):
        split_options(bad)


def test_missing_usage_is_counted_and_flagged(http_server):
    """The issue's example: no ``usage`` -> never a silent 0."""
    srv = _chat_server(http_server, {"content": "positive", "reasoning_content": "four words of thought"}, None)
    m = OpenAICompatModel(srv.url, max_retries=0)  # no tokenizer route: the documented estimate
    g = m.generate([Message("system", "Be brief."), Message("user", "Is this review positive?")], max_tokens=8)
    assert g.usage_estimated is True
    # the prompt as sent: contents, a frame a message, the reply's priming (estimated template)
    assert g.prompt_tokens == (m.count_tokens("Be brief.") + m.count_tokens("Is this review positive?")
                               + 2 * MESSAGE_FRAME_TOKENS + REPLY_PRIMING_TOKENS)
    m.sent_counter = lambda messages, rendering: 41  # a served file's template: exact
    assert m.generate([Message("user", "Is this review positive?")], max_tokens=8).prompt_tokens == 41
    assert g.completion_tokens == m.count_tokens("positive") + m.count_tokens("four words of thought") > 0
    srv2 = _chat_server(http_server, {"content": "positive"}, USAGE)
    g2 = OpenAICompatModel(srv2.url, max_retries=0).generate([Message("user", "x")], max_tokens=8)
    assert (g2.prompt_tokens, g2.completion_tokens, g2.usage_estimated) == (30, 12, False)


class OneHot:
    """Embeds every text to the same unit vector (8 dims): one element, one branch, no hashing."""

    name, dim = "onehot", 8

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        out[:, 0] = 1.0
        return out


def _answered(model, element: dict):
    """(session, pending): a chat-rendering Session over ``model`` and :class:`OneHot` that has
    answered ``element`` (one stream line's JSON object)."""
    session = Session(Policy(), model, OneHot(), rendering="chat")
    return session, session.answer(element_from_json(element))


def test_summary_flags_estimated_usage_and_counts_every_call_kind(http_server, fake_model):
    srv = _chat_server(http_server, {"content": THINK_REPLY}, None)
    model = OpenAICompatModel(srv.url, max_retries=0)
    session, p = _answered(model, {"id": "q1", "input": "Great film!", "metadata": {"shape": "label"},
                                   "reference": "positive", "verifier": "label_match"})
    assert p.answer == "positive" and p.raw_output == THINK_REPLY and p.reasoning
    verdict = session.verify(p)
    assert verdict.reward == 1.0
    calls = p.calls + session.fold(p, verdict).calls  # the answer's calls, then the fold's
    assert calls and all(c.usage_estimated and c.prompt_tokens > 0 for c in calls)
    recs = [{"step": 0, "task": None, "verdict": {"reward": 1.0},
             "calls": [{"kind": c.kind, "prompt_tokens": c.prompt_tokens, "completion_tokens":
                        c.completion_tokens, "cost_usd": c.cost_usd, "cached": c.cached,
                        "usage_estimated": c.usage_estimated} for c in calls]}]
    s = summarise(recs, session.state, {})
    assert s["usage_estimated"] is True and s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
    old = [dict(recs[0], calls=[{k: v for k, v in c.items() if k != "usage_estimated"} for c in recs[0]["calls"]])]
    assert summarise(old, session.state, {})["usage_estimated"] is False  # logs from before the flag


def test_llm_judge_verifier_calls_are_counted(fake_model):
    model = fake_model(["Paris", "yes"])
    session, p = _answered(model, {"id": "q", "input": "Capital of France?", "metadata": {"shape": "span"},
                                   "reference": "Paris", "verifier": "llm_judge"})
    v = session.verify(p)
    _, _, calls = session.fold(p, v)
    assert v.reward == 1.0
    assert [c.kind for c in calls].count("verify") == 1


# ------------------------------------------------------------------ Anthropic Messages server
def _messages_server(http_server, content: list, usage: dict | None):
    def route(method, path, body):
        if path.startswith("/v1/messages/count_tokens"):
            return 200, {"input_tokens": 7}, {}
        if path.startswith("/v1/messages"):
            out = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": content, "stop_reason": "end_turn", "stop_sequence": None}
            if usage is not None:
                out["usage"] = usage
            return 200, out, {}
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}, {}

    return http_server(route)


def test_anthropic_thinking_blocks_are_reasoning_and_thinking_is_requested(http_server):
    content = [{"type": "thinking", "thinking": "The review is glowing.", "signature": "sig"},
               {"type": "redacted_thinking", "data": "xxx"},
               {"type": "text", "text": "positive"}]
    srv = _messages_server(http_server, content, {"input_tokens": 100, "output_tokens": 1500})
    m = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=srv.url, reasoning_tokens=1024)
    g = m.generate([Message("user", "Sentiment?")], max_tokens=8)
    assert g.text == "positive" and "The review is glowing." in g.reasoning
    assert g.cost_usd == pytest.approx((100 * 3 + 1500 * 15) / 1e6)
    body = [r for r in srv.requests if r["path"].startswith("/v1/messages")][-1]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 8 + 1024 and "temperature" not in body
    assert m.name == "anthropic:claude-sonnet-4-6?reasoning=1024"
    with pytest.raises(ValueError, match="1024"):
        AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=srv.url, reasoning_tokens=500)


def test_anthropic_missing_usage_is_counted_and_priced(http_server):
    srv = _messages_server(http_server, [{"type": "text", "text": "Paris"}], None)
    m = AnthropicModel("claude-haiku-4-5", api_key="k", base_url=srv.url, token_counting="estimate")
    g = m.generate([Message("user", "Capital of France?")], max_tokens=8)
    assert g.usage_estimated and g.prompt_tokens > 0 and g.completion_tokens > 0
    assert g.cost_usd == price_usd("claude-haiku-4-5", g.prompt_tokens, g.completion_tokens) > 0


@pytest.mark.parametrize(("model_id", "per_mtok"), [
    ("claude-haiku-4-5", (1, 5)), ("claude-haiku-4-5-20251001", (1, 5)), ("claude-sonnet-4-6", (3, 15)),
    ("claude-opus-4-5", (5, 25)), ("claude-opus-4-5-20251101", (5, 25)), ("claude-sonnet-5-5-latest", (2, 10)),
    ("claude-opus-5-5", (4, 20)),
])
def test_price_table(model_id, per_mtok):
    assert price_usd(model_id, 1_000_000, 1_000_000) == pytest.approx(sum(per_mtok))


@pytest.mark.parametrize("model_id", ["claude-haiku-5-5", "claude-haiku-4-5-fast", "gpt-4o", "claude-opus-4-5x"])
def test_unknown_ids_have_no_price(model_id):
    assert price_usd(model_id, 1000, 1000) is None


def test_old_cache_rows_are_split_on_read(tmp_path, fake_model):
    """A response cached before reasoning was split off is served without its <think> block."""
    from rizz.adapters.models.cache import CachedModel, ResponseCache, cache_key

    cache = ResponseCache(tmp_path / "r.sqlite")
    backend = fake_model(["unused"])
    msgs = [Message("user", "x")]
    key = cache_key(backend.name, msgs, "chat", 8, (), 0.0)
    from rizz.adapters.models import Generation
    cache.put(key, Generation(THINK_REPLY, 3, 9, 0.1, None, backend.name, "stop"))
    row = json.loads(cache._db.execute("SELECT generation FROM responses").fetchone()[0])
    row.pop("reasoning"), row.pop("raw"), row.pop("usage_estimated")  # the old schema
    cache._db.execute("UPDATE responses SET generation = ?", (json.dumps(row),))
    g = CachedModel(backend, cache).generate(msgs, max_tokens=8)
    assert (g.text, g.cached, g.reply) == ("positive", True, THINK_REPLY)
    assert backend.calls == []


def test_judge_label_and_distilled_rules_never_read_reasoning(fake_model):
    """Even from a backend that leaves <think> blocks in ``text`` (a custom one)."""
    from rizz.engine.distill import distill_rules
    from rizz.engine.judge import label_input

    think = '<think>{"function": "write-code", "application": "python"} IF x THEN y</think>\n'
    jl = label_input(fake_model([think + '{"function": "classify-sentiment", "application": "movie-reviews"}']),
                     "Great film!")
    assert (jl.function, jl.application) == ("classify", "movie-reviews")  # not write-code/python
    res = distill_rules(fake_model([think + "IF the review praises THEN answer positive"]),
                        [("Great film!", "positive")], function="classify-sentiment", application="movie-reviews")
    assert [(r.antecedent, r.strategy) for r in res.rules] == [("the review praises", "answer positive")]


def test_reasoning_allowance_is_recorded_in_run_json_and_leaves_room_in_the_budget(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream

    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    model = ArithmeticModel()
    model.reasoning_tokens = 512
    model.name = "stub:arithmetic?reasoning=512"
    run_stream(arithmetic_stream(tmp_path / "s.jsonl", 3), load_policy("default"), "default", tmp_path / "r",
               model, HashEmbedder(), rendering="chat", log=lambda m: None)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (meta["reasoning_tokens"], meta["model"]) == (512, "stub:arithmetic?reasoning=512")
    from rizz.engine.answering import budget

    assert budget(Policy(), ArithmeticModel(), "number", None) - budget(Policy(), model, "number", None) == 512


def test_a_bad_model_spec_leaves_no_run_dir(tmp_path):
    from typer.testing import CliRunner

    from rizz.apps import cli

    stream = tmp_path / "s.jsonl"
    stream.write_text('{"id": "a", "input": "x"}\n')
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(tmp_path / "r"), "--model", "embedded?reasoning=x"])
    assert res.exit_code == 2 and "bad model spec" in res.output + (res.stderr if res.stderr_bytes else "")
    assert not (tmp_path / "r").exists()


def test_a_bad_model_spec_is_refused_before_loading_is_said(tmp_path):
    """A newcomer saw "loading the model embedded:nosuch ..." before the refusal: the spec is
    checked with the other options, for run and bench, and names its flag."""
    from typer.testing import CliRunner

    from rizz.adapters.models.spec import check_spec
    from rizz.apps import cli

    stream = tmp_path / "s.jsonl"
    stream.write_text('{"id": "a", "input": "x", "reference": "y"}\n')
    for argv, flag in ((["run", str(stream), "--out", str(tmp_path / "r"), "--model", "embedded:nosuch"], "--model"),
                       (["bench", str(stream), "-P", "frozen", "--out", str(tmp_path / "b"), "--model", "foo:bar"], "--model"),
                       (["run", str(stream), "--out", str(tmp_path / "r"), "--user-model", "gguf:"], "--user-model")):
        res = CliRunner().invoke(cli.app, argv)
        said = res.output + (res.stderr if res.stderr_bytes else "")
        assert res.exit_code == 2 and f"{flag}: bad model spec" in said and "loading the model" not in said, said
    assert not (tmp_path / "r").exists() and not (tmp_path / "b").exists()
    for ok in ("embedded", "embedded:qwen2.5-coder-0.5b-instruct?kv_reuse=0", "gguf:/x.gguf", "anthropic", "openai:http://h:1#m", "oracle"):
        check_spec(ok)  # what load_model accepts passes (nothing is loaded)
    for bad in ("", "oracle?reasoning=4", "anthropic?kv_reuse=1", "openai:h", "oracle:x"):
        with pytest.raises(ValueError, match="bad model spec"):
            check_spec(bad)


def test_the_issue_examples_end_to_end_six_reasoning_replies_without_usage(tmp_path, http_server):
    """§1 + §3 as reported: six `label_match` elements through `run_stream` and the OpenAI SDK
    against a local server that thinks aloud and returns no `usage`. Before: 0/6 and 0 tokens."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import HashEmbedder

    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    srv = _chat_server(http_server, {"content": THINK_REPLY}, None)
    stream = tmp_path / "s.jsonl"
    stream.write_text("".join(json.dumps({"id": f"r{i}", "input": f"Review {i}: a wonderful film.",
                                          "metadata": {"shape": "label", "task": "sst"},
                                          "reference": "positive", "verifier": "label_match"}) + "\n"
                              for i in range(6)))
    model = OpenAICompatModel(srv.url, max_retries=0)
    summary = run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "run", model, HashEmbedder(),
                         log=lambda m: None)
    assert summary["answered"] == 6 and summary["mean_reward"] == 1.0
    assert summary["usage_estimated"] is True
    assert summary["prompt_tokens"] > 0 and summary["completion_tokens"] > 0
    recs = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert all(r["answer"]["raw"] == THINK_REPLY and r["answer"]["extracted"] == "positive" for r in recs)
    assert all(r["answer"]["reasoning"].startswith("Let me think") for r in recs)
    assert all(c["usage_estimated"] for r in recs for c in r["calls"])
