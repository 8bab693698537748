"""Layer 4, engine: one element through RIZZ, and a stream of them.

:class:`~rizz.engine.session.Session` (answer now, fold the verdict later), answering one element
(:mod:`~rizz.engine.answering`), the judge, distillation, rendering, the fold of a log
(:mod:`~rizz.engine.logfold`), an episode as one step (:mod:`~rizz.engine.agent_step` and the
model-driven agents), running and replaying a stream (:mod:`~rizz.engine.run`). Imports only the
adapters, the store, the formats and the ground. The layers and their contract:
``docs/development.md``.
"""
