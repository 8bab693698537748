"""Layer 5, lab: what is done with runs.

Benches and sweeps (locally or on Ray), reports and their statistics, label quality, diffs,
stream builders (:mod:`~rizz.lab.builders`), the peers (:mod:`~rizz.lab.peers`), the fold behind
``rizz view`` (:mod:`~rizz.lab.view`). Imports only the engine and the layers below it. The
layers and their contract: ``docs/development.md``.
"""
