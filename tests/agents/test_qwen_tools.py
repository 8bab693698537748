"""Tool calls through an embedded GGUF's own chat template (Qwen2.5's ``<tool_call>`` blocks).

Fast tests: the parser on replies shaped as Qwen writes them (the bare and fenced objects are
the 0.5B's own replies to BFCL items), the template's rendering of ``tools`` (a copy of
Qwen2.5-Coder-0.5B-Instruct's ``tokenizer.chat_template`` in ``tests/fixtures``, rendered by
llama-cpp-python's own formatter), the agent choice, and whole episodes through a stub model
that renders that template (then replay without it). Model tests: the shipped 0.5B.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rizz.adapters.agents.episode import ToolEpisode
from rizz.adapters.agents.qwen_tools import ParsedReply, parse_tool_calls, template_calls_tools
from rizz.adapters.models import Generation, Message
from rizz.engine.model_agent import GREETING
from rizz.engine.native_agent import native_kind
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream
from tests.agents.conftest import StubModel

ROOT = Path(__file__).resolve().parents[2]
QWEN = (ROOT / "tests" / "fixtures" / "qwen2.5-chat-template.jinja").read_text()
#: SmolLM2-135M-Instruct's template (its GGUF's tokenizer.chat_template): no tools.
SMOL = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
        "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\n' }}{% endif %}")
BFCL = {e.id: e for e in read_stream(ROOT / "data" / "bfcl-mini" / "test.jsonl").elements}
TAU = read_stream(ROOT / "data" / "tau-bench-mini" / "test.jsonl").elements[0]
GOLD = json.loads(TAU.reference)


def _block(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


# ---- the parser ----------------------------------------------------------------------------

def test_one_call_block() -> None:
    r = parse_tool_calls(_block("calculate_emissions", {"distance": 12000, "fuel_type": "gas"}))
    assert r == ParsedReply("", (("calculate_emissions", {"distance": 12000, "fuel_type": "gas"}),), None)


def test_two_call_blocks_keep_their_order() -> None:
    text = _block("financial_compound_interest", {"principle": 5000}) + "\n" + _block("financial_simple_interest", {"rate": 0.035})
    r = parse_tool_calls(text)
    assert [n for n, _ in r.calls] == ["financial_compound_interest", "financial_simple_interest"] and r.error is None


def test_text_around_a_call_is_the_message() -> None:
    r = parse_tool_calls("I will look the order up.\n" + _block("get_order_details", {"order_id": "#W1"}) + "\nOne moment.")
    assert r.message == "I will look the order up.\n\nOne moment."
    assert r.calls == (("get_order_details", {"order_id": "#W1"}),)


def test_a_reply_without_a_call_is_a_message() -> None:
    assert parse_tool_calls("Your order has shipped.") == ParsedReply("Your order has shipped.", (), None)
    assert parse_tool_calls('The answer is {"gcd": 6}.').calls == ()  # JSON that is no call object


@pytest.mark.parametrize("text", [
    # the 0.5B's replies, verbatim (bfcl-simple_python_200 and bfcl-parallel_multiple_100)
    '{"name": "calculate_emissions", "arguments": {"distance": 12000, "fuel_type": "gas-fueled", "fuel_efficiency": 25}}',
    '```json\n{\n  "name": "calculate_emissions",\n  "arguments": {\n    "distance": 12000,\n    "fuel_type": "gas-fueled",\n'
    '    "fuel_efficiency": 25\n  }\n}\n```',
])
def test_a_bare_or_fenced_call_object_is_a_call(text: str) -> None:
    r = parse_tool_calls(text)
    assert r.calls == (("calculate_emissions", {"distance": 12000, "fuel_type": "gas-fueled", "fuel_efficiency": 25}),)
    assert r.message == "" and r.error is None


def test_several_objects_or_a_list_in_one_block_and_string_arguments() -> None:
    one = parse_tool_calls('<tool_call>\n{"name": "a", "arguments": {}}\n{"name": "b", "arguments": "{\\"x\\": 1}"}\n</tool_call>')
    assert one.calls == (("a", {}), ("b", {"x": 1}))
    assert parse_tool_calls('<tool_call>[{"name": "a"}, {"name": "b", "arguments": {"y": 2}}]</tool_call>').calls == (
        ("a", {}), ("b", {"y": 2}))


def test_an_unclosed_last_block_still_parses_when_whole() -> None:
    assert parse_tool_calls('<tool_call>\n{"name": "a", "arguments": {"x": 1}}').calls == (("a", {"x": 1}),)
    cut = parse_tool_calls('<tool_call>\n{"name": "a", "arguments": {"x": ')  # cut by max_tokens
    assert cut.calls == () and cut.error.startswith("malformed call:") and "is not JSON" in cut.error


@pytest.mark.parametrize("body, words", [
    ('{"name": "a", "arguments": {"x": 1,}}', "is not JSON"),
    ('{"name": "a", "arguments": [1, 2]}', "arguments of a are not a JSON object"),
    ('{"name": "a", "arguments": "[1"}', "arguments of a are not a JSON object"),
    ('{"function": "a"}', 'is not a call object with a string "name"'),
    ("", "is not JSON"),
])
def test_malformed_blocks_make_the_reply_a_malformed_call(body: str, words: str) -> None:
    r = parse_tool_calls("Calling.\n<tool_call>\n" + body + "\n</tool_call>" + _block("b", {}))
    assert r.calls == () and r.error.startswith("malformed call: ") and words in r.error, r.error


def test_the_template_is_recognised_from_its_text() -> None:
    assert template_calls_tools(QWEN)
    assert not template_calls_tools(SMOL) and not template_calls_tools("")


# ---- the template renders the tools ---------------------------------------------------------

def _render(template: str, messages: list[dict[str, str]], tools: list[dict[str, Any]]) -> str:
    fmt = pytest.importorskip("llama_cpp.llama_chat_format")
    return fmt.Jinja2ChatFormatter(template=template, eos_token="<|im_end|>", bos_token="<|endoftext|>")(
        messages=messages, tools=tools).prompt


def test_qwen_template_writes_the_tools_block() -> None:
    tools = [{"type": "function", "function": {"name": "math_gcd", "description": "GCD", "parameters": {"type": "object"}}}]
    prompt = _render(QWEN, [{"role": "user", "content": "GCD of 12 and 18?"}], tools)
    head = prompt.split("<|im_end|>")[0]
    assert head.startswith("<|im_start|>system\nYou are Qwen") and "# Tools" in head
    assert "<tools>\n" + json.dumps(tools[0], ensure_ascii=False) + "\n</tools>" in head
    assert "<tool_call>" in head and prompt.endswith("<|im_start|>user\nGCD of 12 and 18?<|im_end|>\n<|im_start|>assistant\n")
    assert "<tools>" not in _render(SMOL, [{"role": "user", "content": "hi"}], tools)  # SmolLM2 never sees them


# ---- the agent path ---------------------------------------------------------------------------

class TemplateStub(StubModel):
    """An embedded-like model with Qwen's template: ``generate_with_tools`` renders the prompt
    with it (kept in ``rendered``) and replies ``fn(rendered prompt)``."""

    chat_template = QWEN

    def __init__(self, fn: Any, name: str = "embedded:stub-qwen") -> None:
        super().__init__(fn, name)
        self.rendered: list[str] = []

    def generate_with_tools(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, max_tokens: int) -> Generation:
        prompt = _render(self.chat_template, [{"role": m.role, "content": m.content} for m in messages], list(tools))
        self.rendered.append(prompt)
        text = self.fn(prompt)
        return Generation(text, self.count_tokens(prompt), self.count_tokens(text), 0.0, None, self.name, "stop")


def test_native_kind_reads_the_template_not_the_name(tmp_path) -> None:
    from rizz.adapters.models.cache import CachedModel, ResponseCache

    qwen = TemplateStub(lambda p: "")
    assert native_kind(qwen) == "template"
    assert native_kind(CachedModel(qwen, ResponseCache(tmp_path / "c.sqlite"))) == "template"
    smol = TemplateStub(lambda p: "", name="embedded:SmolLM2-135M-Instruct.Q4_1")
    smol.chat_template = SMOL
    assert native_kind(smol) is None
    assert native_kind(StubModel(lambda p: "", name="gguf:qwen")) is None  # no template, no generate_with_tools


def _run(tmp_path, els, model, embedder):
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, els)
    s = run_stream(stream, load_policy("frozen"), "frozen", out, model, embedder, log=lambda m: None, rendering="raw")
    return s, [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()], out


def test_bfcl_dotted_names_go_out_in_api_form_and_come_back(tmp_path, embedder) -> None:
    el = BFCL["bfcl-parallel_multiple_102"]
    reply = ("Both options:\n" + _block("financial_compound_interest", {"principle": 5000, "rate": 0.04, "time": 5, "n": 4})
             + "\n" + _block("financial.simple_interest", {"principle": 5000, "rate": 0.035, "time": 5}))
    model = TemplateStub(lambda p: reply)
    s, (rec,), out = _run(tmp_path, [el], model, embedder)
    listed = model.rendered[0].split("<tools>\n")[1].split("\n</tools>")[0]
    assert [json.loads(t)["function"]["name"] for t in listed.splitlines()] == [
        "financial_compound_interest", "financial_simple_interest"]  # api_name form in the template's tools block
    ep = ToolEpisode.from_json(rec["episode"])
    assert [c.name for c in ep.calls] == ["financial.compound_interest", "financial.simple_interest"]
    assert ep.transcript[1]["text"] == "Both options:" and ep.stop == "done"
    assert rec["verdict"]["reward"] == 1.0 and s["mean_reward"] == 1.0
    assert rec["prompt"]["rendering"] == "chat"  # the template path, whatever --rendering
    assert "with function calling" in model.rendered[0] and "Python call syntax" not in model.rendered[0]
    n = len(model.rendered)
    assert replay(out)["state_digest"] == s["state_digest"] and len(model.rendered) == n  # no model call


def test_under_serve_the_template_calls_wait_in_the_shared_queue(tmp_path, embedder) -> None:
    """``rizz serve`` wraps a model as CachedModel(FairModel(backend)): the template path still
    reaches the embedded backend, in its turn, and the queue's hook counts its tokens."""
    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.apps.serve.tenants import FairModel

    counted: list = []
    stub = TemplateStub(lambda p: _block("math_gcd", {"num1": 12, "num2": 18}))
    fair = FairModel(stub, on_call=lambda tenant, gen, s: counted.append((gen.prompt_tokens, gen.completion_tokens)))
    model = CachedModel(fair, ResponseCache(tmp_path / "responses.sqlite"))
    assert native_kind(model) == "template"
    s, (rec,), _ = _run(tmp_path, [BFCL["bfcl-multiple_101"]], model, embedder)
    assert rec["episode"]["transcript"][1]["calls"] == [["math.gcd", {"num1": 12, "num2": 18}]] and s["mean_reward"] == 1.0
    assert len(counted) == len(stub.rendered) == 1 and counted[0][0] == stub.count_tokens(stub.rendered[0]) > 0
    assert fair.waiting == 0


