"""The terms a store's refusal is worded in, for the reader it goes to.

A refusal (:class:`~rizz.store.runlog.RunDirMismatch`, :class:`~rizz.store.runlog.RunDirBusy`,
:class:`~rizz.store.runstore.RunStoreError`) carries what it is about (its path, its kind and
the rest) and renders itself with ``worded(words)``, ``words`` one of :data:`WORDINGS`:

* ``"cli"``: ``rizz run``'s options (``--budget``, another ``--out``, ``this command``); the
  error's message (``str``) is in these terms;
* ``"api"``: :meth:`rizz.engine.session.Session.open`'s parameters (``budget_cap``, another
  ``path``, ``this call``);
* ``"serve"``: ``rizz serve``'s, whose folders come from its ``--data`` (otherwise ``"cli"``).
"""

from __future__ import annotations

__all__ = ["WORDINGS", "check_words", "in_terms"]

#: The terms a refusal can be worded in (module docstring).
WORDINGS = ("cli", "api", "serve")


def check_words(words: str) -> str:
    """``words`` when it is one of :data:`WORDINGS`.

    Raises:
      ValueError: it is not.
    """
    if words not in WORDINGS:
        raise ValueError(f"words must be one of {', '.join(WORDINGS)}, got {words!r}")
    return words


def in_terms(words: str, *, cli: str, api: str, serve: str | None = None) -> str:
    """The phrase of ``words`` among a refusal's ``cli``, ``api`` and ``serve`` phrases
    (``serve`` None: the ``cli`` one).

    Raises:
      ValueError: ``words`` is not one of :data:`WORDINGS`.

    Example:
        >>> in_terms("api", cli="use another --out", api="give Session.open another path")
        'give Session.open another path'
        >>> in_terms("serve", cli="use another --out", api="give Session.open another path")
        'use another --out'
    """
    check_words(words)
    if words == "api":
        return api
    return serve if words == "serve" and serve is not None else cli
