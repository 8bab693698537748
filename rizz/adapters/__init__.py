"""Layer 3, adapters: what rizz talks to.

Model backends and their response cache (:mod:`~rizz.adapters.models`), the embedder
(:mod:`~rizz.adapters.embedder`), the verifiers and their sandbox
(:mod:`~rizz.adapters.verifiers`), the agents' environments, call protocol and loop
(:mod:`~rizz.adapters.agents`), an ASGI helper (:mod:`~rizz.adapters.asgi`). Imports only the
store, the formats and the ground; inside, ``verifiers`` may import ``models`` and ``agents``,
``models`` may import ``agents``. The layers and their contract: ``docs/development.md``.
"""
