"""Render a compiled prompt as model messages, and the per-shape answer settings.

Three renderings (the same for every policy; only the compiled material differs):

* ``raw`` — one completion prompt, no chat template: the compiled text with the current
  input written as ``Input: …`` followed by an ``Answer:`` cue, matching the
  ``Input:/Answer:`` form of the solved examples. A 135M model follows few-shot examples
  far better this way (probe in the issue: 8/8 raw vs 4/8 as one chat message).
* ``chat`` — the compiled text and a one-line format hint as one user message.
* ``chat-turns`` — solved examples as prior user/assistant turns, the rest as one user turn.

The answer budget (``max_tokens``) and stop strings depend only on the expected shape.

Prompt caching: in ``raw`` and ``chat`` the user message's ``cache_prefix`` is the
length of the prompt's leading run of :data:`CACHEABLE_BLOCKS` (the blocks that change least
between inputs), so a backend with a prompt cache can mark it; under the default layout that
run is short or empty (scoped context comes first), under ``policies/prefix-cache.yaml`` it is
the preamble, the instruction and the rules. The text sent is the same either way.
"""

from __future__ import annotations

from attrs import frozen

from rizz.adapters.models.base import Message
from rizz.core.compiler import CompiledPrompt

__all__ = ["CACHEABLE_BLOCKS", "RENDERINGS", "AnswerSettings", "answer_settings", "render", "stable_prefix", "TEMPLATE_SLACK"]

RENDERINGS = ("raw", "chat", "chat-turns")
#: Blocks whose text changes least from one input to the next: the fixed memory-use preamble,
#: the task's instruction, and the procedural rules (retrieved per input, but mostly the same
#: few within a branch). A prompt's leading run of them is its cacheable prefix.
CACHEABLE_BLOCKS = ("preamble", "instruction", "rules")
#: Tokens reserved for what rendering adds around the compiled text (cue, format hint,
#: chat template markers). The compiler's budget is the window minus this and the answer.
TEMPLATE_SLACK = 64

_HINTS = {
    "letter": "Reply with the option letter only.",
    "number": "Reply with the final number only.",
    "label": "Reply with the label only.",
    "span": "Reply with a short answer only (a few words).",
    "text": "Reply with the answer text only.",
    "code": "Reply with Python code only.",
    "json": "Reply with JSON only.",
}


@frozen
class AnswerSettings:
    """Generation settings of one shape: ``max_tokens`` (tokens) and raw-mode ``stop`` strings."""

    max_tokens: int
    stop: tuple[str, ...]
    hint: str


#: Answer budgets in tokens per shape (rizz's choice: a letter needs a few tokens; a TRACE
#: 20Minuten simplification ~100–200; a HumanEval body ~100–300).
_MAX_TOKENS = {"letter": 8, "number": 24, "label": 16, "span": 32, "text": 192, "code": 320, "json": 256}


def answer_settings(shape: str | None) -> AnswerSettings:
    """Answer budget and stops for ``shape`` (``None``: free text)."""
    key = shape or "text"
    # A stop on "\n" alone would end a completion that starts with a newline before any
    # answer; short shapes rely on their small token budget and the extractor instead.
    return AnswerSettings(_MAX_TOKENS[key], ("\nInput:", "\n\n\n"), _HINTS[key])


def _split_input(prompt: CompiledPrompt) -> tuple[str, str]:
    """(text before the input section, the input's text)."""
    pre = [s.text() for s in prompt.sections if s.block != "input"]
    inp = prompt.section("input")
    return "\n\n".join(pre), inp.items[0].text if inp else ""


def stable_prefix(prompt: CompiledPrompt) -> str:
    """The text of ``prompt``'s leading sections whose blocks are :data:`CACHEABLE_BLOCKS`,
    joined as in the prompt (``""`` when the first section is another block)."""
    lead = []
    for sec in prompt.sections:
        if sec.block not in CACHEABLE_BLOCKS:
            break
        lead.append(sec.text())
    return "\n\n".join(lead)


def _user(body: str, prefix: str) -> Message:
    return Message("user", body, cache_prefix=len(prefix) if prefix and body.startswith(prefix) else 0)


def render(prompt: CompiledPrompt, shape: str | None, rendering: str) -> list[Message]:
    """Messages for ``prompt`` (``raw`` and ``chat``: with the stable prefix's length as the
    message's ``cache_prefix``). Raises ValueError for an unknown rendering."""
    hint = answer_settings(shape).hint
    if rendering == "raw":
        pre, x = _split_input(prompt)
        body = f"{pre}\n\nInput: {x}\n{hint}\nAnswer:" if pre else f"Input: {x}\n{hint}\nAnswer:"
        return [_user(body, stable_prefix(prompt))]
    if rendering == "chat":
        return [_user(f"{prompt.text}\n\n{hint}", stable_prefix(prompt))]
    if rendering == "chat-turns":
        msgs: list[Message] = []
        ex = prompt.section("examples")
        for item in ex.items if ex else ():
            q, _, a = item.text.partition("\nAnswer: ")
            msgs += [Message("user", q.removeprefix("Input: ")), Message("assistant", a)]
        rest = [s.text() for s in prompt.sections if s.block != "examples"]
        msgs.append(Message("user", "\n\n".join(rest) + f"\n\n{hint}"))
        return msgs
    raise ValueError(f"unknown rendering {rendering!r}; expected one of {', '.join(RENDERINGS)}")
