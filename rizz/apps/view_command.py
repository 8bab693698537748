"""``rizz view RUN_DIR [--out FILE.html]``; :func:`register` adds it to the ``rizz`` app."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from rizz.apps.cli_errors import fail as _fail
from rizz.apps.cli_help import Command
from rizz.engine.logfold import LogFoldError
from rizz.formats.logrecord import LogRecordError
from rizz.lab.view import VIEW_FILE, write_view

__all__ = ["out_file", "register", "view"]


def register(app: typer.Typer) -> None:
    """Add ``view`` to ``app``."""
    app.command(cls=Command)(view)


def out_file(out: str) -> Path:
    """The file ``--out`` names: ``out`` itself, or ``out/view.html`` when ``out`` is an existing
    folder or ends in a path separator (a folder to create: ``views/`` is not a file ``views``)."""
    folder = out.endswith(("/", os.sep)) or Path(out).is_dir()
    return Path(out) / VIEW_FILE if folder else Path(out)


def view(
    run_dir: Path = typer.Argument(..., help="A RUN_DIR (rizz run, or a live Session's folder), a bench or sweep folder, or a rizz serve --data folder."),
    out: str | None = typer.Option(None, "--out", "-o", metavar="FILE", show_default=False,
                                   help="The HTML file to write (default: RUN_DIR/view.html); a folder (an existing one, or a path "
                                        "ending in /, created) gets view.html inside it."),
) -> None:
    """One self-contained HTML view of RUN_DIR: branch tree, every step's route and prompt, the memory, runs side by side.

    Built by refolding the log (no model call); open the file in any browser, no server or network needed.
    """
    target = None if out is None else out_file(out)
    try:
        path = write_view(run_dir, target)
    except (FileNotFoundError, LogRecordError, LogFoldError) as e:
        _fail(str(e))
    except OSError as e:  # a read-only RUN_DIR (bind mount, chmod), a full disk, no permission
        target = target if target is not None else run_dir / VIEW_FILE
        _fail(f"{target}: cannot write here ({e.strerror or e}); write the view elsewhere: rizz view {run_dir} --out FILE.html")
    typer.echo(f"{path}  ({path.stat().st_size / 1e6:.1f} MB; open it in a browser)")
