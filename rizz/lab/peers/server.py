"""llama.cpp's OpenAI-compatible server (``llama_cpp.server``), in-process on 127.0.0.1.

``rizz bench -P ...,peer:ace,...`` with the embedded model needs one model path that the
peers (which speak the OpenAI API) and rizz's own policies share: :class:`LlamaServer` loads
the same GGUF into ``llama_cpp.server``'s FastAPI app and serves it with uvicorn on a thread
of this process, on ``127.0.0.1`` and a free port, until :meth:`LlamaServer.stop`.

Determinism (the same settings as :class:`rizz.adapters.models.embedded.EmbeddedModel`):
- a prompt is decoded in batches of :data:`~rizz.adapters.models.embedded.PROMPT_CHUNK`
  tokens from its first token (``n_batch = n_ubatch``), and with ``kv_reuse`` (the default) a
  shared prefix is reused only in whole batches
  (:class:`~rizz.adapters.models.embedded.AlignedPrefixGenerate`), so a request is answered as
  from an empty context; a RAM prompt cache (``ModelSettings.cache``, 2 GiB of KV state; the
  server's own ``LlamaRAMCache`` replaced by
  :func:`~rizz.adapters.models.embedded.lean_ram_cache`, which keeps no copy of the logits with
  each state) keeps the KV state of recent prompts. mem0's fact-extraction and memory-update
  prompts and ACE's role prompts open with the same several thousand tokens on every call, so
  this is what makes those peers affordable on 2 cores. With ``kv_reuse=False``
  (``--model embedded?kv_reuse=0``) the context is reset before every request instead;
- only the sampled token's logits are kept (``logits_all`` False, as the in-process backend;
  ``llama_cpp.server``'s own default keeps a vocabulary-sized row per evaluated token: with the
  1.5B, 8.5 GB peak RSS against 3.3 GB and 40 against 51 prompt tokens/s, the same replies;
  ``benchmarks/peer_server_memory.py``, results/2026-12-05-peer-server-logits.md);
- every completion request is pinned to greedy decoding as the in-process backend runs it
  (:data:`PINNED`: temperature 0, seed 0, and llama-cpp-python's library default
  ``repeat_penalty`` 1.0 where the server's own default is 1.1), whatever the client sends:
  the peers' clients (litellm, the openai SDK) send their own temperatures.

Threads: ``RIZZ_THREADS`` (default 2), as the embedded backend. Window: the model's trained
window unless ``n_ctx`` says otherwise (8192 tokens for SmolLM2-135M, 32768 for the
Qwen2.5-Coder models: mem0's fact-extraction prompts exceed 8192 tokens after a few steps).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from rizz.adapters.asgi import replay_body
from rizz.adapters.models.base import ModelUnavailableError
from rizz.adapters.models.embedded import PROMPT_CHUNK, AlignedPrefixGenerate, default_gguf_path, lean_ram_cache

__all__ = ["MODEL_ALIAS", "PINNED", "LlamaServer"]

MODEL_ALIAS = "smollm2"  # the model id the server answers to (GET /v1/models)
STARTUP_TIMEOUT_S = 120.0
#: Sampling fields forced on every ``/v1/completions`` and ``/v1/chat/completions`` request
#: (the values :class:`rizz.adapters.models.embedded.EmbeddedModel` decodes with).
PINNED = {"temperature": 0.0, "seed": 0, "repeat_penalty": 1.0}
_COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")


class _PinSampling:
    """ASGI middleware: rewrite the JSON body of completion requests with :data:`PINNED`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") not in _COMPLETION_PATHS:
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            data = json.loads(body)
            if isinstance(data, dict):
                data.update(PINNED)
                body = json.dumps(data).encode("utf-8")
        except ValueError:
            pass  # the server answers a malformed body itself
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        scope = dict(scope, headers=headers + [(b"content-length", str(len(body)).encode())])
        await self.app(scope, replay_body(receive, body), send)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _ResettingProxy:
    """Wraps llama_cpp.server's ``LlamaProxy``: every model handed to a request is reset first
    (the server holds its lock while the request uses the model, so this is race-free)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __call__(self, model: str | None = None) -> Any:
        llama = self._inner(model)
        llama.reset()
        return llama

    def __iter__(self) -> Any:
        return iter(self._inner)

    def __getitem__(self, model: str) -> Any:
        return self._inner[model]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class LlamaServer:
    """``llama_cpp.server`` serving one GGUF on ``http://127.0.0.1:PORT`` from this process.

    Args:
      gguf: the weights (default: the embedded model's SmolLM2-135M-Instruct Q4_1).
      n_ctx: context window, tokens (0: the model's trained window). n_threads: llama.cpp threads
        (default ``RIZZ_THREADS`` or 2).
      port: TCP port (default: a free one).
      chat_format: llama-cpp-python's chat handler (``ModelSettings.chat_format``); None = the
        GGUF's own template. ``"chatml-function-calling"`` serves OpenAI ``tools`` /
        ``tool_calls`` (SmolLM2 speaks ChatML); it calls a tool only when the request
        says ``tool_choice="auto"`` or names one.
      kv_reuse: keep the KV cache between requests and cache recent prompts' states, reusing
        whole batches only (module docstring; the same answers); False: every request starts
        from an empty context.
      logits_all: keep every evaluated token's logits, as ``llama_cpp.server`` does by default
        (only ``logprobs`` needs them, which no peer asks for). False (rizz's default, as the
        in-process backend): only the sampled token's, so a prompt costs no output projection
        per token and no vocabulary-sized row of RAM per token (151,936 float32 = 594 KiB with
        the Qwen2.5-Coder models: a 9,000-token mem0 prompt touched 5.2 GB, and every saved
        prompt state copied them; ``benchmarks/peer_server_memory.py`` prints both).

    Use as a context manager, or :meth:`start` / :meth:`stop`. ``url`` is the server root
    (``openai:{url}#smollm2`` is its rizz model spec).

    Raises:
      ModelUnavailableError: the GGUF or ``llama_cpp.server``'s extras (fastapi, uvicorn,
        sse-starlette, starlette-context, pydantic-settings) are missing.
      RuntimeError: the server did not answer ``GET /v1/models`` within STARTUP_TIMEOUT_S.
    """

    def __init__(self, gguf: str | Path | None = None, *, n_ctx: int = 0, n_threads: int | None = None,
                 port: int | None = None, chat_format: str | None = None, kv_reuse: bool = True,
                 logits_all: bool = False) -> None:
        self.gguf = Path(gguf) if gguf is not None else default_gguf_path()
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or os.environ.get("RIZZ_THREADS", "2"))
        self.port = int(port or _free_port())
        self.chat_format = chat_format
        self.kv_reuse = bool(kv_reuse)
        self.logits_all = bool(logits_all)
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def spec(self) -> str:
        """The ``--model`` spec of this server for rizz's own backend."""
        return f"openai:{self.url}#{MODEL_ALIAS}"

    def start(self) -> LlamaServer:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import uvicorn
            from llama_cpp.server import app as server_app
            from llama_cpp.server.settings import ModelSettings, ServerSettings
        except ImportError as e:
            raise ModelUnavailableError(f"llama_cpp.server needs its extras ({e}); pip install 'rizz[peers]'") from None
        ms = ModelSettings(model=str(self.gguf), model_alias=MODEL_ALIAS, n_ctx=self.n_ctx, n_threads=self.n_threads,
                           n_threads_batch=self.n_threads, seed=0, verbose=False, n_batch=PROMPT_CHUNK,
                           n_ubatch=PROMPT_CHUNK, chat_format=self.chat_format, cache=self.kv_reuse,
                           logits_all=self.logits_all)
        app = server_app.create_app(server_settings=ServerSettings(host="127.0.0.1", port=self.port), model_settings=[ms])
        if self.kv_reuse:  # the same cap, without a copy of the logits per state (lean_ram_cache)
            llama: Any = getattr(server_app._llama_proxy, "_current_model", None)  # loaded by create_app
            llama.set_cache(lean_ram_cache(ms.cache_size))
            llama.generate = AlignedPrefixGenerate(llama, PROMPT_CHUNK)
        else:
            server_app._llama_proxy = _ResettingProxy(server_app._llama_proxy)
        config = uvicorn.Config(_PinSampling(app), host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="llama-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                pass
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama_cpp.server did not come up on {self.url}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop serving and free the model (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._server = self._thread = None
        try:
            from llama_cpp.server import app as server_app

            proxy = server_app._llama_proxy
            if proxy is not None:
                getattr(proxy, "free", lambda: None)()
            server_app._llama_proxy = None
        except ImportError:
            pass

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