def test_multi_turn_goes_as_chat_turns_and_a_python_syntax_call_is_read(tmp_path, embedder) -> None:
    """The 1.5B, shown its transcript as one ``User:/Assistant:/Tool`` text, wrote its later calls
    as that text or continued the transcript: through its template the transcript now goes as
    chat turns (calls as ``<tool_call>`` blocks, results as ``<tool_response>``), and a text
    reply that is a Python-syntax call list is read as those calls, up to its first invented
    transcript line."""
    el = BFCL["bfcl-multi_turn_base_100"]

    def reply(prompt: str) -> str:
        turn, results = prompt.count("<|im_start|>user\n") - prompt.count("<|im_start|>user\n<tool_response>"), prompt.count("<tool_response>")
        if turn == 1:
            return _block("get_stock_info", {"symbol": "NVDA"}) if results == 0 else "NVDA trades at 220.34."
        if results == 1:
            return "[fund_account(amount=2203.4)]\nTool fund_account: {\"status\": \"ok\"}\nAssistant: [get_account_info()]"
        return "Funded."

    model = TemplateStub(reply)
    s, (rec,), out = _run(tmp_path, [el], model, embedder)
    events = rec["episode"]["transcript"]
    assert [e["calls"] for e in events if e["role"] == "assistant"] == [
        [["get_stock_info", {"symbol": "NVDA"}]], [], [["fund_account", {"amount": 2203.4}]], []]
    later = model.rendered[2]  # the second user turn's first prompt
    turns = later.split("<|im_start|>")[2:]  # after the template's system turn
    assert [t.split("\n", 1)[0] for t in turns] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert turns[-1] == "assistant\n"  # the generation prompt
    assert turns[0].startswith("user\n") and turns[0].rstrip().endswith(el.input + "<|im_end|>")
    assert turns[1] == 'assistant\n<tool_call>\n{"name": "get_stock_info", "arguments": {"symbol": "NVDA"}}\n</tool_call><|im_end|>\n'
    assert turns[2].startswith("user\n<tool_response>\n") and turns[3] == "assistant\nNVDA trades at 220.34.<|im_end|>\n"
    assert turns[4] == f"user\n{el.turns[0]}<|im_end|>\n" and "User:" not in later and "[get_stock_info(" not in later
    assert rec["verdict"]["reward"] == 1.0 and rec["episode"]["tool_errors"] == 0
    assert replay(out)["state_digest"] == s["state_digest"]


