"""A loopback OpenAI-compatible proxy that records every call a peer makes, by kind.

A peer (ACE, mem0) is given ``base_url = {proxy.url}/k/{kind}/v1``, one kind per role (ACE:
``answer``, ``reflect``, ``curate``; mem0: ``memory``). :class:`CallProxy` forwards
``POST /k/{kind}/v1/...`` to ``{upstream}/v1/...`` unchanged and appends one record per
completion call to :attr:`CallProxy.calls`: kind, prompt and completion tokens (the upstream's
``usage``), latency in seconds, whether it came from the cache, and the request's messages and
the reply's text (kept for the report's evidence of what a peer saw and said).

Without an OpenAI-compatible upstream (``--model anthropic:…``), ``backend`` (a rizz
``ModelBackend``) answers instead: a ``/chat/completions`` request's ``messages`` (text parts
of list contents joined), ``max_tokens`` (or ``max_completion_tokens``; 256 when absent) and
``stop`` go to ``backend.generate``, and the reply comes back as an OpenAI ``chat.completion``
with the backend's ``usage`` (and its price, ``rizz_cost_usd``, which the call record keeps
as ``cost_usd``); a legacy ``/completions`` ``prompt`` is one user turn. A request with
``tools`` (ACE's roles under ``RIZZ_PEER_ACE_MODE=tools``: instructor's TOOLS mode) goes to an
Anthropic backend as a Messages call with those tools and ``tool_choice`` translated, and its
``tool_use`` blocks come back as ``tool_calls`` (:func:`_anthropic_tools`). Sampling
fields (temperature, seed, …) and ``response_format`` are the backend's own, as the embedded
path pins them. ``GET /v1/models`` lists the backend's name. A model failure is HTTP 502.

Cache: with ``cache`` (a sqlite file), a request body already answered is served from it (the
upstream decodes greedily, so the same body gives the same reply); a rerun of a bench pays once
per prompt, as rizz's own response cache does. Only HTTP 200 replies are stored.

Binds 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rizz.adapters.models.anthropic_backend import price_usd
from rizz.adapters.models.base import Message, ModelError

__all__ = ["CallProxy"]

_COMPLETIONS = ("/chat/completions", "/completions")


def _text(content: Any) -> str:
    """A message's text: a string, or the ``text`` parts of an OpenAI content list joined."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _named(name: str, error: Exception) -> str:
    """``error``'s message, opening with the backend's ``name`` (once: rizz's model errors already do)."""
    return str(error) if str(error).startswith(name) else f"{name}: {error}"


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    """An OpenAI ``tool_choice`` as the Messages API's: a named function → ``{"type": "tool",
    "name"}``, ``"required"`` → ``any``, ``"auto"`` → ``auto``, ``"none"`` → ``none``; absent → None."""
    if choice is None:
        return None
    if isinstance(choice, dict):
        return {"type": "tool", "name": str(choice["function"]["name"])}
    kinds = {"required": "any", "auto": "auto", "none": "none"}
    if choice not in kinds:
        raise ValueError(f"tool_choice {choice!r} is not one of a function, {', '.join(kinds)}")
    return {"type": kinds[choice]}


