"""Durability of a RUN_DIR: checksummed snapshots, a full disk, fault injection (specs/reliability.md).

Three small pieces used by ``runlog.py``, ``models/cache.py`` and the CLI:

* **Snapshots with a checksum.** :func:`snapshot_bytes` wraps the state's data as
  ``{"format": 2, "sha256": <hex of the canonical state JSON>, "state": ...}``, or, when the
  tree names chunks of the RUN_DIR's store (incremental snapshots, :mod:`rizz.store.snapchunks`),
  as ``{"format": 3, "written": <bytes this snapshot wrote>, "chunks": [sha, ...], "sha256": ...,
  "state": ...}``; :func:`read_snapshot` returns the state data only when the checksum matches. A flipped
  byte, a truncated file, or a snapshot without a checksum (written before this format) is
  *ignored*: the caller refolds from the log, which is the source of truth, and writes the
  snapshot again (:func:`rizz.engine.run.run_stream`).
* **A full disk.** :func:`disk_full` turns ``ENOSPC`` / ``EDQUOT`` (``OSError``) and
  sqlite's "database or disk is full" into :class:`DiskFull`, whose message says what was
  being written and that every finished step is kept; ``rizz run`` exits with
  :data:`EXIT_DISK_FULL` and resumes once there is space (a partial last log line is
  dropped on resume, as after a kill).
* **Fault injection for the crash tests.** :func:`fault_point` is a no-op unless
  ``RIZZ_FAULT`` is set, e.g. ``RIZZ_FAULT=log.append:3`` kills the process (SIGKILL) the
  3rd time the ``log.append`` point is reached, ``RIZZ_FAULT=enospc@log.append:2`` raises
  ``ENOSPC`` there instead. Points: ``log.append`` (half of a record written and
  flushed), ``snapshot.write`` (half of a snapshot's temp file written),
  ``embedding.write`` and ``prompt.write`` (inside the ``store.sqlite`` transaction that
  commits a record's vectors / prompt, before the commit; in a RUN_DIR of the old
  file-per-element layout, before the file is renamed into place),
  ``cache.put``, ``step`` (between steps) (:data:`FAULT_SITES`). Used only by tests, ``make fuzz``
  and ``benchmarks/kill_embedded.py`` (the embedded-model crash run).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

from rizz.errors import RizzError

__all__ = [
    "DURABILITY",
    "DiskFull",
    "EXIT_DISK_FULL",
    "FAULT_ENV",
    "FAULT_SITES",
    "CHUNKED_SNAPSHOT_FORMAT",
    "SNAPSHOT_FORMAT",
    "check_durability",
    "disk_full",
    "fault_point",
    "read_snapshot",
    "snapshot_bytes",
    "snapshot_header",
]

FAULT_ENV = "RIZZ_FAULT"
#: Every place :func:`fault_point` is called from (tests/shell/test_durability.py, benchmarks/kill_embedded.py).
FAULT_SITES = ("log.append", "snapshot.write", "embedding.write", "prompt.write", "cache.put", "step")
SNAPSHOT_FORMAT = 2
#: Format of a snapshot whose tree names chunks in ``store.sqlite`` (:mod:`rizz.store.snapchunks`).
CHUNKED_SNAPSHOT_FORMAT = 3
#: ``rizz run`` exit status when the disk is full (sysexits.h EX_TEMPFAIL: retry later).
EXIT_DISK_FULL = 75
#: How a RUN_DIR's writes reach the disk: ``"disk"``, fsynced before the call that made them
#: returns; ``"os"``, handed to the OS and fsynced at close (:class:`~rizz.store.runlog.RunDir`).
DURABILITY = ("disk", "os")


def check_durability(durability: str) -> str:
    """``durability`` when it is one of :data:`DURABILITY`, else ValueError. The one check of a
    durability setting: ``RunDir``, its stores, ``Session.open`` and ``rizz run --durability``.

    Example:
        >>> check_durability("fast")
        Traceback (most recent call last):
        ...
        ValueError: durability must be one of disk, os, got 'fast'
    """
    if durability not in DURABILITY:
        raise ValueError(f"durability must be one of {', '.join(DURABILITY)}, got {durability!r}")
    return durability

_counts: dict[str, int] = {}
_counts_lock = threading.Lock()


def write_then_rename(data: bytes, tmp: str, path: str, *, sync: bool, site: str) -> None:
    """Write ``data`` to ``tmp`` (fsynced when ``sync``), then ``os.replace`` it onto ``path``,
    so a reader sees the whole file or none; ``site`` is the crash tests' fault point before the
    rename. A failure removes ``tmp`` and is raised (OSError)."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        fault_point(site)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Open ``path`` (a file or a directory) read-only and ``fsync`` it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _plan() -> dict[str, tuple[str, int]]:
    spec = os.environ.get(FAULT_ENV, "")
    out: dict[str, tuple[str, int]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        site, _, n = part.rpartition(":")
        action, at, name = site.rpartition("@")
        out[name if at else site] = (action if at else "kill", int(n))
    return out


def fault_point(site: str) -> None:
    """Crash (SIGKILL) or raise ``ENOSPC`` here when ``RIZZ_FAULT`` names ``site``; else nothing.

    Raises:
        OSError: ``ENOSPC`` when the plan says ``enospc@site:n`` and this is the n-th visit.
    """
    if FAULT_ENV not in os.environ:
        return
    plan = _plan().get(site)
    if plan is None:
        return
    with _counts_lock:
        _counts[site] = _counts.get(site, 0) + 1
        hit = _counts[site] == plan[1] if plan[0] == "kill" else _counts[site] >= plan[1]
    if not hit:
        return
    if plan[0] == "enospc":
        raise OSError(errno.ENOSPC, f"No space left on device (injected at {site})")
    os.kill(os.getpid(), signal.SIGKILL)


def _state_json(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def snapshot_bytes(data: Any, chunks: set[str] | None = None, written: int = 0) -> bytes:
    """The file contents of a checksummed snapshot of ``data`` (``rizz.core.to_data(state)``, or
    the chunked tree of :class:`rizz.store.snapchunks.SnapshotChunks`); with ``chunks`` (the
    store chunks the tree names) format 3, recording ``written`` (bytes of the chunks this
    snapshot added to the store)."""
    body = _state_json(data)
    digest = hashlib.sha256(body).hexdigest()
    if not chunks:
        return (b'{"format":%d,"sha256":"%s","state":' % (SNAPSHOT_FORMAT, digest.encode())) + body + b"}\n"
    head = json.dumps(sorted(chunks), separators=(",", ":")).encode()
    return (b'{"format":%d,"written":%d,"chunks":%s,"sha256":"%s","state":' % (
        CHUNKED_SNAPSHOT_FORMAT, written, head, digest.encode())) + body + b"}\n"


def snapshot_header(path: Path) -> dict[str, Any] | None:
    """A snapshot's ``format``, ``written`` (bytes its write cost: the file's size, plus for
    format 3 the chunks it added to the store) and ``chunks`` (the store chunks it names, a set;
    empty for format 2); None for an unreadable file. Never raises."""
    try:
        doc = json.loads(path.read_bytes())
        size = path.stat().st_size
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    chunks = doc.get("chunks") if doc.get("format") == CHUNKED_SNAPSHOT_FORMAT else []
    return {"format": doc.get("format"), "written": int(doc.get("written", size)) + (size if "written" in doc else 0),
            "chunks": set(chunks if isinstance(chunks, list) else [])}


def read_snapshot(path: Path) -> tuple[Any, str | None]:
    """``(state data, None)`` for a sound snapshot, ``(None, why)`` for one to ignore.

    Never raises for a bad file (unreadable, not JSON, old format, checksum mismatch).
    """
    try:
        raw = path.read_bytes()
        doc = json.loads(raw)
    except (OSError, ValueError) as e:
        return None, f"unreadable ({e.__class__.__name__})"
    if not isinstance(doc, dict) or doc.get("format") not in (SNAPSHOT_FORMAT, CHUNKED_SNAPSHOT_FORMAT) or "sha256" not in doc:
        return None, "no checksum (older format)"
    if hashlib.sha256(_state_json(doc.get("state"))).hexdigest() != doc["sha256"]:
        return None, "checksum mismatch"
    return doc["state"], None


class DiskFull(OSError, RizzError):
    """The disk (or quota) is full; nothing recorded was lost. ``str()`` says what to do."""


def disk_full(exc: BaseException, what: str, run_dir: str | os.PathLike[str] | None = None) -> DiskFull | None:
    """A :class:`DiskFull` for an out-of-space error while writing ``what``, else ``None``."""
    full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or (
        isinstance(exc, sqlite3.Error) and "full" in str(exc).lower())
    if not full:
        return None
    where = f"; every finished step is in {Path(run_dir) / 'log.jsonl'}" if run_dir is not None else ""
    return DiskFull(errno.ENOSPC, f"disk full while writing {what} ({exc}){where}; free some space and "
                                  "run the same command again to resume")
