"""rizz: verifier-gated, branch-routed memory for a frozen black-box LLM (RIZZ, 2026).

The pure core lives in :mod:`rizz.core` (standard library, attrs, pyrsistent, numpy only);
the effects live in layers above it, each importing only the ones below (docs/development.md):
:mod:`rizz.formats` (streams, policy files, log records), :mod:`rizz.store` (RUN_DIR, embedding
store), :mod:`rizz.adapters` (models, embedder, verifiers, agents' environments),
:mod:`rizz.engine` (Session, answering, the fold of a log), :mod:`rizz.lab` (bench, sweep,
reports, peers, view) and :mod:`rizz.apps` (the CLI, serve).

The live API (specs/step-semantics.md, "Live sessions")::

    from rizz import Session, Verdict
    s = Session.open("runs/app", policy="default", model="embedded")
    p = s.answer({"id": "q1", "input": "...", "metadata": {"shape": "number"}})
    s.fold("q1", Verdict(1.0, "exact_match"))

The base install (``pip install .`` from a checkout, no extras; the name ``rizz`` on PyPI is
another project's placeholder) gives :mod:`rizz.core` and :func:`load_policy`; the
shell's parts need extras (README "Quick start"). Every exception rizz defines is a
:class:`RizzError`.
"""

from typing import Any

from rizz.errors import MissingExtraError, RizzError
from rizz.extras import extra_needed

__version__ = "0.1.0"
__all__ = ["MissingExtraError", "RizzError", "Session", "Verdict", "load_policy"]


# The public names load on first use: ``import rizz`` runs before every ``import rizz.x``, so it
# loads no numpy, yaml, model or verifier code, and a base install can import it.
def __getattr__(name: str) -> Any:
    if name == "Session":
        with extra_needed("local", "rizz.Session"):  # or 'anthropic' / 'openai' (README "Quick start")
            # lazy: the verifiers' and the embedder's extras (local, anthropic or openai)
            from rizz.engine.session import Session

        return Session
    if name == "Verdict":
        # lazy: numpy, attrs, pyrsistent (base install), not needed by `import rizz.errors`
        from rizz.core import Verdict

        return Verdict
    if name == "load_policy":  # needs only the base install (pyyaml, cattrs)
        # lazy: yaml and cattrs, not needed by `import rizz.errors`
        from rizz.formats.policy_file import load_policy

        return load_policy
    raise AttributeError(f"module 'rizz' has no attribute {name!r}")
