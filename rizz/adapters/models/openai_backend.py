"""OpenAI-compatible HTTP backend: llama.cpp server, llama_cpp.server, vLLM, Ollama, LM Studio.

Spec form ``openai:BASE_URL[#MODEL]``. ``BASE_URL`` is the server root
(``http://127.0.0.1:8000``, ``/v1`` is then appended) or any URL with a path, used as given
(``http://host:11434/v1``). ``MODEL`` defaults to the first id of ``GET /v1/models``.

``rendering="chat"`` -> ``POST /v1/chat/completions`` (the server applies the chat template);
``rendering="raw"`` -> ``POST /v1/completions`` with
:func:`~rizz.adapters.models.base.render_raw` of the messages.

Token counting, probed once and remembered, in this order:
1. ``POST {root}/extras/tokenize/count`` ``{"input": text}`` -> ``{"count": n}``
   (llama-cpp-python's ``llama_cpp.server``, routes in ``llama_cpp/server/app.py``);
2. ``POST {root}/tokenize`` ``{"content": text}`` -> ``{"tokens": [...]}`` (llama.cpp's C++
   ``llama-server``; vLLM serves ``/tokenize`` with ``{"prompt": text}`` -> ``{"count": n}``);
3. otherwise :func:`~rizz.adapters.models.base.estimate_tokens` (no tokenizer endpoint: Ollama,
   LM Studio).

Local servers have no prices: ``cost_usd`` is ``None``.

Evaluated prompt tokens: a server that reports ``usage.prompt_tokens_details.
cached_tokens`` (prompt tokens it reused from its prefix cache: vLLM, llama.cpp's server, the
OpenAI API) gives ``Generation.evaluated_prompt_tokens`` = ``prompt_tokens - cached_tokens``;
otherwise it is None (all of them).

Reasoning models (:mod:`rizz.adapters.models.reasoning`): a ``reasoning_content`` (or ``reasoning``) field of the
reply message and inline ``<think>``/``<thinking>`` blocks go to ``Generation.reasoning``;
``Generation.text`` is the answer alone (:mod:`rizz.adapters.models.reasoning`).

Missing usage: a server that returns no ``usage`` (or a zero/absent count)
gets its tokens counted with :meth:`OpenAICompatModel.count_tokens` (the server's tokenizer,
else the estimate): prompt = :func:`~rizz.adapters.models.base.sent_tokens` (the rendered
prompt (raw); in chat the contents plus the template's frame, exact with a ``sent_counter``,
else estimated), completion = answer + reasoning. Such a
``Generation`` has ``usage_estimated=True``.

Refusals: an HTTP 4xx other than 408/409/429 (a model id the server does not serve, a field
it does not take, a prompt longer than its context) raises
:class:`~rizz.adapters.models.base.ModelRequestError` with one line naming the model, the status
and the server's message, as the Anthropic backend does; the SDK retries 408/409/429/5xx
(``max_retries``) and then raises its own ``openai.APIStatusError``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

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
    sent_tokens,
)
from rizz.extras import needs_extra

__all__ = ["OpenAICompatModel", "DEFAULT_CONTEXT_WINDOW", "api_base_url"]

DEFAULT_CONTEXT_WINDOW = 8192  # SmolLM2's window; pass context_window= for other servers
DEFAULT_MAX_RETRIES = 4
_PROBE_TIMEOUT_S = 10.0


def api_base_url(base_url: str) -> str:
    """The OpenAI API root for ``base_url``: ``/v1`` appended when the URL has no path.

    Raises:
        ValueError: not an ``http(s)://host[:port][/path]`` URL.
    """
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http(s) base URL, got {base_url!r}")
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _server_message(err: Any) -> tuple[str, str]:
    """``(type, message)`` of an ``openai.APIStatusError``'s body, for the shapes local servers
    send: OpenAI/llama.cpp/Ollama ``{"error": {"message", "type"}}`` (the SDK keeps the inner
    dict), vLLM's flat ``{"object": "error", "message", "type"}``, FastAPI's ``{"detail": ...}``
    (422) and plain text. The message is folded onto one line."""
    body = getattr(err, "body", None)
    kind, message = "", ""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            body = inner
        elif isinstance(inner, str):
            message = inner
        kind = str(body.get("type") or "")
        message = message or str(body.get("message") or body.get("detail") or "")
    elif isinstance(body, str):
        message = body
    message = message or str(getattr(err, "message", "") or err)
    return kind or type(err).__name__, " ".join(message.split())


def _field(obj: Any, name: str) -> str:
    """A string field of an SDK object that the typed model may not declare (``""`` if none)."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value if isinstance(value, str) else ""


