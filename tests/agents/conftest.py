"""Fixtures for the agent tests: a text-protocol stub backend and the real embedder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.shell.stubs import StubBackend


class StubModel(StubBackend):
    """A ``ModelBackend`` whose reply is ``fn(prompt_text) -> str`` (the messages joined by blank
    lines, each kept in ``prompts``); every message's words are its prompt tokens, the reply's
    words its completion tokens."""

    context_window = 8192

    def __init__(self, fn: Callable[[str], str], name: str = "stub:agent") -> None:
        self.name, self.fn = name, fn
        self.prompts: list[str] = []

    def reply(self, messages: Any) -> str:
        text = "\n\n".join(m.content for m in messages)
        self.prompts.append(text)
        return self.fn(text)

    def usage(self, messages: Any, text: str) -> tuple[int, int]:
        return sum(self.count_tokens(m.content) for m in messages), self.count_tokens(text)


@pytest.fixture(scope="session")
def embedder():
    from rizz.adapters.embedder import Embedder

    return Embedder()