def test_a_copied_trajectory_with_its_final_answer_is_read_as_its_calls() -> None:
    """A τ-bench example in memory reads ``call; call -> final answer``; a reply copying that
    form is its calls (the final answer dropped), when every name is one of the element's tools."""
    from rizz.engine.native_agent import python_calls

    el = next(e for e in BFCL.values() if e.tools)
    name = el.tools[0]["name"]
    got = python_calls(el, f"{name}(); {name}() -> All done.")
    assert [c.name for c in got] == [name, name]
    assert python_calls(el, "nope(); nope() -> All done.") == ()
    assert python_calls(el, "Sure -> I will look it up.") == ()


@pytest.mark.parametrize("text", ["[get_account_info()]", "Done: [place_order(symbol='X')]", "[fund_account(amount=)]"])
def test_python_syntax_that_names_no_tool_of_the_element_or_does_not_parse_stays_a_message(text: str) -> None:
    from rizz.engine.native_agent import python_calls

    el = BFCL["bfcl-simple_python_30"] if "bfcl-simple_python_30" in BFCL else next(e for e in BFCL.values() if e.tools)
    assert python_calls(el, text) == ()


def test_tau_episode_with_a_malformed_block_an_unknown_tool_and_the_gold(tmp_path, embedder) -> None:
    def reply(prompt: str) -> str:
        if "You are playing a customer" in prompt:
            return "Hi, I need help." if prompt.endswith(GREETING) else "###STOP###"  # stop after the greeting
        k = prompt.count("<tool_response>")  # tool results come back as the template's tool turns
        if k == 0:
            return '<tool_call>\n{"name": "think", "arguments": {"thought": "hm"\n</tool_call>'
        if k == 1:
            return _block("refund_everything", {})
        if k - 2 < len(GOLD["actions"]):
            a = GOLD["actions"][k - 2]
            return _block(a["name"], a["kwargs"])
        return " ".join(GOLD["outputs"]) or "Done."

    model = TemplateStub(reply)
    s, (rec,), out = _run(tmp_path, [TAU], model, embedder)
    events = rec["episode"]["transcript"]
    assert events[1]["malformed"] and events[1]["text"].startswith("<tool_call>")  # the reply as written
    assert events[2]["error"] and "malformed call" in events[2]["result"]
    assert events[4]["name"] == "refund_everything" and events[4]["error"] and "unknown tool" in events[4]["result"]
    assert rec["episode"]["tool_errors"] == 2 and rec["verdict"]["reward"] == 1.0
    assert all("<tools>" in p for p in model.rendered)
    assert replay(out)["state_digest"] == s["state_digest"]