def _value(obj: Any, name: str) -> Any:
    """Field ``name`` of an SDK object, a dict, or a typed model's extras; None if absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    return value if value is not None else (getattr(obj, "model_extra", None) or {}).get(name)


class OpenAICompatModel:
    """A model behind an OpenAI-compatible server.

    Args:
        base_url: server root or API URL (see module docstring).
        model: model id sent with each request; ``None`` = first id of ``/v1/models``.
        api_key: bearer token; default ``$OPENAI_API_KEY`` or ``"sk-no-key"`` (local servers
            ignore it).
        context_window: the served model's window, tokens (servers do not report it uniformly).
        temperature: sampling temperature (0 = greedy).
        max_retries: SDK retries on 408/409/429/5xx/timeouts/connection errors.
        timeout_s: per-attempt timeout, seconds.
        reasoning_tokens: thinking allowance added to every call's ``max_tokens`` (spec
            option ``?reasoning=N``); ``name`` then ends in ``?reasoning=N``.

    Raises:
        ModelUnavailableError: ``openai`` not installed, or no model id could be discovered.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        temperature: float = 0.0,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout_s: float = 300.0,
        reasoning_tokens: int = 0,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ModelUnavailableError(needs_extra("the OpenAI-compatible backend", "openai", exc)) from None
        self.api_url = api_base_url(base_url)
        parts = urllib.parse.urlsplit(self.api_url)
        root_path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
        self.root_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, root_path, "", ""))
        self.context_window = int(context_window)
        self.sent_counter: Callable[[Sequence[Message], str], int | None] | None = None
        self.temperature = float(temperature)
        self._client = openai.OpenAI(
            base_url=self.api_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key",
            max_retries=max_retries,
            timeout=timeout_s,
        )
        self.model = model or self._discover_model()
        self.reasoning_tokens = int(reasoning_tokens)
        self.name = f"openai:{self.api_url}#{self.model}" + (
            f"?reasoning={self.reasoning_tokens}" if self.reasoning_tokens else "")
        self._count_route: str | None = None  # "count", "tokenize", "vllm" or "estimate"
        self._lock = threading.Lock()

    def _discover_model(self) -> str:
        import openai

        try:
            ids = [m.id for m in self._client.models.list()]
        except openai.APIConnectionError as exc:  # nothing answered: the id would not help
            raise ModelUnavailableError(
                f"cannot reach the server at {self.api_url} ({exc}): is it running? (rizz asked it for its "
                "model list because the spec gives no id, as in openai:BASE_URL#MODEL)"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - report any other transport/API failure the same way
            raise ModelUnavailableError(
                f"could not list models at {self.api_url}/models ({exc}); "
                "give the id as openai:BASE_URL#MODEL"
            ) from exc
        if not ids:
            raise ModelUnavailableError(f"{self.api_url}/models lists no model")
        return ids[0]

    def _create(self, rendering: str, messages: Sequence[Message], kwargs: dict[str, Any]) -> tuple[Any, int]:
        """The chat or raw completion request (retried by the client) and the HTTP requests it
        took (:func:`~rizz.adapters.models.base.sdk_create`); a transport failure
        becomes :class:`ModelConnectionError` naming the server, a refusal (HTTP 4xx other
        than 408/409/429) :class:`ModelRequestError` naming the model, status and message."""
        import openai

        try:
            if rendering == "chat":
                return sdk_create(self._client.chat.completions,
                                  messages=[{"role": m.role, "content": m.content} for m in messages], **kwargs)
            return sdk_create(self._client.completions, prompt=render_raw(messages), **kwargs)
        except openai.APIConnectionError as err:
            raise ModelConnectionError(
                f"{self.name}: cannot reach the server ({type(err).__name__}: {err};"
                " after the client's retries)") from err
        except openai.APIStatusError as err:
            status = err.status_code
            if not 400 <= status < 500 or status in (408, 409, 429):
                raise
            kind, message = _server_message(err)
            raise ModelRequestError(
                f"{self.name}: the server refused the request (HTTP {status} {kind}: {message})"
            ) from err

    def create_counted(self, **kwargs: Any) -> tuple[Any, int]:
        """``chat.completions.create(**kwargs)`` as given (the native tool-calling agent's
        request: its own messages, ``tools``, ``tool_choice``), retried by the client, and the
        HTTP requests it took (:func:`~rizz.adapters.models.base.sdk_create`).

        Raises:
            ModelConnectionError: the server could not be reached or timed out after the
                retries (``openai.APIConnectionError``), as :meth:`generate`.
            ModelRequestError: the server refused the request (HTTP 4xx other than
                408/409/429), in one line naming the server, the status and its message; on
                a 400 or 422, or a message naming tools, it says the server rejected the tools
                request and how to start one that takes tools (not when the message is about
                the context window: llama-server answers a prompt past it with a 400) (a server without tool-call
                support, such as llama.cpp's llama-server without ``--jinja``, refuses so).
            openai.APIStatusError: HTTP 408/409/429/5xx after the retries, unchanged (the agent
                reads the server's own context-window refusal, a 500, from it).
        """
        import openai

        try:
            return sdk_create(self._client.chat.completions, **kwargs)
        except openai.APIConnectionError as err:
            raise ModelConnectionError(
                f"{self.name}: cannot reach the server ({type(err).__name__}: {err};"
                " after the client's retries)") from err
        except openai.APIStatusError as err:
            status = err.status_code
            if not 400 <= status < 500 or status in (408, 409, 429):
                raise
            kind, message = _server_message(err)
            about_window = any(w in message.lower() for w in ("context", "exceed", "too long", "too many tokens"))
            if "tools" in kwargs and not about_window and (status in (400, 422) or "tool" in message.lower()):
                raise ModelRequestError(
                    f"{self.name}: the server at {self.api_url} rejected the tools request (HTTP {status} {kind}: {message}); "
                    "if it takes no tools (an episode's are sent as the API's tools, tool_choice auto), start it with "
                    "tool-call support (llama.cpp's llama-server: --jinja; vLLM: --enable-auto-tool-choice "
                    "--tool-call-parser NAME)") from err
            raise ModelRequestError(
                f"{self.name}: the server refused the request (HTTP {status} {kind}: {message})"
            ) from err

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        rendering: str = "chat",
    ) -> Generation:
        """One chat or raw completion.

        Raises:
            ValueError: bad arguments.
            ModelConnectionError: the server could not be reached or timed out after the
                retries (``openai.APIConnectionError``, which includes its timeout error).
            ModelRequestError: the server refused the request (HTTP 4xx other than
                408/409/429: unknown model id, unsupported field, prompt too long).
            openai.APIStatusError: HTTP 408/409/429/5xx after the retries.
        """
        check_generate_args(messages, max_tokens, stop, rendering)
        kwargs: dict[str, Any] = dict(
            model=self.model, max_tokens=max_tokens + self.reasoning_tokens,
            temperature=self.temperature, seed=0,
        )
        if stop:
            kwargs["stop"] = list(stop)
        t0 = time.perf_counter()
        resp, attempts = self._create(rendering, messages, kwargs)
        if rendering == "chat":
            msg = resp.choices[0].message
            text = msg.content or ""
            reasoning = _field(msg, "reasoning_content") or _field(msg, "reasoning")
        else:
            text = resp.choices[0].text or ""
            reasoning = _field(resp.choices[0], "reasoning_content")
        latency = time.perf_counter() - t0
        parts = answer_and_reasoning(text, reasoning)
        usage = resp.usage
        n_in = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        n_out = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        estimated = False
        if n_in == 0 or (n_out == 0 and (text or reasoning)):
            estimated = True
            n_in = n_in or sent_tokens(self, messages, rendering)
            n_out = n_out or self.count_tokens(text) + self.count_tokens(reasoning)
        cached = _value(_value(usage, "prompt_tokens_details"), "cached_tokens")
        evaluated = max(0, n_in - int(cached)) if isinstance(cached, int) and not estimated else None
        return Generation(
            prompt_tokens=n_in,
            completion_tokens=n_out,
            latency_s=latency,
            cost_usd=None,
            model=self.name,
            finish_reason=str(resp.choices[0].finish_reason or "stop"),
            usage_estimated=estimated,
            attempts=attempts,
            evaluated_prompt_tokens=evaluated,
            **parts,  # type: ignore[arg-type]
        )

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(
            self.root_url + path,
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=_PROBE_TIMEOUT_S) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def _count_via(self, route: str, text: str) -> int:
        if route == "count":
            return int(self._post("/extras/tokenize/count", {"input": text})["count"])
        if route == "tokenize":
            return len(self._post("/tokenize", {"content": text, "add_special": False})["tokens"])
        if route == "vllm":
            out = self._post("/tokenize", {"model": self.model, "prompt": text,
                                           "add_special_tokens": False})
            return int(out["count"])
        return estimate_tokens(text)

    def count_sent_tokens(self, messages: Sequence[Message], rendering: str) -> int | None:
        """The prompt tokens of ``messages`` as the server evaluates them, when the caller knows
        its template (:attr:`sent_counter`: the peers' bench sets it to the served GGUF's
        :class:`~rizz.adapters.models.embedded.SentTokenCounter`); None otherwise (the budget
        then estimates the template, :func:`~rizz.adapters.models.base.sent_tokens`)."""
        return self.sent_counter(messages, rendering) if self.sent_counter is not None else None

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` via the server's tokenizer endpoint, else the estimate."""
        if not text:
            return 0
        if self._count_route is not None:
            try:
                return self._count_via(self._count_route, text)
            except (OSError, ValueError, KeyError, TypeError):
                return estimate_tokens(text)
        with self._lock:
            for route in ("count", "tokenize", "vllm"):
                try:
                    n = self._count_via(route, text)
                except (OSError, ValueError, KeyError, TypeError):
                    continue
                self._count_route = route
                return n
            self._count_route = "estimate"
        return estimate_tokens(text)

    def __repr__(self) -> str:
        return f"OpenAICompatModel(name={self.name!r})"
