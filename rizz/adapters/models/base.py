"""Records and the protocol every model backend satisfies.

A backend turns a list of :class:`Message` into one :class:`Generation`. Everything the run
log needs about a call (text, token counts, wall time, cost, backend name, finish reason,
cache hit) is on the returned record, so the pure core never talks to a model.

Two renderings exist:

* ``"chat"`` -- the model's own chat template (llama.cpp ``create_chat_completion``, OpenAI
  ``/v1/chat/completions``, Anthropic Messages).
* ``"raw"`` -- no template: :func:`render_raw` joins the message contents into one completion
  prompt (llama.cpp ``create_completion``, OpenAI ``/v1/completions``). Backends with no raw
  mode (Anthropic) document their fallback.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from rizz.adapters.models.reasoning import split_reasoning
from rizz.errors import RizzError

__all__ = [
    "ROLES",
    "RENDERINGS",
    "Message",
    "Generation",
    "ModelBackend",
    "ModelError",
    "ModelUnavailableError",
    "ModelRequestError",
    "ModelConnectionError",
    "ContextWindowExceeded",
    "render_raw",
    "sent_tokens",
    "MESSAGE_FRAME_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "estimate_tokens",
    "check_generate_args",
    "answer_and_reasoning",
    "sdk_create",
]

ROLES = ("system", "user", "assistant", "tool")
RENDERINGS = ("chat", "raw")


@attrs.frozen
class Message:
    """One chat turn.

    Attributes:
        role: ``"system"``, ``"user"`` or ``"assistant"``; ``"tool"`` (a tool's result) only
            for a backend whose chat template writes tool turns (``generate_with_tools``).
        content: the turn's text.
        cache_prefix: characters at the start of ``content`` that change least from one call
            to the next (the prompt's stable blocks, :func:`rizz.engine.render.render`); a backend
            with a prompt cache may mark them cacheable (Anthropic ``cache_control``).
            0: none. A hint about what the backend evaluates, never about what it is sent: it is
            not part of the response-cache key and every backend sends ``content`` whole.
    """

    role: str = attrs.field(validator=attrs.validators.in_(ROLES))
    content: str = attrs.field(validator=attrs.validators.instance_of(str))
    cache_prefix: int = attrs.field(default=0, kw_only=True, eq=False, validator=attrs.validators.ge(0))


def _non_negative(_inst: object, attribute: attrs.Attribute, value: float) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class Generation:
    """One model answer and what it cost.

    Attributes:
        text: the completion text (stop strings removed).
        prompt_tokens: tokens the backend billed/evaluated for the prompt (model tokenizer).
        completion_tokens: tokens generated.
        latency_s: wall seconds of the call (for a cache hit: the lookup time).
        cost_usd: US dollars for the call; ``None`` where the backend has no price table
            (embedded and OpenAI-compatible local servers); ``0.0`` for a cache hit on a
            priced backend.
        model: backend name, e.g. ``"embedded:SmolLM2-135M-Instruct.Q4_1"``.
        finish_reason: backend's reason, normalised to ``"stop"`` / ``"length"`` where the
            backend uses those (Anthropic's ``end_turn``/``stop_sequence`` map to ``"stop"``,
            ``max_tokens`` to ``"length"``); other values pass through.
        cached: True when served from a :class:`~rizz.adapters.models.cache.ResponseCache`.
        reasoning: the model's reasoning (``<think>`` blocks, ``reasoning_content``,
            Anthropic thinking blocks), kept out of ``text``; ``""`` when there was none
            (:mod:`rizz.adapters.models.reasoning`).
        raw: the reply text as the backend returned it (inline reasoning included) when it
            differs from ``text``; ``None`` otherwise. :attr:`reply` gives either.
        usage_estimated: True when the backend reported no usage and the token counts were
            counted with its tokenizer (or :func:`estimate_tokens`) instead.
        attempts: HTTP requests the call took, the API client's retries included
            §3: retried calls are counted); 1 for in-process backends and for cache hits (a hit
            makes no request). A failed attempt (HTTP 408/409/429/5xx,
            a dropped connection) returns no usage, so tokens and ``cost_usd`` are the
            successful attempt's: the providers do not bill refused requests.
        evaluated_prompt_tokens: of ``prompt_tokens``, how many the backend evaluated (issue
            the rest it read from a prompt cache (Anthropic ``cache_read_input_tokens``,
            OpenAI-compatible ``prompt_tokens_details.cached_tokens``) or reused from its KV
            cache (llama.cpp's ``n_p_eval``). ``None``: not reported, take all of them. What is
            *sent* is ``prompt_tokens`` either way; a cache changes only what is evaluated.
    """

    text: str
    prompt_tokens: int = attrs.field(validator=_non_negative)
    completion_tokens: int = attrs.field(validator=_non_negative)
    latency_s: float = attrs.field(validator=_non_negative)
    cost_usd: float | None = attrs.field(validator=_non_negative)
    model: str
    finish_reason: str
    cached: bool = False
    reasoning: str = ""
    raw: str | None = None
    usage_estimated: bool = False
    attempts: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    evaluated_prompt_tokens: int | None = attrs.field(default=None, validator=_non_negative)

    @property
    def evaluated(self) -> int:
        """Prompt tokens the backend evaluated: :attr:`evaluated_prompt_tokens`, else all of
        :attr:`prompt_tokens` (0 for a response-cache hit: nothing was sent)."""
        if self.cached:
            return 0
        return self.prompt_tokens if self.evaluated_prompt_tokens is None else self.evaluated_prompt_tokens

    @property
    def reply(self) -> str:
        """The reply as received (``raw`` if set, else ``text``)."""
        return self.raw if self.raw is not None else self.text


def answer_and_reasoning(text: str, reasoning: str = "") -> dict[str, object]:
    """``Generation`` keyword fields for a reply ``text`` that may carry inline reasoning.

    Returns ``{"text", "reasoning", "raw"}``: ``text`` without ``<think>``-style blocks,
    the inline reasoning appended to any separate ``reasoning`` (e.g. ``reasoning_content``),
    and ``raw`` = the reply as received when it differs from the answer text.
    """
    answer, inline = split_reasoning(text)
    both = "\n\n".join(p for p in (reasoning or "", inline) if p)
    return {"text": answer, "reasoning": both, "raw": text if answer != text else None}


@runtime_checkable
class ModelBackend(Protocol):
    """What the shell needs from a frozen model.

    Attributes:
        name: stable id recorded in run logs (``"embedded:..."``, ``"anthropic:..."``, ...).
        context_window: the model's context window, tokens.
    """

    name: str
    context_window: int

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` under the model's own tokenizer (or a documented estimate)."""
        ...

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        rendering: str = "chat",
    ) -> Generation:
        """Answer ``messages``; at most ``max_tokens`` new tokens; cut at any ``stop`` string."""
        ...


class ModelError(RuntimeError, RizzError):
    """A backend failed for a reason other than the caller's arguments."""


class ModelUnavailableError(ModelError):
    """The backend cannot be built here: missing package, weights file or API key."""


class ModelRequestError(ModelError):
    """The model's API refused the request itself (HTTP 4xx other than 408/409/429, which are
    retried): a field the model does not take, an unknown model id, a bad key. Retrying the
    same request cannot help; the message names the model and, when the API does, the field."""


class ModelConnectionError(ModelError):
    """The model's server could not be reached, or did not answer in time, after the client's
    own retries (DNS, refused connection, timeout). Nothing about the request is wrong: the
    CLI stops with exit 2, keeps every finished step, and the same command resumes."""


class ContextWindowExceeded(ModelError, ValueError):
    """Prompt tokens plus ``max_tokens`` do not fit the model's context window."""


def sdk_create(resource: object, **kwargs: object) -> tuple[object, int]:
    """``resource.create(**kwargs)`` of an ``openai`` / ``anthropic`` SDK resource (e.g.
    ``client.messages``), and how many HTTP requests it took: ``(reply, 1 + retries)``.

    Goes through the SDK's ``with_raw_response`` layer, whose response carries
    ``retries_taken`` (both SDKs, Stainless-generated); a stand-in resource without that
    layer (a test double, a caller's own client) is called directly and counts 1. Raises what
    ``create`` raises (the SDK's errors after its retries).
    """
    raw_api = getattr(resource, "with_raw_response", None)
    if raw_api is None:
        return resource.create(**kwargs), 1  # type: ignore[attr-defined]
    raw = raw_api.create(**kwargs)
    return raw.parse(), 1 + int(getattr(raw, "retries_taken", 0) or 0)


def render_raw(messages: Sequence[Message]) -> str:
    """The raw (template-free) completion prompt for ``messages``.

    The contents are joined by a blank line, in order, with no role markers: the caller
    owns the whole prompt text. A single message renders to its content unchanged.
    """
    return "\n\n".join(m.content for m in messages)


MESSAGE_FRAME_TOKENS = 4
"""Tokens a chat backend adds around each message (role markers), when it cannot count them:
OpenAI's "How to count tokens with tiktoken" (openai-cookbook) gives 3 per message for its
chat models; Qwen2.5's template adds 5 (``<|im_start|>user\n`` … ``<|im_end|>\n``). 4 is the
estimate for backends without :meth:`count_sent_tokens`."""

REPLY_PRIMING_TOKENS = 3
"""Tokens that open the assistant's reply (``<|im_start|>assistant\n``; openai-cookbook: 3)."""


def sent_tokens(model: Any, messages: Sequence[Message], rendering: str) -> int:
    """Tokens of ``messages`` as ``model`` sends them under ``rendering``: the contents with the
    chat template's frame (and a system prompt the template adds by itself), or the raw prompt.

    A backend that can count exactly has ``count_sent_tokens(messages, rendering) -> int | None``
    (the embedded GGUF models: their own template and tokenizer); otherwise, and when that
    returns None, the count is ``count_tokens`` of the raw prompt (``raw``) or of each content
    plus :data:`MESSAGE_FRAME_TOKENS` a message and :data:`REPLY_PRIMING_TOKENS` (an estimate).
    """
    exact = getattr(model, "count_sent_tokens", None)
    if callable(exact):
        n = exact(messages, rendering)
        if n is not None:
            return int(n)
    if rendering == "raw":
        return int(model.count_tokens(render_raw(messages)))
    return sum(int(model.count_tokens(m.content)) + MESSAGE_FRAME_TOKENS for m in messages) + REPLY_PRIMING_TOKENS


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def estimate_tokens(text: str, chars_per_token: float = 3.5) -> int:
    """Offline token estimate, for backends whose tokenizer cannot be reached.

    Each CJK/kana/hangul character counts as one token; the rest counts
    ``ceil(chars / chars_per_token)``. ``3.5`` characters per token is this project's
    heuristic for English under BPE tokenizers of current API models (deliberately on the
    high side of the count, so budgets err towards dropping material, not overflowing).

    Returns:
        int >= 0; 0 only for the empty string.
    """
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    rest = len(text) - cjk
    return cjk + math.ceil(rest / chars_per_token)


def check_generate_args(
    messages: Sequence[Message], max_tokens: int, stop: Sequence[str], rendering: str, *, tool_turns: bool = False
) -> None:
    """Validate ``generate`` arguments shared by all backends.

    Raises:
        ValueError: empty ``messages``, a non-:class:`Message` item, a ``tool`` turn where
            ``tool_turns`` is False (only ``generate_with_tools`` takes them), ``max_tokens < 1``,
            ``stop`` given as a bare string, or an unknown ``rendering``.
    """
    if not messages:
        raise ValueError("messages must not be empty")
    for m in messages:
        if not isinstance(m, Message):
            raise ValueError(f"messages must be Message records, got {type(m).__name__}")
        if m.role == "tool" and not tool_turns:
            raise ValueError("a 'tool' turn goes only to generate_with_tools (a chat template that writes tool results)")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if isinstance(stop, str):
        raise ValueError("stop must be a sequence of strings, not a single string")
    if rendering not in RENDERINGS:
        raise ValueError(f"rendering must be one of {RENDERINGS}, got {rendering!r}")