# ---- the shipped 0.5B -------------------------------------------------------------------------

@pytest.mark.model
def test_shipped_qwen_renders_tools_with_its_own_template_and_smollm2_does_not() -> None:
    from rizz.adapters.models.embedded import EmbeddedModel

    qwen = EmbeddedModel(shipped="qwen2.5-coder-0.5b-instruct", n_ctx=2048, n_threads=1)
    assert qwen.chat_template == QWEN and native_kind(qwen) == "template"
    seen: list[str] = []

    def fake_completion(prompt: Any, **kw: Any) -> dict[str, Any]:  # the rendered prompt, no generation
        seen.append(qwen._llm.detokenize(prompt, special=True).decode())
        return {"id": "x", "created": 0, "model": "m", "usage": {"prompt_tokens": len(prompt), "completion_tokens": 9},
                "choices": [{"text": _block("math_gcd", {"num1": 12}), "logprobs": None, "finish_reason": "stop"}]}

    qwen._llm.create_completion = fake_completion
    tools = [{"type": "function", "function": {"name": "math_gcd", "description": "GCD", "parameters": {"type": "object"}}}]
    gen = qwen.generate_with_tools([Message("user", "GCD of 12 and 18?")], tools, max_tokens=32)
    assert "<tools>\n" + json.dumps(tools[0]) + "\n</tools>" in seen[0] and seen[0].endswith("<|im_start|>assistant\n")
    assert parse_tool_calls(gen.text).calls == (("math_gcd", {"num1": 12}),)
    smol = EmbeddedModel(shipped="smollm2-135m-instruct", n_ctx=512, n_threads=1)
    assert native_kind(smol) is None and not template_calls_tools(smol.chat_template)


