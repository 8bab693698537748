"""``rizz view``: one self-contained HTML view of a RUN_DIR, a bench or sweep folder, or a
``rizz serve --data`` folder (results/2026-12-02-view-load.md).

The view is built by the same refold that ``rizz replay`` uses (no model call,
:mod:`rizz.lab.view.runfold`) and shows the branch tree over time, any step (input, label and
route with the candidates' scores, the prompt block by block with each block's kind and source,
what the budget dropped, the answer, the verdict, what the step wrote, quarantined or retired),
a memory browser (each item, when it was written, which later prompts used it) and, for
several runs, the runs side by side. The file holds its data once, as JSON; the page builds a
step's details only when it is shown, so a 10^4-step run opens in a few seconds
(``benchmarks/view_load.py``).

Example:
  >>> from rizz.lab.view import write_view
  >>> write_view("runs/r1")                       # doctest: +SKIP
  PosixPath('runs/r1/view.html')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rizz.core.compiler import HEADERS, PREAMBLE
from rizz.formats.wording import FALLBACK_LABEL
from rizz.lab.view.folders import find_runs
from rizz.lab.view.page import render_page
from rizz.lab.view.runfold import view_run

__all__ = ["VIEW_FILE", "first_run", "view_data", "write_view"]

#: The file written inside the folder when no ``--out`` is given.
VIEW_FILE = "view.html"


def view_data(root: str | Path) -> dict[str, Any]:
    """The page's data for folder ``root``: ``{"kind", "root", "headers", "preamble", "fallback_label", "first_run", "runs": [...]}``
    (one :func:`~rizz.lab.view.runfold.view_run` dict per RUN_DIR, :func:`~rizz.lab.view.folders.find_runs`;
    ``fallback_label`` is the general wording, each run's own names the words its policy's fallback read;
    ``first_run``, the run the page opens on: :func:`first_run`).

    Raises FileNotFoundError when ``root`` holds no RUN_DIR; LogRecordError / LogFoldError for a bad log.
    """
    kind, runs = find_runs(root)
    shown = [view_run(path, name) for name, path in runs]
    return {"kind": kind, "root": str(root), "headers": dict(HEADERS), "preamble": PREAMBLE,
            "fallback_label": FALLBACK_LABEL, "first_run": first_run(shown), "runs": shown}


def first_run(runs: list[dict[str, Any]]) -> int:
    """Index of the run the page opens on: the first whose policy writes memory (``writes``:
    in a bench folder, the first policy after ``frozen``, whose memory there is to look at), else
    the first; the others are a choice away."""
    return next((i for i, r in enumerate(runs) if r.get("writes")), 0)


def write_view(root: str | Path, out: str | Path | None = None) -> Path:
    """Write the view of ``root`` to ``out`` (default ``root/view.html``); returns the file's path."""
    data = view_data(root)
    target = Path(out) if out is not None else Path(root) / VIEW_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_page(data, f"rizz view: {Path(root).resolve().name} ({data['kind']})"), encoding="utf-8")
    return target
