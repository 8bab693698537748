"""One model path for every bench entry when peers are benched (docs/peers.md).

:func:`peer_model` turns the bench's ``--model`` spec into (a) rizz's own backend and (b) the
OpenAI-compatible upstream the peers call through the recording proxy:

- ``embedded`` / ``gguf:PATH`` (the server keeps a prompt cache, reusing whole batches; ``?kv_reuse=0``: none):
  starts :class:`~rizz.lab.peers.server.LlamaServer` (the same GGUF, greedy sampling pinned)
  and stops it afterwards; rizz's policies use
  ``openai:{server}#smollm2`` with the ``raw`` rendering they use in-process.
- ``openai:BASE_URL[#MODEL]``: that server for every entry.
- ``anthropic:MODEL``: rizz's Anthropic backend for rizz's entries, and the same backend
  answers the peers' OpenAI-shaped calls inside the recording proxy
  (:class:`~rizz.lab.peers.proxy.CallProxy` with ``backend``): the peers keep their own
  OpenAI clients, every entry reaches one model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from rizz.adapters.models import CachedModel, ResponseCache, load_model
from rizz.adapters.models.embedded import SentTokenCounter
from rizz.adapters.models.openai_backend import OpenAICompatModel
from rizz.adapters.models.shipped import gguf_of_spec
from rizz.adapters.models.spec import split_options
from rizz.lab.peers.server import MODEL_ALIAS, LlamaServer

__all__ = ["PeerModel", "peer_model"]


@attrs.frozen
class PeerModel:
    """``backend``: rizz's (cached) model; ``upstream``: OpenAI API root for the peers (None:
    the proxy answers with ``answer_with``); ``model_id``: the id they send; ``rendering``:
    rizz's default rendering for this path; ``answer_with``: the backend the proxy answers the
    peers' calls with when there is no OpenAI-compatible upstream (``anthropic:``)."""

    backend: Any
    upstream: str | None
    model_id: str
    rendering: str
    answer_with: Any = None


@contextlib.contextmanager
def peer_model(spec: str, cache: str | Path | None) -> Iterator[PeerModel]:
    """Context manager yielding a :class:`PeerModel` for ``spec`` (see module docstring).

    Raises ValueError (a spec of another kind, or malformed), ModelUnavailableError, RuntimeError
    (the llama server did not start).
    """
    kind = spec.strip().partition(":")[0]
    if kind in ("embedded", "gguf"):
        base, opts = split_options(spec.strip())
        if opts.get("reasoning"):
            raise ValueError(f"--model {spec!r}: ?reasoning=N does not apply to a local model")
        gguf, rendering = gguf_of_spec(base)  # embedded[:NAME]: the shipped model's verified file
        kv_reuse = bool(opts.get("kv_reuse", 1))
        with LlamaServer(gguf, kv_reuse=kv_reuse) as server:
            backend = load_model(server.spec)
            # named by what it serves, not by its (free, changing) port: a rerun hits the
            # response cache and resumes its RUN_DIRs
            # (kv_reuse or not: the same answers, one name)
            backend.name = f"llama_cpp.server:{server.gguf.stem}"
            if isinstance(backend, OpenAICompatModel):  # the served file's template: the budget bounds prompts as sent
                backend.sent_counter = SentTokenCounter.of_file(gguf)
            if cache is not None:
                backend = CachedModel(backend, ResponseCache(cache))
            yield PeerModel(backend, server.url + "/v1", MODEL_ALIAS, rendering)
        return
    if kind == "openai":
        backend = load_model(spec, cache=cache)
        inner = getattr(backend, "backend", backend)  # CachedModel wraps the OpenAICompatModel
        yield PeerModel(backend, inner.api_url, inner.model, "chat")
        return
    if kind == "anthropic":
        backend = load_model(spec, cache=cache)
        inner = getattr(backend, "backend", backend)  # CachedModel wraps the AnthropicModel
        # the peers get the uncached backend (the proxy keeps their own cache), as on the
        # embedded path: a peer's prompt that equals a rizz entry's is paid for again
        yield PeerModel(backend, None, inner.model_id, "chat", answer_with=inner)
        return
    raise ValueError(f"--model {spec!r}: peers need embedded, gguf:PATH, openai:BASE_URL[#MODEL] or anthropic:MODEL")
