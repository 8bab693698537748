"""Embedder (real bundled all-MiniLM-L6-v2) and the content-addressed embedding store."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rizz.adapters.embedder import Embedder
from rizz.store.embeddings import EmbeddingStore, embedding_key

SENTENCES = [
    "The cat is sitting on the mat.",
    "A kitten rests on a rug.",
    "The central bank raised interest rates by half a point.",
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def test_import_is_lazy() -> None:
    code = "import sys, rizz.adapters.embedder, rizz.store.embeddings; print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


@pytest.mark.slow
def test_embed_shape_dtype_norms(embedder: Embedder) -> None:
    assert embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.dim == 384
    vecs = embedder.embed(SENTENCES)
    assert vecs.shape == (3, 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_paraphrase_closer_than_unrelated(embedder: Embedder) -> None:
    a, b, c = embedder.embed(SENTENCES)
    assert float(a @ b) > 0.5 > float(a @ c)
    assert float(a @ b) > float(a @ c) + 0.3
    assert float(a @ b) > float(b @ c) + 0.3


@pytest.mark.slow
def test_embed_deterministic_and_empty(embedder: Embedder) -> None:
    first = embedder.embed(SENTENCES)
    second = embedder.embed(SENTENCES)
    assert first.tobytes() == second.tobytes()
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        embedder.embed("not a list")


def test_unknown_model_refused() -> None:
    with pytest.raises(ValueError, match="hub downloads are disabled"):
        Embedder("some-org/some-model")


def test_key_depends_on_text_and_embedder() -> None:
    k = embedding_key("hello", "e1")
    assert len(k) == 64 and k == embedding_key("hello", "e1")
    assert k != embedding_key("hello", "e2")
    assert k != embedding_key("hello ", "e1")
    # the separator keeps (name, text) pairs apart
    assert embedding_key("xb", "a") != embedding_key("b", "ax")


def test_store_round_trip_bit_exact(tmp_path) -> None:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((5, 384)).astype(np.float32)
    store = EmbeddingStore(tmp_path / "emb")
    keys = [store.put(embedding_key(f"text {i}", "e"), v) for i, v in enumerate(vecs)]
    reopened = EmbeddingStore(tmp_path / "emb")
    back = reopened.get_many(keys)
    assert back.dtype == np.float32
    assert back.tobytes() == vecs.tobytes()
    assert keys[0] in reopened
    # entries are immutable: a second put under the same key keeps the first bytes
    reopened.put(keys[0], np.zeros(384, dtype=np.float32))
    assert reopened.get(keys[0]).tobytes() == vecs[0].tobytes()
    with pytest.raises(KeyError):
        reopened.get("0" * 64)
    with pytest.raises(ValueError):
        reopened.get("../etc")
    # no temporary files left behind
    assert not list((tmp_path / "emb").rglob(".tmp-*"))


def test_store_serves_recent_vectors_from_memory_bounded_and_unaliased(tmp_path, monkeypatch) -> None:
    import rizz.store.embeddings as embed_mod

    monkeypatch.setattr(embed_mod, "VECTOR_CACHE_MAX", 2)
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((3, 8)).astype(np.float32)
    store = EmbeddingStore(tmp_path)
    keys = [store.put(embedding_key(f"t{i}", "e"), v) for i, v in enumerate(vecs)]
    reads: list[object] = []
    real_load = np.load
    monkeypatch.setattr(embed_mod.np, "load", lambda *a, **k: reads.append(a[0]) or real_load(*a, **k))
    assert store.get(keys[2]).tobytes() == vecs[2].tobytes() and reads == []  # put last: in memory
    assert store.get(keys[0]).tobytes() == vecs[0].tobytes() and len(reads) == 1  # evicted (cap 2): read back
    assert store.get(keys[0]).tobytes() == vecs[0].tobytes() and len(reads) == 1  # now in memory again
    got = store.get(keys[0])
    got[:] = 0.0  # the caller's copy: the store's bytes do not change
    assert store.get(keys[0]).tobytes() == vecs[0].tobytes()
    assert len(store._cache) == 2  # bounded
    fresh = np.ones(8, dtype=np.float32)
    k = store.put(embedding_key("fresh", "e"), fresh)
    fresh[:] = 7.0  # nor does a later change to the array that was put
    assert store.get(k).tolist() == [1.0] * 8 and len(reads) == 1  # served from memory


def test_store_survives_partial_write(tmp_path) -> None:
    store = EmbeddingStore(tmp_path)
    key = store.put(embedding_key("kept", "e"), np.arange(4, dtype=np.float32))
    # a killed writer leaves at most a stray temp file; earlier entries still read back
    stray = tmp_path / key[:2] / ".tmp-deadbeef.npy"
    stray.write_bytes(b"\x93NUMPY partial")
    assert store.get(key).tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.slow
def test_store_embed_reads_back_same_bytes(tmp_path, embedder: Embedder) -> None:
    store = EmbeddingStore(tmp_path)
    keys, vecs = store.embed(embedder, SENTENCES + [SENTENCES[0]])
    assert keys[0] == keys[3] == embedding_key(SENTENCES[0], embedder.name)
    assert vecs.shape == (4, 384)
    # a later call (different batch) returns the stored bytes, not a recomputation
    keys2, vecs2 = store.embed(embedder, [SENTENCES[2]])
    assert vecs2[0].tobytes() == vecs[2].tobytes()
    assert keys2 == (keys[2],)
