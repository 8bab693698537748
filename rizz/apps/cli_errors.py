"""How every ``rizz`` command refuses: one red line on stderr and an exit code (2 by default),
and the checks of arguments that several commands share (``--out``, ``--rendering``, ``--policy``,
``--durability``, ``--cache``).

Its own module so that command modules registered on the CLI (``rizz sweep`` and ``rizz serve``
in :mod:`rizz.apps.cli_scale`, ``rizz view``) refuse the same way without importing
:mod:`rizz.apps.cli`, which imports them.
"""

from __future__ import annotations

import contextlib
import sqlite3
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
    if cache.exists() and not cache.is_file():
        fail(f"--cache {cache}: not a regular file (a device, a pipe or a socket); give the response cache's file (SQLite)")
    if cache.is_file():
        try:
            with cache.open("rb") as f:
                head = f.read(len(_SQLITE_HEADER))
        except OSError as e:
            fail(f"--cache {cache}: cannot be read ({e.strerror or e})")
        if head and head != _SQLITE_HEADER:
            fail(f"--cache {cache}: not a SQLite file (a response cache is one); give a cache file rizz wrote, or a new name")
        tables = _sqlite_tables(cache) if head else None
        if tables and "responses" not in tables:
            fail(f"--cache {cache}: a SQLite file of something else (its tables: {', '.join(sorted(tables)[:4])}), "
                 "not a response cache; give a cache file rizz wrote, or a new name")


def _sqlite_tables(path: Path) -> set[str] | None:
    """The table names of the SQLite file ``path``, read only (None when it cannot be read:
    a damaged cache, which the cache itself moves aside and rebuilds)."""
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return None


def check_out(out: Path, marker: str, what: str, also: tuple[str, ...] = (), run_folders: tuple[str, ...] = ()) -> None:
    """Refuse an ``--out`` that is a file, or a non-empty folder that is not one of ours.

    Ours holds ``marker``; or holds nothing but the files and folders named in ``also`` (with a
    SQLite file's ``-wal``/``-shm``/``-journal``) and, in a BENCH_DIR, runs: folders holding
    run.json, or empty folders named in ``run_folders`` (a bench that stopped before its first
    report). Anything else in it (a user's notes, a report.md without results.json) is refused:
    a bench writes report.md and its plots into the folder."""
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: is a file; {what} must be a folder (new or one rizz wrote)")
    if not out.is_dir():
        return
    names = {p.name for p in out.iterdir()}
    if not names or marker in names:
        return
    runs = sorted(n for n in names if (out / n / "run.json").is_file())  # the other command's folder, which a shared cache would let in
    if what == "RUN_DIR" and ("results.json" in names or runs):
        fail(f"--out {out}: a rizz bench folder (its runs: {', '.join(runs) or 'none yet'}), not a RUN_DIR; "
             f"give a new folder for the {what}")
    if what == "BENCH_DIR" and "run.json" in names:
        fail(f"--out {out}: a RUN_DIR (it holds run.json), not a bench folder; give a new folder for the {what}")
    ours = set(also) | {f"{a}{suffix}" for a in also for suffix in ("-wal", "-shm", "-journal")} | {".lock", ".lock.pid"}
    if what == "BENCH_DIR":
        ours |= set(runs) | {n for n in run_folders if (out / n).is_dir() and not any((out / n).iterdir())}
    other = sorted(names - ours)
    if other:
        fail(f"--out {out}: the folder holds other files ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}) "
             f"and no {marker}; give a new folder for the {what}")
