"""``rizz view RUN_DIR [--out FILE.html]``; :func:`register` adds it to the ``rizz`` app."""

from __future__ import annotations

from pathlib import Path

import typer

from rizz.apps.cli_errors import fail as _fail
from rizz.apps.cli_help import Command
from rizz.engine.logfold import LogFoldError
from rizz.formats.logrecord import LogRecordError
from rizz.lab.view import VIEW_FILE, write_view

__all__ = ["register", "view"]


def register(app: typer.Typer) -> None:
    """Add ``view`` to ``app``."""
    app.command(cls=Command)(view)


def view(
    run_dir: Path = typer.Argument(..., help="A RUN_DIR (rizz run, or a live Session's folder), a bench or sweep folder, or a rizz serve --data folder."),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="FILE", help="The HTML file to write (default: RUN_DIR/view.html)."),
) -> None:
    """One self-contained HTML view of RUN_DIR: branch tree, every step's route and prompt, the memory, runs side by side.

    Built by refolding the log (no model call); open the file in any browser, no server or network needed.
    """
    if out is not None and out.is_dir():
        _fail(f"--out {out}: is a folder; give the HTML file to write (e.g. {out / 'view.html'})")
    try:
        path = write_view(run_dir, out)
    except (FileNotFoundError, LogRecordError, LogFoldError) as e:
        _fail(str(e))
    except OSError as e:  # a read-only RUN_DIR (bind mount, chmod), a full disk, no permission
        target = out if out is not None else run_dir / VIEW_FILE
        _fail(f"{target}: cannot write here ({e.strerror or e}); write the view elsewhere: rizz view {run_dir} --out FILE.html")
    typer.echo(f"{path}  ({path.stat().st_size / 1e6:.1f} MB; open it in a browser)")
