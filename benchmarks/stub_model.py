"""A scripted stand-in model for measuring rizz's own machinery (Ray bench, ``rizz serve``).

Not a product backend: it answers from a hash of the prompt, so the figures it gives
measure the shell (task shipping, HTTP, locks, log writes), never a model's quality. Used
by ``benchmarks/ray_bench.py``, ``benchmarks/serve_load.py`` and the tests of those paths.

``StubModel(latency_s=0.0)`` satisfies :class:`rizz.adapters.models.ModelBackend`: the judge's
prompt gets a fixed (function, application) JSON label, a distillation prompt gets one rule,
an answer prompt gets one of ``A``, ``B``, ``C``, ``1``, ``2`` chosen by the prompt's sha256.
``latency_s`` sleeps per call (seconds), standing in for a model's time. ``fail_on``: a
substring; a prompt containing it raises :class:`rizz.adapters.models.ModelError` (a model
failure, for the 502 path of ``rizz serve``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from rizz.adapters.models import CachedModel, Generation, Message, ModelError, ResponseCache

__all__ = ["StubModel", "VerifiedStub", "cached_stub"]


class StubModel:
    """Deterministic scripted backend (see module docstring)."""

    def __init__(self, latency_s: float = 0.0, fail_on: str | None = None) -> None:
        self.name = "stub:hash"
        self.context_window = 8192
        self.temperature = 0.0
        self.latency_s = float(latency_s)
        self.fail_on = fail_on
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, messages: Sequence[Message], *, max_tokens: int, stop: Sequence[str] = (),
                 rendering: str = "chat") -> Generation:
        self.calls += 1
        text = messages[-1].content
        if self.fail_on and self.fail_on in text:
            raise ModelError(f"stub: scripted failure (prompt contains {self.fail_on!r})")
        if self.latency_s:
            time.sleep(self.latency_s)
        if '"function"' in text or "function" in text.split("\n")[0].lower():
            reply = '{"function": "classify", "application": "stance"}'
        elif text.rstrip().endswith("Answer:") or "Reply with" in text:
            reply = ["A", "B", "C", "1", "2"][int(hashlib.sha256(text.encode()).hexdigest(), 16) % 5]
        else:
            reply = "IF the text is about rates THEN answer B"
        return Generation(text=reply, prompt_tokens=sum(self.count_tokens(m.content) for m in messages),
                          completion_tokens=self.count_tokens(reply), latency_s=self.latency_s, cost_usd=None,
                          model=self.name, finish_reason="stop")


def cached_stub(cache_path: str, latency_s: float = 0.0) -> Any:
    """A :class:`StubModel` behind a response cache at ``cache_path`` (a Ray bench model factory)."""
    return CachedModel(StubModel(latency_s), ResponseCache(cache_path))


class VerifiedStub(StubModel):
    """A :class:`StubModel` whose every answer verifies: an answer prompt (no system message)
    that holds an element's input (the one ending last: examples quote inputs before it) gets
    that element's reference as its reply (the regime of a model that
    is always right, where every answer is written and distillation is due most often).
    ``references``: ``{input text: reference}``, e.g. from :func:`rizz.formats.streams.read_stream`.
    Judge and distillation prompts are answered as by :class:`StubModel`."""

    def __init__(self, references: dict[str, str], latency_s: float = 0.0) -> None:
        super().__init__(latency_s)
        self.name = "stub:verified"
        self.references = {k.strip(): v for k, v in references.items()}

    def generate(self, messages: Sequence[Message], *, max_tokens: int, stop: Sequence[str] = (),
                 rendering: str = "chat") -> Generation:
        text = messages[-1].content
        judged = any(m.role == "system" for m in messages)  # the judge's prompt quotes the input too
        found = [(text.rfind(k) + len(k), len(k), v) for k, v in self.references.items() if k and k in text] if not judged else []
        ref = max(found)[2] if found else None  # the input nearest the end: the one being asked
        if ref is None:
            return super().generate(messages, max_tokens=max_tokens, stop=stop, rendering=rendering)
        self.calls += 1
        return Generation(text=ref, prompt_tokens=sum(self.count_tokens(m.content) for m in messages),
                          completion_tokens=self.count_tokens(ref), latency_s=0.0, cost_usd=None, model=self.name, finish_reason="stop")

