"""Deterministic stand-ins for the model and the embedder (tests only).

``StubBackend`` is the backend boilerplate every test stub model shares (the
:class:`~rizz.adapters.models.ModelBackend` attributes, word-count tokens, the ``Generation``
record): a stub writes only ``reply(messages)``. ``ArithmeticModel`` answers "What is A + B?"
right when ``(A + B) % 3 != 0`` and off by one otherwise, so a run has verified and failed steps;
its judge/distil replies are fixed. ``HashEmbedder`` maps a text to a unit vector from its
sha256 (no torch, fast to import). None is a product: the product runs the embedded model
(``make demo``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rizz.adapters.models import Generation, Message
from tests.core.helpers import unit


class StubBackend:
    """A test stub satisfying ``ModelBackend``; a subclass defines :meth:`reply`.

    Tokens are whitespace-separated words (no tokenizer: tests only). ``generate`` returns
    ``reply(messages)`` with the token counts of :meth:`usage`, ``latency_s`` seconds, no cost
    (``None``) and finish reason ``"stop"``; ``max_tokens``, ``stop`` and ``rendering`` are
    accepted and ignored. ``name``, ``context_window`` (tokens), ``temperature`` and
    ``latency_s`` are class defaults a subclass or an instance may override.
    """

    name = "stub:backend"
    context_window = 4096
    temperature = 0.0
    latency_s = 0.0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def reply(self, messages: Sequence[Message]) -> str:
        """The answer text to ``messages`` (each stub its own script)."""
        raise NotImplementedError(f"{type(self).__name__} defines no reply(messages)")

    def usage(self, messages: Sequence[Message], text: str) -> tuple[int, int]:
        """(prompt, completion) tokens reported: the last message's words, and 1."""
        return self.count_tokens(messages[-1].content), 1

    def generate(self, messages: Sequence[Message], *, max_tokens: int, stop: Sequence[str] = (),
                 rendering: str = "chat") -> Generation:
        text = self.reply(messages)
        prompt_tokens, completion_tokens = self.usage(messages, text)
        return Generation(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          latency_s=self.latency_s, cost_usd=None, model=self.name, finish_reason="stop")


class ArithmeticModel(StubBackend):
    name = "stub:arithmetic"

    def reply(self, messages: Sequence[Message]) -> str:
        prompt = messages[-1].content
        if "function" in prompt and "application" in prompt and "JSON" in prompt:
            return '{"function": "solve-math", "application": "arithmetic"'
        if "IF" in prompt and "THEN" in prompt:
            return "IF the question adds two numbers THEN answer with their sum"
        found = re.findall(r"What is (\d+) \+ (\d+)\?", prompt)
        a, b = map(int, found[-1]) if found else (0, 0)
        return str(a + b if (a + b) % 3 else a + b + 1)


class HashEmbedder:
    name = "stub:hash16"
    dim = 16

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            # texts sharing their first word land close together (so branches snap and merge)
            head = hashlib.sha256(t.split(" ")[0].encode()).digest()
            tail = hashlib.sha256(t.encode()).digest()
            v = np.frombuffer(head[:16], np.uint8).astype(np.float32) * 4 + np.frombuffer(tail[:16], np.uint8)
            out[i] = unit(v)
        return out


def arithmetic_stream(path: Path, n: int) -> Path:
    """``n`` elements: sums (shape number, exact_match) with a context line every 7th."""
    lines = []
    for i in range(n):
        a, b = (i * 7) % 23, (i * 5) % 17
        if i % 7 == 6:
            lines.append({"id": f"c{i}", "input": f"Note {i}: the user likes {a}.", "context_only": True,
                          "metadata": {"scope": "u1"}})
        else:
            lines.append({"id": f"q{i}", "input": f"What is {a} + {b}?", "reference": str(a + b),
                          "verifier": "exact_match", "metadata": {"shape": "number", "task": "sum", "scope": "u1"}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def run_refused_second(tmp_path: Path, monkeypatch, model_spec: str) -> tuple[int, str, list[dict]]:
    """``rizz run`` (in-process, policy ``frozen``, :class:`HashEmbedder`) over two label
    elements ("Review 0/1: a wonderful film.", reference ``positive``) whose server refuses
    the second's calls: ``(exit code, stdout + stderr, the log's records)``; the run is
    ``tmp_path / "run"``."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    stream = tmp_path / "s.jsonl"
    stream.write_text("".join(json.dumps({"id": f"r{i}", "input": f"Review {i}: a wonderful film.",
                                          "metadata": {"shape": "label", "task": "sst"},
                                          "reference": "positive", "verifier": "label_match"}) + "\n" for i in range(2)))
    out = tmp_path / "run"
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--policy", "frozen", "--out", str(out), "--model", model_spec])
    err = res.output + (res.stderr if res.stderr_bytes is not None else "")
    log = out / "log.jsonl"
    return res.exit_code, err, [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
