"""Fixtures for the agent tests: a text-protocol stub backend and the real embedder."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from rizz.shell.models import Generation


class StubModel:
    """A ``ModelBackend`` whose reply is ``fn(prompt_text) -> str``; counts words as tokens."""

    def __init__(self, fn: Callable[[str], str], name: str = "stub:agent") -> None:
        self.name, self.context_window, self.temperature = name, 8192, 0.0
        self.fn = fn
        self.prompts: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, messages: Any, *, max_tokens: int, stop: Any = (), rendering: str = "chat") -> Generation:
        text = "\n\n".join(m.content for m in messages)
        self.prompts.append(text)
        out = self.fn(text)
        return Generation(out, self.count_tokens(text), self.count_tokens(out), 0.0, None, self.name, "stop")


@pytest.fixture(scope="session")
def embedder():
    from rizz.shell.embed import Embedder

    return Embedder()
