"""Anthropic Messages API backend (the paper's frozen model, Claude Haiku 4.5).

Calls go through the official ``anthropic`` SDK. Retries: the SDK retries connection errors,
timeouts, 408, 409, 429 and every 5xx (including 529 ``overloaded_error``) with exponential
backoff (0.5 s initial, 8 s cap, honouring ``retry-after`` / ``retry-after-ms``); this backend
raises the SDK's ``max_retries`` from 2 to :data:`DEFAULT_MAX_RETRIES`.

Anthropic has no raw-completion mode: ``rendering="raw"`` falls back to chat, sending
:func:`~rizz.adapters.models.base.render_raw` of the messages as one user turn.

Prices (US dollars per million tokens, input/output) are Anthropic's published base rates,
read 2026-12-01 from the newest stored snapshots of ``platform.claude.com/docs``: the pricing
page (``about-claude/pricing``, "Model pricing"), the per-model pages (``models/<name>/overview``,
"Legacy."/"Latest." banner, model id, context window, prices; the newest, of late November
2026, lists Claude Fable 5.2 at $8/$40) and the deprecations page; model ids cross-checked
with the ``Model`` list of the ``anthropic`` SDK 2.14.0 (generated from the API spec) and its
deprecation table. Rows: Fable 5.2 $8/$40; Fable 5.1, Fable 5, Mythos 5.1 and Mythos 5
(limited availability) $10/$50; Opus 5.5 $4/$20; Opus 5, 4.8, 4.7, 4.6, 4.5 $5/$25; Sonnet
5.5 and 5 $2/$10; Sonnet 4.6 $3/$15; Haiku 4.5 $1/$5. An id matches a row when it is the
row's id, or the id followed by a ``-YYYYMMDD`` snapshot date (e.g. the documented
``claude-haiku-4-5-20251001``, ``claude-opus-4-5-20251101``) or ``-latest``; any other id gets
``cost_usd=None`` (unknown, never a guessed 0). Left out on purpose:

* Claude Haiku 5.5 (``claude-haiku-5-5``): the docs give no flat rate ("From $0.10 / MTok"):
  $0.10/$0.50 for prompts up to 100,000 tokens, $0.50/$2.50 above; one row cannot hold
  that, so its calls are recorded with ``cost_usd=None``.
* Claude Mythos 5.2 and Mythos Preview: no price on the pages read.
* Retired models (requests to them fail, so no new call can be priced): Sonnet 4.5 (retired
  2026-11-30), Opus 4.1 and Opus 4 (the pricing page marks them retired on the Claude API),
  Sonnet 4, Sonnet 3.7, Haiku 3.5 and Haiku 3 (gone from the docs' lineup and the SDK's
  model list). Nothing needs their prices: a call's cost is computed once, when it is made,
  and stored in its log record; replay, resume, reports and cache hits (cost 0) read the
  stored value and never reprice.

Opus 4.5 is deprecated and retires 2027-01-22 (the SDK's deprecation table); its row stays
until then. Thinking tokens are billed as output tokens and are included in
``usage.output_tokens``. Cache hits cost 0 (see ``cache.py``). :data:`CONTEXT_WINDOWS` holds the windows the same pages give
(1M tokens for Fable 5.2/5.1/5, Mythos 5, Opus 5.5/5/4.8/4.6, Sonnet 5.5/5/4.6 and Haiku 5.5;
200K for Opus 4.5 and Haiku 4.5); other ids get 200K (:data:`_DEFAULT_CONTEXT`, the smallest
window in the lineup).

Default model (:data:`DEFAULT_MODEL_ID`): ``claude-haiku-4-5``, the paper's frozen model.
Since Haiku 5.5 (2026-10-07) its page marks it "Legacy" (still available, no updates); no
retirement date is given for it (its page names none and it is not in the SDK 2.14.0
deprecation list, which has Opus 4.5's and Sonnet 4.5's), so it stays the default; the
current small model, Haiku 5.5, has no flat price (above).

Prompt caching. A user message's stable prefix (``Message.cache_prefix``: the
prompt's leading preamble / instruction / rules, :func:`rizz.engine.render.render`) is sent as
its own text block with ``cache_control: {"type": "ephemeral"}`` (5-minute TTL) when it is at
least the model's minimum cacheable length (:data:`CACHE_MIN_TOKENS`, estimated with
:func:`~rizz.adapters.models.base.estimate_tokens`); the message's text is the same, split in two
blocks. The usage then splits the prompt in three: ``input_tokens`` (after the last
breakpoint), ``cache_creation_input_tokens`` (written to the cache) and
``cache_read_input_tokens`` (read from it). ``Generation.prompt_tokens`` is their sum (what was
sent), ``evaluated_prompt_tokens`` the first two (a cache read is not evaluated again), and
``cost_usd`` prices them at 1×, :data:`CACHE_WRITE_MULTIPLIER` (1.25×) and
:data:`CACHE_READ_MULTIPLIER` (0.1×) the base input rate. Sources, read 2026-12-02: the
multipliers and the minimum lengths of Anthropic's prompt-caching page as summarised by
third-party gateway documentation in the stored docs (docs.orq.ai "Prompt caching": Opus
4.6/4.5 and Haiku 4.5 4,096 tokens, Sonnet 4.6 2,048, Sonnet 4.5 / Opus 4.1 / 4 / Sonnet 4 /
3.7 1,024; portkey.ai and others: reads 0.1×, 5-minute writes 1.25× base input); Anthropic's
own page was not among the stored snapshots. Models not in the table get the smallest
documented minimum, 1,024: a mark below a model's minimum is ignored by the API (the request
is processed and billed as uncached), so marking too early costs nothing, marking too late
loses the saving. A marked prefix that no later call reuses within 5 minutes costs its write
surcharge (0.25× base on those tokens) for nothing.

What is sent per model: :mod:`rizz.adapters.models.anthropic_params` holds, per
model id, whether the model takes ``temperature``, manual thinking (``budget_tokens``), or
only adaptive thinking, and how it turns thinking off (sources and dates there). In short:
``temperature`` goes only to models that take it (Haiku 4.5, Opus 4.5, Opus/Sonnet 4.6 and
ids the table does not know; none from Opus 4.7 on) -- determinism is not lost where it is
left out, since every answer is logged and replay never calls the model; ``?reasoning=N``
becomes ``budget_tokens=N`` where the model takes it (``N >= 1024``), else adaptive thinking
with ``display: "summarized"``; ``max_tokens`` is the answer budget + N either way. Without
an allowance, models that think by default get ``thinking={"type": "disabled"}`` (Opus 5,
Sonnet 5, Haiku 5.5) or ``between_tools`` (Sonnet 5.5), and models that always think (Opus
5.5, Fable/Mythos 5.x) the lowest effort. :attr:`AnthropicModel.request_options` is that
choice, recorded in ``run.json``. ``thinking`` / ``redacted_thinking`` blocks go to
``Generation.reasoning`` (content is read by block type, never by position; a block the
API left empty, ``display: "omitted"``, is recorded as ``[omitted thinking]``); inline
``<think>`` blocks in text are split off as well. An API refusal (HTTP 4xx other than
408/409/429) raises :class:`~rizz.adapters.models.base.ModelRequestError` naming the model id
and the field the API names.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from rizz.adapters.models.anthropic_params import MIN_THINKING_TOKENS, rejected_parameter, request_options, table_row as _row
from rizz.adapters.models.base import (
    Generation,
    Message,
    ModelConnectionError,
    ModelRequestError,
    ModelUnavailableError,
    answer_and_reasoning,
    check_generate_args,
    estimate_tokens,
    render_raw,
    sdk_create,
)
from rizz.extras import needs_extra

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_MAX_RETRIES",
    "PRICES_USD_PER_MTOK",
    "CONTEXT_WINDOWS",
    "AnthropicModel",
    "price_usd",
    "MIN_THINKING_TOKENS",
    "CACHE_MIN_TOKENS",
    "CACHE_READ_MULTIPLIER",
    "CACHE_WRITE_MULTIPLIER",
]

DEFAULT_MODEL_ID = "claude-haiku-4-5"
DEFAULT_MAX_RETRIES = 6
DEFAULT_TIMEOUT_S = 120.0

# (input, output) USD per million tokens; source, date and what is left out in the module docstring.
PRICES_USD_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-fable-5-2": (8.0, 40.0),
    "claude-fable-5-1": (10.0, 50.0),
    "claude-fable-5": (10.0, 50.0),
    "claude-mythos-5-1": (10.0, 50.0),
    "claude-mythos-5": (10.0, 50.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),  # deprecated, retires 2027-01-22
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),  # legacy, no retirement date
}
_M = 1_000_000
CONTEXT_WINDOWS: dict[str, int] = {  # tokens; same pages as the prices
    "claude-fable-5-2": _M, "claude-fable-5-1": _M, "claude-fable-5": _M, "claude-mythos-5": _M,
    "claude-opus-5-5": _M, "claude-opus-5": _M, "claude-opus-4-8": _M, "claude-opus-4-6": _M,
    "claude-opus-4-5": 200_000, "claude-sonnet-5-5": _M, "claude-sonnet-5": _M,
    "claude-sonnet-4-6": _M, "claude-haiku-5-5": _M, "claude-haiku-4-5": 200_000,
}
_DEFAULT_CONTEXT = 200_000

#: Smallest prefix (tokens) the API caches, per model (source in the module docstring); other ids: 1,024.
CACHE_MIN_TOKENS: dict[str, int] = {
    "claude-opus-4-6": 4096, "claude-opus-4-5": 4096, "claude-haiku-4-5": 4096, "claude-sonnet-4-6": 2048,
}
_CACHE_MIN_DEFAULT = 1024
#: Price of a token written to the 5-minute prompt cache, and of one read from it, as multiples
#: of the model's base input price (module docstring).
CACHE_WRITE_MULTIPLIER = 1.25
CACHE_READ_MULTIPLIER = 0.1

_COUNT_MEMO_MAX = 4096  # texts whose API token count is memoised (bounded memory)
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _price_row(model_id: str) -> str | None:
    """The :data:`PRICES_USD_PER_MTOK` key for ``model_id`` (exact, ``-YYYYMMDD`` or ``-latest``)."""
    return _row(model_id, PRICES_USD_PER_MTOK)


def price_usd(model_id: str, input_tokens: int, output_tokens: int, *, cache_write: int = 0, cache_read: int = 0) -> float | None:
    """Cost of one call in USD from :data:`PRICES_USD_PER_MTOK`; ``None`` for ids not in it.

    ``input_tokens``: uncached input tokens; ``cache_write`` / ``cache_read``: input tokens
    written to / read from the prompt cache, priced at :data:`CACHE_WRITE_MULTIPLIER` /
    :data:`CACHE_READ_MULTIPLIER` times the input rate."""
    row = PRICES_USD_PER_MTOK.get(_price_row(model_id) or "")
    if row is None:
        return None
    inp = input_tokens + CACHE_WRITE_MULTIPLIER * cache_write + CACHE_READ_MULTIPLIER * cache_read
    return (inp * row[0] + output_tokens * row[1]) / 1_000_000


def cache_min_tokens(model_id: str) -> int:
    """The smallest prompt prefix (tokens) ``model_id`` caches (:data:`CACHE_MIN_TOKENS`, else 1,024)."""
    key = _row(model_id, CACHE_MIN_TOKENS)
    return _CACHE_MIN_DEFAULT if key is None else CACHE_MIN_TOKENS[key]


def _context_window(model_id: str) -> int:
    """Tokens, from :data:`CONTEXT_WINDOWS` (matched as prices are); else :data:`_DEFAULT_CONTEXT`."""
    key = _row(model_id, CONTEXT_WINDOWS)
    return _DEFAULT_CONTEXT if key is None else CONTEXT_WINDOWS[key]


class AnthropicModel:
    """Claude through the Messages API.

    Args:
        model_id: e.g. ``"claude-haiku-4-5"`` (default).
        api_key: default ``$ANTHROPIC_API_KEY``.
        base_url: API root; default the SDK's (``$ANTHROPIC_BASE_URL`` or the public API).
        max_retries: SDK retries on 408/409/429/5xx/timeouts/connection errors.
        timeout_s: per-attempt timeout, seconds.
        temperature: sampling temperature (0 = near-greedy; the API is not bit-deterministic),
            sent only to models that take it (see the module docstring); ``None`` omits it.
        token_counting: ``"api"`` uses ``messages.count_tokens`` (memoised per text; after a
            failure it switches to the estimate for the rest of the session); ``"estimate"``
            uses :func:`~rizz.adapters.models.base.estimate_tokens` and never calls the API.
        client: an already built ``anthropic.Anthropic`` (tests); overrides the above.
        reasoning_tokens: thinking allowance N (0 = none; ``>= 1024`` where it becomes a
            manual budget); see the module docstring.

    Attributes:
        request_options: ``{"max_tokens_added": N, "rules": table row or None, "send":
            {...}}``, the fields every call adds (:func:`~rizz.adapters.models.anthropic_params.request_options`).

    Raises:
        ModelUnavailableError: ``anthropic`` not installed, or no API key.
        ValueError: ``reasoning_tokens`` between 1 and 1023 for a manual-budget model.
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
        reasoning_tokens: int = 0,
    ) -> None:
        self.model_id = model_id or DEFAULT_MODEL_ID
        self.reasoning_tokens = int(reasoning_tokens)
        self.request_options = request_options(self.model_id, self.reasoning_tokens, temperature)
        if token_counting not in ("api", "estimate"):
            raise ValueError(f"token_counting must be 'api' or 'estimate', got {token_counting!r}")
        self.name = f"anthropic:{self.model_id}" + (
            f"?reasoning={self.reasoning_tokens}" if self.reasoning_tokens else "")
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
        except ImportError as exc:
            raise ModelUnavailableError(needs_extra("the Anthropic backend", "anthropic", exc)) from None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelUnavailableError(
                "no Anthropic API key: set ANTHROPIC_API_KEY (Python API: AnthropicModel(api_key=...))"
            )
        self._client = anthropic.Anthropic(
            api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout_s
        )

    @staticmethod
    def wire_messages(messages: Sequence[Message], rendering: str, cache_min: int | None = None) -> tuple[str | None, list[dict]]:
        """(system, messages) in the Messages wire format; with ``cache_min`` (tokens) a user
        turn whose ``cache_prefix`` is at least that long (estimated) is sent as two text blocks,
        the prefix marked ``cache_control`` (the same text either way)."""
        if rendering == "raw":
            return None, [{"role": "user", "content": render_raw(messages)}]
        system = "\n\n".join(m.content for m in messages if m.role == "system") or None

        def content(m: Message) -> Any:
            k = m.cache_prefix
            if cache_min is None or m.role != "user" or not 0 < k < len(m.content) or estimate_tokens(m.content[:k]) < cache_min:
                return m.content
            return [{"type": "text", "text": m.content[:k], "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": m.content[k:]}]

        turns = [{"role": m.role, "content": content(m)} for m in messages if m.role != "system"]
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
            ModelRequestError: the API refused the request (see :meth:`create`).
            anthropic.APIError: the API still failed after the retries.
        """
        check_generate_args(messages, max_tokens, stop, rendering)
        system, turns = self.wire_messages(messages, rendering, cache_min_tokens(self.model_id))
        kwargs = self.request_fields(max_tokens)
        kwargs["messages"] = turns
        if system is not None:
            kwargs["system"] = system
        # The API rejects whitespace-only stop sequences; those are applied client-side.
        stops = [s for s in stop if s.strip()]
        local_stops = [s for s in stop if s and not s.strip()]
        if stops:
            kwargs["stop_sequences"] = stops
        t0 = time.perf_counter()
        resp, attempts = self.create_counted(**kwargs)
        latency = time.perf_counter() - t0
        text = "".join(getattr(b, "text", "") or "" for b in resp.content if b.type == "text")
        thinking = "\n\n".join(  # an empty block is thinking the API left out (display "omitted")
            (getattr(b, "thinking", None) or "[omitted thinking]") if b.type == "thinking" else "[redacted thinking]"
            for b in resp.content if b.type in ("thinking", "redacted_thinking"))
        finish = _FINISH.get(resp.stop_reason or "", resp.stop_reason or "unknown")
        cuts = [i for i in (text.find(s) for s in local_stops) if i >= 0]
        if cuts:
            text, finish = text[: min(cuts)], "stop"
        parts = answer_and_reasoning(text, thinking)
        usage = getattr(resp, "usage", None)
        n_in = int(getattr(usage, "input_tokens", 0) or 0)
        n_out = int(getattr(usage, "output_tokens", 0) or 0)
        written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        estimated = n_in + written + read == 0
        if estimated:  # a proxy that drops usage: count, flag, never a silent 0
            n_in = self.count_tokens(render_raw(messages))
            n_out = n_out or self.count_tokens(text) + self.count_tokens(thinking)
        return Generation(
            prompt_tokens=n_in + written + read,  # sent: the three parts of the prompt
            completion_tokens=n_out,
            latency_s=latency,
            cost_usd=price_usd(self.model_id, n_in, n_out, cache_write=written, cache_read=read),
            model=self.name,
            finish_reason=finish,
            usage_estimated=estimated,
            attempts=attempts,
            evaluated_prompt_tokens=n_in + written,  # a cache read is not evaluated again
            **parts,  # type: ignore[arg-type]
        )

    def request_fields(self, answer_tokens: int) -> dict[str, Any]:
        """``model``, ``max_tokens`` (``answer_tokens`` + the allowance) and this model's
        :attr:`request_options` fields as ``messages.create`` keyword arguments."""
        send = dict(self.request_options["send"])
        kwargs: dict[str, Any] = dict(model=self.model_id, max_tokens=answer_tokens + self.reasoning_tokens)
        if "temperature" in send:
            # Sent through extra_body: the SDK 2.x dropped the typed argument; the wire field
            # is still accepted by the models the table lets it go to.
            kwargs["extra_body"] = {"temperature": send.pop("temperature")}
        kwargs.update(send)
        return kwargs

    def create(self, **kwargs: Any) -> Any:
        """``messages.create(**kwargs)`` (retried by the SDK): the reply of :meth:`create_counted`."""
        return self.create_counted(**kwargs)[0]

    def create_counted(self, **kwargs: Any) -> tuple[Any, int]:
        """``messages.create(**kwargs)`` (retried by the SDK) and the HTTP requests it took
        (:func:`~rizz.adapters.models.base.sdk_create`).

        Raises:
            ModelRequestError: HTTP 4xx other than 408/409/429 (the SDK retries those): the
                message names the status, the model id and the field the API names.
            ModelConnectionError: the API could not be reached or timed out after the SDK's
                retries (``anthropic.APIConnectionError``, which includes its timeout error).
        """
        import anthropic

        try:
            return sdk_create(self._client.messages, **kwargs)
        except anthropic.APIConnectionError as err:
            raise ModelConnectionError(
                f"anthropic:{self.model_id}: cannot reach the Messages API ({type(err).__name__}:"
                f" {err}; after the SDK's retries)") from err
        except anthropic.APIStatusError as err:
            status = err.status_code
            if not 400 <= status < 500 or status in (408, 409, 429):
                raise
            body = getattr(err, "body", None)
            detail = body.get("error", {}) if isinstance(body, dict) else {}
            detail = detail if isinstance(detail, dict) else {}
            message = str(detail.get("message") or getattr(err, "message", "") or err)
            param = rejected_parameter(message) if status == 400 else None
            what = f" rejected `{param}`" if param else " refused the request"
            raise ModelRequestError(
                f"anthropic:{self.model_id}: the Messages API{what} (HTTP {status}"
                f" {detail.get('type') or type(err).__name__}: {message}). rizz sent"
                f" {self.request_options['send'] or 'no sampling/thinking fields'}"
                f" for this model (rules: {self.request_options['rules'] or 'not in the table, defaults'};"
                " rizz/adapters/models/anthropic_params.py)") from err

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` as one user message.

        With ``token_counting="api"``: ``messages.count_tokens`` (includes the few tokens of
        the message frame; memoised). If that call fails (offline, no permission), this and
        every later call use :func:`~rizz.adapters.models.base.estimate_tokens`.
        """
        if not text:
            return 0
        n = self._api_count(text, None, [{"role": "user", "content": text}])
        return estimate_tokens(text) if n is None else n

    def count_sent_tokens(self, messages: Sequence[Message], rendering: str) -> int | None:
        """Input tokens of ``messages`` as :meth:`generate` sends them (system field, turns,
        their frames), from one ``messages.count_tokens`` call on that request (memoised).

        Returns None with ``token_counting="estimate"`` or once the API count has failed:
        :func:`~rizz.adapters.models.base.sent_tokens` then estimates (contents plus a frame a
        message). Summing :meth:`count_tokens` per message would count a frame twice.
        """
        system, turns = self.wire_messages(messages, rendering)
        key = "\x00request " + json.dumps([system, turns], ensure_ascii=False, sort_keys=True)
        return self._api_count(key, system, turns)  # the prefix keeps it apart from a text's key

    def _api_count(self, key: str, system: str | None, turns: list[dict]) -> int | None:
        """``messages.count_tokens`` of (system, turns), memoised under ``key``; None when
        counting is not online (estimate mode, or after a failure, which turns it off)."""
        if not self._count_online:
            return None
        with self._lock:
            hit = self._count_memo.get(key)
        if hit is not None:
            return hit
        fields: dict[str, Any] = {"model": self.model_id, "messages": turns}
        if system is not None:
            fields["system"] = system
        try:
            client = self._client.with_options(max_retries=1, timeout=10.0)
            n = int(client.messages.count_tokens(**fields).input_tokens)
        except Exception:  # noqa: BLE001 - any API/transport failure -> offline estimate
            self._count_online = False
            return None
        with self._lock:
            if len(self._count_memo) >= _COUNT_MEMO_MAX:
                self._count_memo.clear()
            self._count_memo[key] = n
        return n

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r})"
