"""Reasoning output of "thinking" models: kept out of the answer, kept in the log.

Reasoning models (DeepSeek-R1 and Qwen3 through vLLM / llama.cpp / Ollama, Claude with
extended thinking) put their chain of thought in one of three places:

* inline in the reply text, as ``<think>…</think>`` or ``<thinking>…</thinking>`` blocks
  (case-insensitive; several blocks possible);
* inline with the opening tag in the *prompt* (some chat templates, e.g. DeepSeek-R1's, end
  the prompt with ``<think>\\n``), so the reply starts with reasoning and only has the
  closing tag;
* inline and cut by ``max_tokens``: an opening tag with no closing tag — everything after it
  is reasoning and the answer is empty;
* in a separate field: the OpenAI-compatible ``reasoning_content`` of vLLM / llama.cpp /
  DeepSeek (``reasoning`` on some servers), Anthropic ``thinking`` content blocks.

:func:`split_reasoning` handles the inline forms; backends pass the separate fields through
:class:`~rizz.adapters.models.base.Generation` ``.reasoning``. The answer text (``.text``) is
what extraction, the judge label, distilled rules and every verifier read; the run log keeps
the reply as received (``answer.raw``) and the reasoning (``answer.reasoning``).
"""

from __future__ import annotations

import re

__all__ = ["split_reasoning", "strip_reasoning", "THINK_TAGS"]

#: Tag names treated as reasoning blocks.
THINK_TAGS = ("think", "thinking")

_TAG = r"(?:think|thinking)"
_BLOCK = re.compile(r"<\s*" + _TAG + r"\s*>(.*?)<\s*/\s*" + _TAG + r"\s*>", re.I | re.S)
_OPEN = re.compile(r"<\s*" + _TAG + r"\s*>", re.I)
_CLOSE = re.compile(r"<\s*/\s*" + _TAG + r"\s*>", re.I)


def split_reasoning(text: str) -> tuple[str, str]:
    """``(answer, reasoning)`` of a reply that may carry inline reasoning.

    * every closed ``<think>…</think>`` / ``<thinking>…</thinking>`` block is removed;
    * a closing tag with no opening one (the template opened it): all text before it is
      reasoning;
    * an opening tag with no closing one (cut by ``max_tokens``): all text after it is
      reasoning.

    The answer is stripped of surrounding whitespace only when reasoning was found (a reply
    without reasoning is returned unchanged). Reasoning parts are joined by a blank line.

    Examples:
        >>> split_reasoning("<think>Let me think.</think>\\npositive")
        ('positive', 'Let me think.')
        >>> split_reasoning("<think>Still thinking and cut")
        ('', 'Still thinking and cut')
        >>> split_reasoning("plain")
        ('plain', '')
    """
    if not isinstance(text, str) or "<" not in text:
        return text, ""
    parts: list[str] = []
    close = _CLOSE.search(text)
    first_open = _OPEN.search(text)
    if close is not None and (first_open is None or first_open.start() > close.start()):
        parts.append(text[: close.start()].strip())
        text = text[close.end():]

    def take(m: re.Match[str]) -> str:
        parts.append(m.group(1).strip())
        return ""

    text = _BLOCK.sub(take, text)
    dangling = _OPEN.search(text)
    if dangling is not None:
        parts.append(text[dangling.end():].strip())
        text = text[: dangling.start()]
    if not parts:
        return text, ""
    return text.strip(), "\n\n".join(p for p in parts if p)


def strip_reasoning(text: str) -> str:
    """The answer part of ``text`` (see :func:`split_reasoning`)."""
    return split_reasoning(text)[0]
