"""How every ``rizz`` command refuses: one red line on stderr and an exit code (2 by default),
and the checks of arguments that several commands share (``--out``, ``--rendering``, ``--policy``).

Its own module so that command modules registered on the CLI (``rizz sweep`` and ``rizz serve``
in :mod:`rizz.apps.cli_scale`, ``rizz view``) refuse the same way without importing
:mod:`rizz.apps.cli`, which imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

from rizz.core import Policy
from rizz.engine.render import RENDERINGS
from rizz.formats.policy_file import PolicyError, load_policy

__all__ = ["check_out", "check_rendering", "fail", "load_policy_or_exit"]


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``msg`` in red on stderr and exit with ``code``. Raises typer.Exit."""
    typer.secho(msg, fg="red", err=True)
    raise typer.Exit(code)


def load_policy_or_exit(path: str) -> Policy:
    """The policy ``path`` names (a file or a shipped name); a bad one ends the command."""
    try:
        return load_policy(path)
    except PolicyError as e:
        fail(str(e))
        raise  # not reached: fail raises


def check_rendering(rendering: str | None) -> None:
    """Refuse a ``--rendering`` that is none of :data:`rizz.engine.render.RENDERINGS`."""
    if rendering is not None and rendering not in RENDERINGS:
        fail(f"--rendering {rendering!r}: expected one of {', '.join(RENDERINGS)}")


def check_out(out: Path, marker: str, what: str, also: tuple[str, ...] = ()) -> None:
    """Refuse an ``--out`` that is a file, or a non-empty folder that is not one of ours."""
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: is a file; {what} must be a folder (new or one rizz wrote)")
    if out.is_dir():
        names = {p.name for p in out.iterdir()}
        if marker not in names:  # the other command's folder, which a shared response cache would let in
            runs = sorted(n for n in names if (out / n / "run.json").is_file())
            if what == "RUN_DIR" and ("results.json" in names or runs):
                fail(f"--out {out}: a rizz bench folder (its runs: {', '.join(runs) or 'none yet'}), not a RUN_DIR; "
                     f"give a new folder for the {what}")
            if what == "BENCH_DIR" and "run.json" in names:
                fail(f"--out {out}: a RUN_DIR (it holds run.json), not a bench folder; give a new folder for the {what}")
        if names and marker not in names and not names & set(also):
            fail(f"--out {out}: the folder holds other files ({', '.join(sorted(names)[:3])}{', ...' if len(names) > 3 else ''}) "
                 f"and no {marker}; give a new folder for the {what}")
