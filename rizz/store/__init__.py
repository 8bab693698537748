"""Layer 2, store: what a run keeps on disk.

The RUN_DIR (:mod:`~rizz.store.runlog`), durable writes and fault points
(:mod:`~rizz.store.durable`) and the embedding store (:mod:`~rizz.store.embeddings`). Imports
only the formats and the ground. The layers and their contract: ``docs/development.md``.
"""
