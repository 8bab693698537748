"""Anthropic Messages API backend (the paper's frozen model, Claude Haiku 4.5).

Calls go through the official ``anthropic`` SDK. Retries: the SDK retries connection errors,
timeouts, 408, 409, 429 and every 5xx (including 529 ``overloaded_error``) with exponential
backoff (0.5 s initial, 8 s cap, honouring ``retry-after`` / ``retry-after-ms``); this backend
raises the SDK's ``max_retries`` from 2 to :data:`DEFAULT_MAX_RETRIES`.

Anthropic has no raw-completion mode: ``rendering="raw"`` falls back to chat, sending
:func:`~rizz.shell.models.base.render_raw` of the messages as one user turn.

Prices (US dollars per million tokens) are from Anthropic's model page
``platform.claude.com/docs/en/models/haiku-4-5/overview`` as read on 2026-05 (Haiku 4.5:
$1 input, $5 output, 200K context window); the Sonnet 4.5 row is from the same site's
pricing table. An id not in the table gets ``cost_usd=None``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Sequence

from rizz.shell.models.base import (
    Generation,
    Message,
    ModelUnavailableError,
    check_generate_args,
    estimate_tokens,
    render_raw,
)

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_MAX_RETRIES",
    "PRICES_USD_PER_MTOK",
    "CONTEXT_WINDOWS",
    "AnthropicModel",
    "price_usd",
]

DEFAULT_MODEL_ID = "claude-haiku-4-5"
DEFAULT_MAX_RETRIES = 6
DEFAULT_TIMEOUT_S = 120.0

# (input, output) USD per million tokens; source and date in the module docstring.
PRICES_USD_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-haiku-4-5-20251001": (1.0, 5.0),
    "claude-sonnet-4-5": (3.0, 15.0),
}
CONTEXT_WINDOWS: dict[str, int] = {"claude-haiku-4-5": 200_000, "claude-sonnet-4-5": 200_000}
_DEFAULT_CONTEXT = 200_000

_COUNT_MEMO_MAX = 4096  # texts whose API token count is memoised (bounded memory)
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def price_usd(model_id: str, input_tokens: int, output_tokens: int) -> float | None:
    """Cost of one call in USD from :data:`PRICES_USD_PER_MTOK`; ``None`` for unknown ids."""
    row = PRICES_USD_PER_MTOK.get(model_id)
    if row is None:
        return None
    return (input_tokens * row[0] + output_tokens * row[1]) / 1_000_000


def _context_window(model_id: str) -> int:
    for prefix, n in CONTEXT_WINDOWS.items():
        if model_id.startswith(prefix):
            return n
    return _DEFAULT_CONTEXT


class AnthropicModel:
    """Claude through the Messages API.

    Args:
        model_id: e.g. ``"claude-haiku-4-5"`` (default).
        api_key: default ``$ANTHROPIC_API_KEY``.
        base_url: API root; default the SDK's (``$ANTHROPIC_BASE_URL`` or the public API).
        max_retries: SDK retries on 408/409/429/5xx/timeouts/connection errors.
        timeout_s: per-attempt timeout, seconds.
        temperature: sampling temperature (0 = near-greedy; the API is not bit-deterministic);
            ``None`` omits the field (for models that reject it).
        token_counting: ``"api"`` uses ``messages.count_tokens`` (memoised per text; after a
            failure it switches to the estimate for the rest of the session); ``"estimate"``
            uses :func:`~rizz.shell.models.base.estimate_tokens` and never calls the API.
        client: an already built ``anthropic.Anthropic`` (tests); overrides the above.

    Raises:
        ModelUnavailableError: ``anthropic`` not installed, or no API key.
    """

    def __init__(
        self,
        model_id: str = DEFAULT_MODEL_ID,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        temperature: float | None = 0.0,
        token_counting: str = "api",
        client: Any = None,
    ) -> None:
        if token_counting not in ("api", "estimate"):
            raise ValueError(f"token_counting must be 'api' or 'estimate', got {token_counting!r}")
        self.model_id = model_id or DEFAULT_MODEL_ID
        self.name = f"anthropic:{self.model_id}"
        self.context_window = _context_window(self.model_id)
        self.temperature = None if temperature is None else float(temperature)
        self.token_counting = token_counting
        self._count_memo: dict[str, int] = {}
        self._count_online = token_counting == "api"
        self._lock = threading.Lock()
        if client is not None:
            self._client = client
            return
        try:
            import anthropic
        except ImportError:
            raise ModelUnavailableError(
                "the Anthropic backend needs the SDK: pip install anthropic"
            ) from None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelUnavailableError(
                "no Anthropic API key: set ANTHROPIC_API_KEY (or pass api_key=...)"
            )
        self._client = anthropic.Anthropic(
            api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout_s
        )

    @staticmethod
    def _request(messages: Sequence[Message], rendering: str) -> tuple[str | None, list[dict]]:
        """(system, messages) in the Messages wire format."""
        if rendering == "raw":
            return None, [{"role": "user", "content": render_raw(messages)}]
        system = "\n\n".join(m.content for m in messages if m.role == "system") or None
        turns = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        if not turns:  # the API needs at least one user turn
            turns, system = [{"role": "user", "content": system or ""}], None
        return system, turns

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        rendering: str = "chat",
    ) -> Generation:
        """One Messages call (retried by the SDK); cost from :data:`PRICES_USD_PER_MTOK`.

        Raises:
            ValueError: bad arguments.
            anthropic.APIError: the API still failed after the retries.
        """
        check_generate_args(messages, max_tokens, stop, rendering)
        system, turns = self._request(messages, rendering)
        kwargs: dict[str, Any] = dict(model=self.model_id, max_tokens=max_tokens, messages=turns)
        if self.temperature is not None:
            # Sent through extra_body: recent SDKs dropped the typed argument, the wire
            # field is still accepted by the Claude 4.5 models.
            kwargs["extra_body"] = {"temperature": self.temperature}
        if system is not None:
            kwargs["system"] = system
        # The API rejects whitespace-only stop sequences; those are applied client-side.
        stops = [s for s in stop if s.strip()]
        local_stops = [s for s in stop if s and not s.strip()]
        if stops:
            kwargs["stop_sequences"] = stops
        t0 = time.perf_counter()
        resp = self._client.messages.create(**kwargs)
        latency = time.perf_counter() - t0
        text = "".join(getattr(b, "text", "") for b in resp.content if b.type == "text")
        finish = _FINISH.get(resp.stop_reason or "", resp.stop_reason or "unknown")
        cuts = [i for i in (text.find(s) for s in local_stops) if i >= 0]
        if cuts:
            text, finish = text[: min(cuts)], "stop"
        n_in, n_out = int(resp.usage.input_tokens), int(resp.usage.output_tokens)
        return Generation(
            text=text,
            prompt_tokens=n_in,
            completion_tokens=n_out,
            latency_s=latency,
            cost_usd=price_usd(self.model_id, n_in, n_out),
            model=self.name,
            finish_reason=finish,
        )

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` as one user message.

        With ``token_counting="api"``: ``messages.count_tokens`` (includes the few tokens of
        the message frame; memoised). If that call fails (offline, no permission), this and
        every later call use :func:`~rizz.shell.models.base.estimate_tokens`.
        """
        if not text:
            return 0
        if not self._count_online:
            return estimate_tokens(text)
        with self._lock:
            hit = self._count_memo.get(text)
        if hit is not None:
            return hit
        try:
            client = self._client.with_options(max_retries=1, timeout=10.0)
            n = int(
                client.messages.count_tokens(
                    model=self.model_id, messages=[{"role": "user", "content": text}]
                ).input_tokens
            )
        except Exception:  # noqa: BLE001 - any API/transport failure -> offline estimate
            self._count_online = False
            return estimate_tokens(text)
        with self._lock:
            if len(self._count_memo) >= _COUNT_MEMO_MAX:
                self._count_memo.clear()
            self._count_memo[text] = n
        return n

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r})"
