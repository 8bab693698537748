"""How every ``rizz`` command refuses: one red line on stderr and an exit code (2 by default).

Its own module so that command modules registered on the CLI (``rizz view``) can refuse the
same way without importing :mod:`rizz.apps.cli`, which imports them.
"""

from __future__ import annotations

import typer

__all__ = ["fail"]


def fail(msg: str, code: int = 2) -> None:
    """Print ``msg`` in red on stderr and exit with ``code``. Raises typer.Exit."""
    typer.secho(msg, fg="red", err=True)
    raise typer.Exit(code)
