"""rizz: verifier-gated, branch-routed memory for a frozen black-box LLM (RIZZ, 2026).

The pure core lives in :mod:`rizz.core` (standard library, attrs, pyrsistent, numpy only);
the effects (models, embedder, verifiers, run log, CLI) live in :mod:`rizz.shell`.
"""

__version__ = "0.1.0"
