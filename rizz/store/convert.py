"""``rizz convert``: move a RUN_DIR of the file-per-element layout into ``store.sqlite``.

A RUN_DIR written before ``store.sqlite`` (results/2026-12-02-runstore.md) keeps one ``.npy`` file per embedding
(``embeddings/<key[:2]>/<key>.npy``) and one text file per compiled prompt
(``prompts/<sha256>.txt``). It replays and resumes as it is (:attr:`RunDir.layout` ``"files"``);
:func:`convert_run_dir` moves both into the run's ``store.sqlite``
(:mod:`rizz.store.runstore`), byte for byte, so its log refolds to the same digest.

Steps, each safe to interrupt (running the command again finishes the job):

1. every vector and prompt is written into ``store.sqlite.tmp`` in one transaction, then read
   back and compared with its file (the vector's float32 bytes; the prompt's sha256 = its
   name), the file fsynced, and renamed to ``store.sqlite`` (from then on the RUN_DIR is in the
   ``"sqlite"`` layout and the folders are ignored);
2. the folders are removed (unless ``keep_files``). A kill between 1 and 2 leaves a
   ``store.sqlite`` beside the folders: the next call checks every file against it and removes them.

Snapshots are left as they are (their format is read in either layout).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np

from rizz.errors import RizzError
from rizz.store.durable import fsync_path
from rizz.store.runlog import RunDir
from rizz.store.runstore import SCHEMA, STORE_FILE, STORE_VERSION

__all__ = ["ConvertError", "convert_run_dir", "run_dirs_in"]


class ConvertError(ValueError, RizzError):
    """A file of the old layout that cannot be moved (unreadable vector, a prompt whose text does
    not hash to its name, a store that disagrees with a file); nothing was removed."""


def run_dirs_in(path: Path) -> list[Path]:
    """``[path]`` for a RUN_DIR; its runs (sub-folders with a ``run.json``) for a bench folder.

    Raises FileNotFoundError when ``path`` is neither."""
    if (path / "run.json").is_file():
        return [path]
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such directory")
    subs = sorted(d for d in path.glob("*/") if (d / "run.json").is_file()) if path.is_dir() else []
    if not subs:
        raise FileNotFoundError(f"{path}: no run.json — not a rizz RUN_DIR nor a bench folder of them")
    return subs


def _vectors(root: Path) -> Iterator[tuple[str, Path]]:
    folder = root / "embeddings"
    if folder.is_dir():
        for p in sorted(folder.glob("*/*.npy")):
            if not p.name.startswith(".tmp-"):  # a write a kill interrupted: never named by the log
                yield p.stem, p


def _prompts(root: Path) -> Iterator[tuple[str, Path]]:
    folder = root / "prompts"
    if folder.is_dir():
        for p in sorted(folder.glob("*.txt")):
            yield p.stem, p


def _vector_bytes(path: Path) -> bytes:
    try:
        vec = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: not a readable vector ({e}); nothing was converted") from None
    if vec.dtype != np.float32 or vec.ndim != 1:
        raise ConvertError(f"{path}: expected a (d,) float32 vector, found {vec.dtype} {vec.shape}; nothing was converted")
    return vec.tobytes()


def _prompt_text(sha: str, path: Path) -> str:
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha:
        raise ConvertError(f"{path}: its text does not hash to its name (a damaged file); nothing was converted")
    return data.decode("utf-8")


def _check_against(db: sqlite3.Connection, root: Path) -> tuple[int, int]:
    """Every old file's content is in ``db``, byte for byte. Returns (vectors, prompts)."""
    nv = npr = 0
    for key, p in _vectors(root):
        row = db.execute("SELECT vec FROM embeddings WHERE key = ?", (key,)).fetchone()
        if row is None or bytes(row[0]) != _vector_bytes(p):
            raise ConvertError(f"{p}: not in {root / STORE_FILE} as in the file; nothing was removed")
        nv += 1
    for sha, p in _prompts(root):
        row = db.execute("SELECT text FROM prompts WHERE sha256 = ?", (sha,)).fetchone()
        if row is None or row[0] != _prompt_text(sha, p):
            raise ConvertError(f"{p}: not in {root / STORE_FILE} as in the file; nothing was removed")
        npr += 1
    return nv, npr


def convert_run_dir(path: str | os.PathLike[str], *, keep_files: bool = False,
                    log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Move RUN_DIR ``path``'s ``embeddings/`` and ``prompts/`` into its ``store.sqlite`` (module docstring).

    Holds the RUN_DIR's lock throughout a conversion (a RUN_DIR already in one store is left as it is,
    without taking it: read-only is fine). Returns ``{"run_dir", "layout_before", "vectors",
    "prompts", "files_removed", "bytes_before", "bytes_after"}`` (``vectors`` / ``prompts``:
    entries moved; bytes: the folders' file sizes, the store's).

    Raises:
      FileNotFoundError: not a RUN_DIR. RunDirBusy: another process uses it.
      ConvertError: a file that cannot be moved as it is (nothing removed).
    """

    rd = RunDir(path)
    rd.meta()  # FileNotFoundError for a folder that is not a RUN_DIR
    root = rd.root
    store, tmp = root / STORE_FILE, root / (STORE_FILE + ".tmp")
    folders = [d for d in (root / "embeddings", root / "prompts") if d.is_dir()]
    before = sum(p.stat().st_size for d in folders for p in d.rglob("*") if p.is_file())
    layout = "files" if folders and not store.exists() else "sqlite"
    if not folders:  # before the lock: a RUN_DIR already in one store needs no writing (a read-only folder too)
        log(f"{root}: already in one store ({STORE_FILE}); nothing to convert")
        return {"run_dir": str(root), "layout_before": layout, "vectors": 0, "prompts": 0, "files_removed": 0,
                "bytes_before": 0, "bytes_after": store.stat().st_size if store.exists() else 0}
    with rd:
        if not store.exists():
            tmp.unlink(missing_ok=True)
            with closing(sqlite3.connect(tmp, isolation_level=None)) as db:
                db.execute("PRAGMA synchronous=OFF")  # fsynced once, below, before the rename
                for sql in SCHEMA:
                    db.execute(sql)
                db.execute(f"PRAGMA user_version={STORE_VERSION}")
                db.execute("BEGIN")
                db.executemany("INSERT INTO embeddings (key, vec) VALUES (?, ?)", ((k, _vector_bytes(p)) for k, p in _vectors(root)))
                db.executemany("INSERT INTO prompts (sha256, text) VALUES (?, ?)", ((s, _prompt_text(s, p)) for s, p in _prompts(root)))
                db.execute("COMMIT")
                nv, npr = _check_against(db, root)
            fsync_path(tmp)
            os.replace(tmp, store)
            fsync_path(root)
            log(f"{root}: {nv} vectors and {npr} prompts moved into {STORE_FILE}")
        else:  # a conversion killed after its rename: the store is the record; check the files against it
            with closing(sqlite3.connect(store)) as db:
                nv, npr = _check_against(db, root)
            log(f"{root}: {STORE_FILE} already holds the {nv} vectors and {npr} prompts of the old folders")
        removed = 0
        if not keep_files:
            for d in folders:
                removed += sum(1 for p in d.rglob("*") if p.is_file())
                shutil.rmtree(d)
            fsync_path(root)
            log(f"{root}: removed {', '.join(d.name + '/' for d in folders)} ({removed} files)")
        return {"run_dir": str(root), "layout_before": layout, "vectors": nv, "prompts": npr, "files_removed": removed,
                "bytes_before": before, "bytes_after": store.stat().st_size}