@pytest.mark.model
@pytest.mark.slow
def test_rizz_run_bfcl_simple_python_with_the_shipped_qwen(tmp_path) -> None:
    """One BFCL simple_python item through ``rizz run``: the 0.5B's call reaches the log under
    the element's function name (it answers this item with a bare JSON call object)."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, [BFCL["bfcl-simple_python_200"]])
    res = CliRunner().invoke(app, ["run", str(stream), "-p", "frozen", "-o", str(out),
                                   "--model", "embedded:qwen2.5-coder-0.5b-instruct"])
    assert res.exit_code == 0, res.output
    rec = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    ep = ToolEpisode.from_json(rec["episode"])
    assert [c.name for c in ep.calls] == ["calculate_emissions"], rec["episode"]["transcript"]
    assert rec["prompt"]["rendering"] == "chat" and rec["verdict"]["verifier"] == "bfcl_ast"


def test_chat_turns_follow_the_fit_elided_results_and_dropped_events() -> None:
    from rizz.adapters.models.base import check_generate_args
    from rizz.core.policy import CompilerPolicy
    from rizz.core.retrieval import Retrieved
    from rizz.engine.agent_prompt import ELIDED, chat_turns, fit_episode

    el = BFCL["bfcl-multi_turn_base_100"]
    transcript = [{"role": "user", "text": el.input},
                  {"role": "assistant", "text": "", "calls": [["get_stock_info", {"symbol": "NVDA"}]]},
                  {"role": "tool", "name": "get_stock_info", "result": "x " * 400, "error": False, "arguments": {}},
                  {"role": "assistant", "text": "It is 220.", "calls": []},
                  {"role": "user", "text": "Fund it."}]
    count = lambda t: len(t.split())  # noqa: E731
    roomy, elided, dropped = fit_episode(Retrieved(), el, transcript, CompilerPolicy(), count, 100_000)
    assert (elided, dropped) == (frozenset(), 0)
    turns = chat_turns(roomy, transcript, elided, dropped)
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant", "user"]
    assert turns[0].content.endswith("\n\n" + el.input) and "Tools:" in turns[0].content
    assert turns[1].content == '<tool_call>\n{"name": "get_stock_info", "arguments": {"symbol": "NVDA"}}\n</tool_call>'
    assert turns[2].content.startswith("x x") and turns[3].content == "It is 220." and turns[4].content == "Fund it."
    # a budget the tool result does not fit: elided in the logged prompt and in the turns alike
    task = count(roomy.text) - 400
    tight, elided, dropped = fit_episode(Retrieved(), el, transcript, CompilerPolicy(), count, task + 20)
    assert elided == frozenset({2}) and dropped == 0 and ELIDED in tight.text
    assert chat_turns(tight, transcript, elided, dropped)[2].content == ELIDED
    # dropped events leave the first user line and a note
    turns = chat_turns(tight, transcript, frozenset(), 3)
    assert [t.role for t in turns] == ["user", "user"] and turns[0].content.endswith("[3 earlier events elided]")
    with pytest.raises(ValueError, match="tool"):
        check_generate_args(turns[:1] + [Message("tool", "r")], 8, (), "chat")
    check_generate_args(turns[:1] + [Message("tool", "r")], 8, (), "chat", tool_turns=True)


def test_a_reply_the_token_cap_cut_is_a_malformed_reply_not_a_message(tmp_path, embedder) -> None:
    """The 1.5B wrote its first τ-bench call as fenced JSON longer than ``agents.reply_tokens``
    (256): the half call went to the customer as a message, and the customer stopped. A reply cut
    at the cap without a call is now a malformed reply: the model sees why and tries again."""
    cut = '```json\n{\n  "name": "exchange_delivered_order_items",\n  "arguments": {\n    "item_ids": [' + ' "1234567890",' * 300
    shown: list[str] = []

    def reply(prompt: str) -> str:
        if "You are playing a customer" in prompt:
            shown.append(prompt)
            return "Hi, I need help." if prompt.endswith(GREETING) else "###STOP###"
        k = prompt.count("<tool_response>")
        if k == 0:
            return cut
        if k - 1 < len(GOLD["actions"]):
            a = GOLD["actions"][k - 1]
            return _block(a["name"], a["kwargs"])
        return " ".join(GOLD["outputs"]) or "Done."

    model = TemplateStub(reply)
    assert model.count_tokens(cut) >= 256
    s, (rec,), out = _run(tmp_path, [TAU], model, embedder)
    events = rec["episode"]["transcript"]
    assert events[1]["malformed"] and events[1]["text"] == cut
    assert events[2]["error"] and "cut off at 256 tokens (agents.reply_tokens)" in events[2]["result"]
    assert not any("exchange_delivered_order_items" in p for p in shown)  # the customer never saw the half call
    assert rec["verdict"]["reward"] == 1.0 and replay(out)["state_digest"] == s["state_digest"]


class _LengthStub(StubModel):
    """A text-protocol model whose first agent reply ends at the token cap: finish reason
    ``"length"`` (an API backend's word for it) with few words, so only the finish reason tells."""

    def __init__(self, fn) -> None:
        super().__init__(fn)
        self.cut_once = True

    def generate(self, messages: Sequence[Message], *, max_tokens: int, stop: Sequence[str] = (),
                 rendering: str = "chat") -> Generation:
        gen = super().generate(messages, max_tokens=max_tokens, stop=stop, rendering=rendering)
        if self.cut_once and "You are playing a customer" not in self.prompts[-1]:
            self.cut_once = False
            return Generation(text=gen.text, prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
                              latency_s=0.0, cost_usd=None, model=self.name, finish_reason="length")
        return gen


def test_a_cut_reply_is_malformed_on_the_text_protocol_path_too(tmp_path, embedder) -> None:
    """The cut-reply rule is the agent's, not one backend's: a reply without calls whose finish
    reason is ``"length"`` (or whose completion reached ``agents.reply_tokens``) is a malformed
    reply on the text-protocol path as on the template path; a reply that ended is a message."""
    def reply(prompt: str) -> str:
        if "You are playing a customer" in prompt:
            return "Hi, I need help." if prompt.endswith(GREETING) else "###STOP###"
        return "Let me look at your order and the items you would like to"

    model = _LengthStub(reply)
    s, (rec,), out = _run(tmp_path, [TAU], model, embedder)
    events = rec["episode"]["transcript"]
    assert events[1]["malformed"] and events[1]["text"].startswith("Let me look")
    assert events[2]["error"] and "cut off at 256 tokens (agents.reply_tokens)" in events[2]["result"]
    later = [e for e in events[3:] if e["role"] == "assistant"]
    assert later and not later[0].get("malformed")  # the same words, ended: a message to the customer
    long_prose = " ".join(["word"] * 300)  # no finish reason, but as many tokens as the cap
    s, (rec,), out = _run(tmp_path / "b", [TAU], StubModel(lambda p: ("Hi." if p.endswith(GREETING) else "###STOP###")
                                                          if "You are playing a customer" in p else long_prose), embedder)
    assert rec["episode"]["transcript"][1]["malformed"]
