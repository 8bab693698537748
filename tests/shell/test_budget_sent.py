"""The token budget bounds the answer prompt **as sent** (compiled text, answer-format line and
chat template), not only the compiled text (rizz.engine.answering.compile_sent)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from stubs import HashEmbedder, StubBackend

from rizz.adapters.models.base import MESSAGE_FRAME_TOKENS, REPLY_PRIMING_TOKENS, Message, sent_tokens
from rizz.core import PromptBudgetError, prompt_blocks
from rizz.core.retrieval import Retrieved
from rizz.engine.answering import compile_sent
from rizz.engine.run import run_stream
from rizz.formats.policy_file import load_policy

FRAME = 30  # a template's tokens around one message (Qwen2.5's, with its default system prompt: 29-31)


class Framed(StubBackend):
    """Counts words; sends every prompt inside a FRAME-token template, and reports that count."""

    name, context_window = "stub:framed", 8192

    def count_sent_tokens(self, messages: Sequence[Message], rendering: str) -> int:
        return sum(self.count_tokens(m.content) for m in messages) + FRAME

    def usage(self, messages: Sequence[Message], text: str) -> tuple[int, int]:
        return self.count_sent_tokens(messages, "chat"), 1

    def reply(self, messages: Sequence[Message]) -> str:
        return "A"


def _blocks(words: int):
    return prompt_blocks(Retrieved(), " ".join(f"w{i}" for i in range(words)), "Classify the text.", None)


def test_a_prompt_whose_frame_does_not_fit_overflows():
    with pytest.raises(PromptBudgetError):
        compile_sent(_blocks(90), load_policy("frozen"), Framed(), "letter", "chat", 100)  # the input alone: 90 + format + 30 > 100


def test_the_estimate_for_a_backend_that_cannot_count_its_frame():
    class Plain(StubBackend):
        pass

    m, msgs = Plain(), [Message("user", "a b c"), Message("assistant", "d"), Message("user", "e f")]
    assert sent_tokens(m, msgs, "chat") == 6 + 3 * MESSAGE_FRAME_TOKENS + REPLY_PRIMING_TOKENS
    assert sent_tokens(m, msgs, "raw") == len("a b c\n\nd\n\ne f".split())


def test_a_run_never_sends_a_prompt_over_its_budget(tmp_path: Path):
    """Long inputs with examples competing for a 120-token budget: every answer call's prompt
    as sent (the stub reports what its template made of it) is within the budget, and the
    summary says so."""
    stream = tmp_path / "s.jsonl"
    rows = [{"id": f"x{i}", "instruction": "Choose A or B.", "input": " ".join(f"t{i}w{j}" for j in range(40 + 3 * i)),
             "reference": "A", "verifier": "exact_match", "metadata": {"shape": "letter", "task": "T"}} for i in range(12)]
    stream.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    summary = run_stream(stream, load_policy("default"), "default", out, Framed(), HashEmbedder(), log=lambda m: None, budget=120)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    sent = [c["prompt_tokens"] for r in records if r.get("kind", "step") == "step" for c in r.get("calls", []) if c["kind"] == "answer"]
    assert len(sent) >= 8 and max(sent) <= 120
    assert max(sent) > 100  # the budget is used, not left 30 tokens short
    assert summary["budget_exceeded"] == 0 and summary["answer_prompt_tokens_max"] == max(sent)


@pytest.mark.model
def test_embedded_counts_its_prompts_as_it_sends_them():
    """count_sent_tokens equals the prompt tokens llama.cpp evaluates, under both renderings."""
    from rizz.adapters.models.embedded import EmbeddedModel

    m = EmbeddedModel(shipped="qwen2.5-coder-0.5b-instruct", n_ctx=2048, n_threads=1)
    for rendering in ("chat", "raw"):
        for msgs in ([Message("user", "Input: Zürich ist schön 😀 <|im_start|>\nAnswer:")],
                     [Message("user", "q1"), Message("assistant", "a1"), Message("user", "q2 é")]):
            assert m.count_sent_tokens(msgs, rendering) == m.generate(msgs, max_tokens=1, rendering=rendering).prompt_tokens


def test_a_prompt_compiled_again_keeps_the_steps_budget(tmp_path: Path):
    """compile_sent lowers the compile limit by the frame's excess; the prompt's (and the log's)
    budget stays the step's budget: a prompt sent at exactly its 120-token budget is not counted
    as over it, and rizz diff names --budget as its source (the lowered 84 read as neither)."""
    blocks = prompt_blocks(Retrieved(), "question", "Choose A or B.", "\n\n".join(f"e{j}" for j in range(100)))
    prompt, msgs = compile_sent(blocks, load_policy("evidence"), Framed(), "letter", "chat", 120)
    assert prompt.token_count < 120 - FRAME // 2 and sent_tokens(Framed(), msgs, "chat") <= 120
    assert prompt.budget == 120
    stream = tmp_path / "s.jsonl"
    rows = [{"id": f"x{i}", "instruction": "Choose A or B.", "input": f"question {i}", "evidence": [f"e{i}x{j}" for j in range(100)],
             "reference": "A", "verifier": "exact_match", "metadata": {"shape": "letter", "task": "T"}} for i in range(4)]
    stream.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    summary = run_stream(stream, load_policy("evidence"), "evidence", out, Framed(), HashEmbedder(), log=lambda m: None, budget=120)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    steps = [r for r in records if isinstance(r.get("prompt"), dict)]
    assert len(steps) == 4 and all(r["prompt"]["budget"] == 120 and r["prompt"]["tokens"] < 120 for r in steps)
    assert summary["answer_prompt_tokens_max"] == 120 and summary["budget_exceeded"] == 0


def test_a_model_that_reports_no_prompt_tokens_keeps_the_compiled_count(tmp_path: Path):
    """The oracle model sends nothing (its calls report 0 prompt tokens): summary.json's largest
    answer prompt is the compiled one, not 0."""
    from rizz.adapters.models.oracle import OracleModel

    stream = tmp_path / "s.jsonl"
    rows = [{"id": f"x{i}", "instruction": "Choose A or B.", "input": " ".join(f"t{i}w{j}" for j in range(20 + i)),
             "reference": "A", "verifier": "exact_match", "metadata": {"shape": "letter", "task": "T"}} for i in range(3)]
    stream.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    summary = run_stream(stream, load_policy("frozen"), "frozen", out, OracleModel(), HashEmbedder(), log=lambda m: None)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    compiled = [r["prompt"]["tokens"] for r in records if isinstance(r.get("prompt"), dict)]
    assert len(compiled) == 3 and summary["answer_prompt_tokens_max"] == max(compiled) > 20


@pytest.mark.model
def test_the_peers_server_path_counts_its_prompts_as_the_server_does():
    """In a bench with peers rizz's entries answer through llama-cpp-python's server: the backend
    counts with the served GGUF's own template (SentTokenCounter.of_file), as the server does."""
    from rizz.lab.peers.setup import peer_model

    with peer_model("embedded:qwen2.5-coder-0.5b-instruct", None) as pm:
        for rendering in ("chat", "raw"):
            for msgs in ([Message("user", "Input: Zürich ist schön 😀\nAnswer:")],
                         [Message("user", "q1"), Message("assistant", "a1"), Message("user", "q2 é")]):
                sent = sent_tokens(pm.backend, msgs, rendering)
                assert sent == pm.backend.generate(msgs, max_tokens=1, rendering=rendering).prompt_tokens, (rendering, msgs)
