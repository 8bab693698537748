"""Counts in user-facing messages: ``1 branch``, ``2 branches``."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"{n} {word}"`` when ``n == 1``, else ``"{n} {words}"`` (default ``word + "s"``).

    Example:
        >>> plural(1, "branch", "branches"), plural(3, "step"), plural(0, "policy", "policies")
        ('1 branch', '3 steps', '0 policies')
    """
    return f"{n} {word}" if n == 1 else f"{n} {words if words is not None else word + 's'}"
