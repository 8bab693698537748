"""One model path for every bench entry when peers are benched (issue #15, "Model").

:func:`peer_model` turns the bench's ``--model`` spec into (a) rizz's own backend and (b) the
OpenAI-compatible upstream the peers call through the recording proxy:

- ``embedded`` / ``gguf:PATH``: starts :class:`~rizz.shell.peers.server.LlamaServer` (the same
  GGUF, greedy sampling pinned) and stops it afterwards; rizz's policies use
  ``openai:{server}#smollm2`` with the ``raw`` rendering they use in-process.
- ``openai:BASE_URL[#MODEL]``: that server for every entry.
- ``anthropic:…``: refused (the peers would need their own Anthropic clients; not built).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import attrs

from rizz.shell.models import load_model

__all__ = ["PeerModel", "peer_model"]


@attrs.frozen
class PeerModel:
    """``backend``: rizz's (cached) model; ``upstream``: OpenAI API root for the peers;
    ``model_id``: the id they send; ``rendering``: rizz's default rendering for this path."""

    backend: Any
    upstream: str
    model_id: str
    rendering: str


@contextlib.contextmanager
def peer_model(spec: str, cache: str | Path | None) -> Iterator[PeerModel]:
    """Context manager yielding a :class:`PeerModel` for ``spec`` (see module docstring).

    Raises ValueError (an ``anthropic:`` or malformed spec), ModelUnavailableError, RuntimeError
    (the llama server did not start).
    """
    kind = spec.strip().partition(":")[0]
    if kind in ("embedded", "gguf"):
        from rizz.shell.peers.server import MODEL_ALIAS, LlamaServer

        gguf = spec.strip().partition(":")[2] or None
        with LlamaServer(gguf) as server:
            backend = load_model(server.spec)
            # named by what it serves, not by its (free, changing) port: a rerun hits the
            # response cache and resumes its RUN_DIRs
            backend.name = f"llama_cpp.server:{server.gguf.stem}"
            if cache is not None:
                from rizz.shell.models import CachedModel, ResponseCache

                backend = CachedModel(backend, ResponseCache(cache))
            yield PeerModel(backend, server.url + "/v1", MODEL_ALIAS, "raw")
        return
    if kind == "openai":
        backend = load_model(spec, cache=cache)
        inner = getattr(backend, "backend", backend)  # CachedModel wraps the OpenAICompatModel
        yield PeerModel(backend, inner.api_url, inner.model, "chat")
        return
    raise ValueError(f"--model {spec!r}: peers need an OpenAI-compatible path (embedded, gguf:PATH or openai:BASE_URL[#MODEL])")
