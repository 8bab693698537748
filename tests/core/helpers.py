"""Synthetic, clustered task families for core tests (no model, no embedder)."""

from __future__ import annotations

import math

import numpy as np

from rizz.core import Label, StepInput

DIM = 32
# family -> (label, shape, verifier)
FAMILIES = {
    0: (Label("classify", "monetary-policy-stance"), "letter", "exact_match"),
    1: (Label("solve-math", "arithmetic-word-problems"), "number", "exact_match"),
    2: (Label("summarize", "meeting-transcripts"), "text", "rouge_l"),
    3: (Label("answer-question", "multi-hop-wikipedia"), "span", "token_f1"),
}


def unit(v: np.ndarray) -> np.ndarray:
    """``v / |v|`` as float32, the norm from :func:`math.fsum` (exactly rounded). Not
    ``np.linalg.norm``: its BLAS dot differs in the last bits between OpenBLAS kernels (one per
    CPU, or ``OPENBLAS_CORETYPE``), which made golden digests depend on the machine."""
    n = math.sqrt(math.fsum(x * x for x in np.asarray(v, np.float64).ravel().tolist()))
    return np.asarray(v, np.float32) / np.float32(n) if n > 0 else np.asarray(v, np.float32)


def centre(family: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[family * 4 : family * 4 + 4] = 1.0
    return unit(v)


def embed(family: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = centre(family) + rng.normal(0.0, noise, DIM).astype(np.float32)
    return unit(v)


def label_vec(label: Label) -> np.ndarray:
    """A deterministic stand-in for psi(application): one hot per distinct application."""
    apps = sorted({lab.application for lab, _, _ in FAMILIES.values()})
    v = np.zeros(DIM, dtype=np.float32)
    v[apps.index(label.application) if label.application in apps else DIM - 1] = 1.0
    return v


def make_input(step: int, family: int, seed: int = 0, noise: float = 0.15, answer: str = "A", **kw) -> StepInput:
    label, shape, _ = FAMILIES[family]
    return StepInput(
        step=step,
        item_id=f"f{family}-{step}",
        text=f"family {family} item {seed}",
        embedding=embed(family, noise, seed),
        shape=shape,
        label=label,
        label_embedding=label_vec(label).tobytes(),
        answer=answer,
        **kw,
    )


def word_count(text: str) -> int:
    """Token counter for compiler tests: whitespace-delimited words."""
    return len(text.split())


def distilling_every_batch(policy):
    """``policy`` with ``rules.distill_after_miss`` off: a due batch is distilled even when the
    (scripted, always-right) model has not missed since the last distillation. For tests of
    the distillation records themselves, whose stand-in models are right every time."""
    import attrs

    return attrs.evolve(policy, rules=attrs.evolve(policy.rules, distill_after_miss=False))

