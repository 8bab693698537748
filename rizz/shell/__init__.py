"""Effect shell: models, embedder, verifiers, run log, CLI. Calls the core; never called by it."""
