"""Which overflowed agent replies are model calls: a prompt that does not fit rizz's own budget
is never sent (no call); a request the server refused as too long for its window was sent (one
call, tests/shell/test_agents_native.py). The episode's ``model_calls`` says so, the log keeps
it, and the run replays to the same digest."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rizz.adapters.agents.env import make_environment
from rizz.adapters.agents.loop import AgentReply, run_episode
from rizz.adapters.models import ContextWindowExceeded, Generation, Message
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream
from tests.agents.conftest import StubModel
from tests.agents.test_qwen_tools import TemplateStub
from tests.shell.stubs import HashEmbedder

DATA = Path(__file__).resolve().parents[2] / "data"
TAU = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements[0]
BFCL = {e.id: e for e in read_stream(DATA / "bfcl-mini" / "test.jsonl").elements}


class _Overflows:
    """An agent whose prompt stops fitting after ``sent`` malformed replies; its overflow was
    ``refused`` by the server (sent) or never left rizz."""

    def __init__(self, sent: int, refused: bool) -> None:
        self.sent, self.refused, self.asked = sent, refused, 0

    def reply(self, el: Any, transcript: Any, env: Any) -> AgentReply:
        self.asked += 1
        if self.asked > self.sent:
            return AgentReply("", overflow=True, sent=self.refused)
        return AgentReply("[", error="malformed call: not Python")


def test_the_loop_counts_a_refused_request_and_not_an_unsent_prompt() -> None:
    for sent, refused, calls in ((0, False, 0), (2, False, 2), (0, True, 1), (2, True, 3)):
        agent = _Overflows(sent, refused)
        ep = run_episode(TAU, agent, make_environment(TAU.environment), max_steps=30)
        assert (ep.stop, ep.model_calls, ep.tool_errors, agent.asked) == ("overflow", calls, sent, sent + 1)


def _run(tmp_path: Path, el: Any, model: Any, budget: int | None = None) -> tuple[dict[str, Any], dict[str, Any], Path]:
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, [el])
    s = run_stream(stream, load_policy("frozen"), "frozen", out, model, HashEmbedder(), log=lambda m: None, budget=budget)
    return s, json.loads((out / "log.jsonl").read_text().splitlines()[0]), out


def test_a_text_protocol_prompt_over_the_budget_is_no_model_call(tmp_path) -> None:
    model = StubModel(lambda p: "###STOP###" if p.startswith("You are playing a customer") else "Done.")
    s, rec, out = _run(tmp_path, TAU, model, budget=200)  # the tool list alone is over 1,000 words
    assert rec["overflow"] is True and rec["episode"]["stop"] == "overflow"
    assert not any("Tools:" in p for p in model.prompts)  # nothing was sent for the agent
    assert rec["episode"]["model_calls"] == 0
    assert [c["kind"] for c in rec["calls"]] == ["user"]  # the customer's opening line only
    assert replay(out)["state_digest"] == s["state_digest"]


class _WindowFull(TemplateStub):
    """An embedded model whose own template makes the prompt too long for its window."""

    def generate_with_tools(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, max_tokens: int) -> Generation:
        self.rendered.append("")
        raise ContextWindowExceeded("embedded:stub-qwen: Requested tokens (9000) exceed context window of 8192")


def test_a_native_prompt_over_the_budget_is_no_model_call(tmp_path) -> None:
    model = TemplateStub(lambda p: "Done.")
    s, rec, out = _run(tmp_path, BFCL["bfcl-multiple_101"], model, budget=20)
    assert rec["overflow"] is True and rec["episode"]["stop"] == "overflow"
    assert model.rendered == [] and rec["episode"]["model_calls"] == 0
    assert replay(out)["state_digest"] == s["state_digest"]


def test_an_embedded_template_prompt_over_the_window_is_no_model_call(tmp_path) -> None:
    """The embedded model refuses the rendered prompt before evaluating a token: nothing was
    generated, as with rizz's own budget check."""
    model = _WindowFull(lambda p: "Done.")
    s, rec, out = _run(tmp_path, BFCL["bfcl-multiple_101"], model)
    assert rec["episode"]["stop"] == "overflow" and len(model.rendered) == 1
    assert rec["episode"]["model_calls"] == 0
    assert replay(out)["state_digest"] == s["state_digest"]
