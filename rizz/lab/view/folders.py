"""Which RUN_DIRs a folder given to ``rizz view`` holds.

- a RUN_DIR (``run.json``): ``rizz run``'s, or a live :class:`~rizz.Session`'s directory;
- a bench folder (``results.json`` and one RUN_DIR per policy, in the report's order; a
  ``peer:NAME`` folder is a peer's);
- a sweep folder (``cells/<cell>/<policy>/``): every cell's runs, named ``<cell>/<policy>``;
- a ``rizz serve --data`` folder: one live session per tenant (``DATA/<tenant>/``).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["FOLDER_KINDS", "find_runs"]

#: What :func:`find_runs` may call a folder.
FOLDER_KINDS = ("run", "bench", "sweep", "tenants")


def _runs_in(folder: Path) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir() and (d / "run.json").exists())


def find_runs(root: str | Path) -> tuple[str, list[tuple[str, Path]]]:
    """``(kind, [(name, RUN_DIR), ...])`` for ``root`` (kinds: :data:`FOLDER_KINDS`).

    Raises FileNotFoundError when ``root`` is not a folder or holds no RUN_DIR.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder (rizz view takes a RUN_DIR, a bench or sweep folder, or a rizz serve --data folder)")
    if (root / "run.json").exists():
        return "run", [(root.name, root)]
    subs = _runs_in(root)
    if subs:
        results = root / "results.json"
        if not results.exists():
            return "tenants", [(d.name, d) for d in subs]
        order = json.loads(results.read_text(encoding="utf-8")).get("policies") or []
        rank = {p: i for i, p in enumerate(order)}
        subs.sort(key=lambda d: (rank.get(d.name, len(rank)), d.name))
        return "bench", [(d.name, d) for d in subs]
    cells = root / "cells"
    if cells.is_dir():
        runs = [(f"{c.name}/{d.name}", d) for c in sorted(p for p in cells.iterdir() if p.is_dir()) for d in _runs_in(c)]
        if runs:
            return "sweep", runs
    raise FileNotFoundError(f"{root}: no run.json here or in its subfolders — not a RUN_DIR, bench, sweep or rizz serve --data folder")
