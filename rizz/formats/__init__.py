"""Layer 1, formats: how rizz's files and texts are written, read and checked.

Streams (:mod:`~rizz.formats.streams`, :mod:`~rizz.formats.stream_checks`), policy files
(:mod:`~rizz.formats.policy_file`, :mod:`~rizz.formats.schema_check`), ``metadata.time``
(:mod:`~rizz.formats.timekeys`), the typed log record (:mod:`~rizz.formats.logrecord`) and the
wording of messages (:mod:`~rizz.formats.wording`). Imports only the ground (``rizz.core``,
``rizz.errors``, ``rizz.extras``) and the base install: ``rizz.load_policy`` needs nothing more.
The layers and their contract: ``docs/development.md``.
"""