def _anthropic_tools(backend: Any, req: dict[str, Any], messages: list[Message], max_tokens: int, stop: tuple[str, ...],
                     body: bytes) -> dict[str, Any]:
    """An OpenAI function-calling ``chat.completion`` answered by an Anthropic backend's
    Messages call with ``tools``: each OpenAI function (name, description, ``parameters``) as a
    tool (``input_schema``), ``tool_choice`` as :func:`_tool_choice`; the reply's ``tool_use``
    blocks come back as ``tool_calls`` (``arguments``: the input as JSON) with finish reason
    ``tool_calls``, its text blocks as ``content``. Raises ModelError from the backend, and
    KeyError/TypeError/ValueError on a malformed ``tools``."""
    system, turns = backend.wire_messages(messages, "chat")
    kwargs = backend.request_fields(max_tokens)
    kwargs["messages"] = turns
    if system is not None:
        kwargs["system"] = system
    kwargs["tools"] = [{"name": str(t["function"]["name"]), "description": str(t["function"].get("description") or ""),
                        "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
                       for t in req["tools"]]
    if (choice := _tool_choice(req.get("tool_choice"))) is not None:
        kwargs["tool_choice"] = choice
    if stops := [s for s in stop if s.strip()]:
        kwargs["stop_sequences"] = stops
    resp, _ = backend.create_counted(**kwargs)
    text = "".join(getattr(b, "text", "") or "" for b in resp.content if b.type == "text")
    calls = [{"id": str(b.id), "type": "function", "function": {"name": str(b.name), "arguments": json.dumps(b.input)}}
             for b in resp.content if b.type == "tool_use"]
    usage = getattr(resp, "usage", None)
    n_in, n_out = int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else "length" if resp.stop_reason == "max_tokens" else "stop"
    return {"id": "rizz-" + hashlib.sha256(body).hexdigest()[:16], "object": "chat.completion", "created": 0,
            "model": backend.name, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
            "rizz_cost_usd": price_usd(backend.model_id, n_in, n_out)}


class _Cache:
    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, body BLOB NOT NULL)")
        self._db.commit()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM replies WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, body: bytes) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO replies (key, body) VALUES (?, ?)", (key, body))
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CallProxy:
    """Forward ``/k/{kind}/v1/*`` to ``upstream`` (an OpenAI API root ending in ``/v1``), recording calls.

    Args:
      upstream: e.g. ``http://127.0.0.1:8000/v1``.
      cache: optional sqlite file for replies (see module docstring).
      api_key: bearer token forwarded upstream (local servers ignore it).
      backend: answer completion calls with this rizz ``ModelBackend`` instead of an upstream
        (see module docstring); ``upstream`` is then unused.

    Attributes:
      url: ``http://127.0.0.1:PORT``; ``base_url(kind)`` gives a peer's OpenAI base URL.
      calls: list of call records (dicts), appended in arrival order; :meth:`take` empties it.
    """

    def __init__(self, upstream: str | None, *, cache: str | Path | None = None, api_key: str | None = None,
                 timeout_s: float = 600.0, backend: Any = None) -> None:
        if upstream is None and backend is None:
            raise ValueError("CallProxy needs an OpenAI-compatible upstream or a backend to answer with")
        self.upstream = (upstream or "").rstrip("/")
        self.backend = backend
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.calls: list[dict[str, Any]] = []
        self._cache = _Cache(Path(cache)) if cache is not None else None
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy._handle(self, b"")

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                proxy._handle(self, self.rfile.read(n) if n else b"")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="peer-proxy", daemon=True)
        self._thread.start()

    def base_url(self, kind: str) -> str:
        """The OpenAI base URL (ending in ``/v1``) a peer role uses so its calls count as ``kind``."""
        return f"{self.url}/k/{kind}/v1"

    def take(self) -> list[dict[str, Any]]:
        """Return and clear the calls recorded so far."""
        with self._lock:
            out, self.calls = self.calls, []
        return out

    def _handle(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = h.path.split("/", 3)  # "", "k", kind, "v1/..."
        if len(parts) < 4 or parts[1] != "k" or not parts[3].startswith("v1"):
            self._reply(h, 404, b'{"error": {"message": "expected /k/{kind}/v1/..."}}')
            return
        kind, rest = parts[2], parts[3][2:]
        target = self.upstream + rest
        is_call = h.command == "POST" and rest.split("?")[0] in _COMPLETIONS
        key = hashlib.sha256(rest.encode() + b"\0" + body).hexdigest() if is_call else None
        t0 = time.perf_counter()
        cached = self._cache.get(key) if (self._cache is not None and key) else None
        if cached is not None:
            status, data = 200, cached
        elif self.backend is not None:
            status, data = self._answer(h.command, rest.split("?")[0], body)
        else:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            req = urllib.request.Request(target, data=body if h.command == "POST" else None, headers=headers, method=h.command)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    status, data = resp.status, resp.read()
            except urllib.error.HTTPError as e:
                status, data = e.code, e.read()
            except OSError as e:
                status, data = 502, json.dumps({"error": {"message": f"upstream unreachable: {e}"}}).encode()
        if cached is None and status == 200 and key and self._cache is not None:
            self._cache.put(key, data)
        if is_call:
            self._record(kind, body, status, data, time.perf_counter() - t0, cached is not None)
        self._reply(h, status, data)

    def _answer(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        """One OpenAI-shaped reply from :attr:`backend` (see module docstring)."""
        name = getattr(self.backend, "name", "backend")
        if method == "GET" and path == "/models":
            return 200, json.dumps({"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                                "owned_by": "rizz"}]}).encode()
        if method != "POST" or path not in _COMPLETIONS:
            return 404, json.dumps({"error": {"message": f"{method} /v1{path}: not served over a rizz backend"}}).encode()
        try:
            req = json.loads(body)
            if path == "/completions":
                messages = [Message("user", str(req["prompt"]))]
            else:
                messages = [Message(m["role"] if m["role"] in ("system", "user", "assistant") else "user", _text(m.get("content")))
                            for m in req["messages"]]
            stop = req.get("stop") or ()
            stop = (stop,) if isinstance(stop, str) else tuple(stop)
            max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 256)
        except (ValueError, KeyError, TypeError) as e:
            return 400, json.dumps({"error": {"message": f"bad completion request: {e}"}}).encode()
        if path == "/chat/completions" and req.get("tools") and callable(getattr(self.backend, "create_counted", None)):
            try:  # a function-calling request (instructor's TOOLS mode): the Messages API's own tools
                return 200, json.dumps(_anthropic_tools(self.backend, req, messages, max_tokens, stop, body)).encode()
            except ModelError as e:
                return 502, json.dumps({"error": {"message": _named(name, e)}}).encode()
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                return 400, json.dumps({"error": {"message": f"bad tools request: {e}"}}).encode()
        try:
            gen = self.backend.generate(messages, max_tokens=max_tokens, stop=stop, rendering="chat")
        except ModelError as e:
            return 502, json.dumps({"error": {"message": _named(name, e)}}).encode()
        finish = gen.finish_reason if gen.finish_reason in ("stop", "length") else "stop"
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if path == "/completions":
            choice["text"] = gen.text
        else:
            choice["message"] = {"role": "assistant", "content": gen.text}
        return 200, json.dumps({
            "id": "rizz-" + hashlib.sha256(body).hexdigest()[:16], "object": "chat.completion" if path != "/completions" else "text_completion",
            "created": 0, "model": name, "choices": [choice],
            "usage": {"prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                      "total_tokens": gen.prompt_tokens + gen.completion_tokens},
            "rizz_cost_usd": gen.cost_usd}).encode()

    def _record(self, kind: str, body: bytes, status: int, data: bytes, latency: float, cached: bool) -> None:
        try:
            req = json.loads(body)
        except ValueError:
            req = {}
        try:
            resp = json.loads(data)
        except ValueError:
            resp = {}
        usage = resp.get("usage") or {}
        choice = (resp.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content") if "message" in choice else choice.get("text")
        if not text and message.get("tool_calls"):  # a forced function call (instructor's TOOLS mode): its arguments
            text = "\n".join(str((c.get("function") or {}).get("arguments", "")) for c in message["tool_calls"])
        rec = {"kind": kind, "prompt_tokens": int(usage.get("prompt_tokens") or 0),
               "completion_tokens": int(usage.get("completion_tokens") or 0), "latency_s": round(latency, 4),
               "cost_usd": resp.get("rizz_cost_usd"), "cached": cached, "status": status,
               "request": req.get("messages", req.get("prompt")), "reply": text if status == 200 else resp}
        with self._lock:
            self.calls.append(rec)

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the peer went away (Ctrl-C): its reply is cached already
            pass

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> CallProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
