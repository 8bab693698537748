"""Layer 6, apps: the programs. The ``rizz`` command (:mod:`~rizz.apps.cli` and the command
modules it registers), ``rizz serve`` (:mod:`~rizz.apps.serve`), the Makefile's build progress.
Nothing in rizz imports this layer but ``rizz/__main__.py``. The layers and their contract:
``docs/development.md``.
"""
