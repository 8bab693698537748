"""How every ``rizz`` command refuses: one red line on stderr and an exit code (2 by default),
and the checks of arguments that several commands share (``--out``, ``--rendering``, ``--policy``,
``--durability``, ``--cache``).

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
from rizz.store.durable import DURABILITY, check_durability

__all__ = ["check_cache", "check_durability_option", "check_out", "check_rendering", "fail", "load_policy_or_exit"]

#: The first bytes of every SQLite database file (a response cache is one).
_SQLITE_HEADER = b"SQLite format 3\x00"


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


def check_durability_option(durability: str) -> None:
    """Refuse a ``--durability`` that is none of :data:`rizz.store.durable.DURABILITY`."""
    try:
        check_durability(durability)
    except ValueError:
        fail(f"--durability must be {' or '.join(DURABILITY)}, got {durability!r}")


def check_cache(cache: Path | None) -> None:
    """Refuse a ``--cache`` that cannot be a response cache, before anything opens it: a folder,
    a file in a "folder" that is a file, or an existing non-empty file that is not SQLite (a
    cache that fails to open is moved aside as corrupt and rebuilt: a mistyped path, a stream
    file say, would have been moved so). An absent or empty file is made one."""
    if cache is None:
        return
    if cache.is_dir():
        fail(f"--cache {cache}: is a folder; give the response cache's file (SQLite), e.g. {cache / 'responses.sqlite'}")
    parent = next((p for p in cache.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        fail(f"--cache {cache}: {parent} is a file, not a folder; give the response cache's file (SQLite) in a folder")
    if cache.is_file():
        try:
            with cache.open("rb") as f:
                head = f.read(len(_SQLITE_HEADER))
        except OSError as e:
            fail(f"--cache {cache}: cannot be read ({e.strerror or e})")
        if head and head != _SQLITE_HEADER:
            fail(f"--cache {cache}: not a SQLite file (a response cache is one); give a cache file rizz wrote, or a new name")


def check_out(out: Path, marker: str, what: str, also: tuple[str, ...] = ()) -> None:
    """Refuse an ``--out`` that is a file, or a non-empty folder that is not one of ours: ours holds
    ``marker``, or one of ``also``; a BENCH_DIR also one or more runs (folders holding run.json)."""
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
            if what == "BENCH_DIR" and runs:  # a bench whose runs started but did not finish (its cache elsewhere: --cache)
                return
        if names and marker not in names and not names & set(also):
            fail(f"--out {out}: the folder holds other files ({', '.join(sorted(names)[:3])}{', ...' if len(names) > 3 else ''}) "
                 f"and no {marker}; give a new folder for the {what}")
