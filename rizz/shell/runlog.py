"""RUN_DIR: the durable record of a run.

Layout::

    RUN_DIR/
      run.json            what the run is (stream hash, policy, model, embedder, rendering)
      log.jsonl           append-only, one JSON record per finished step, flushed + fsynced
      embeddings/         content-addressed float32 vectors (EmbeddingStore), by key
      prompts/            compiled prompt texts by sha256 (content-addressed)
      snapshots/NNNNNNNN.json   periodic state snapshots (rizz.core.to_data), atomic writes
      responses.sqlite    response cache (model, prompt, parameters) → generation
      summary.json        summary (specs/stream-format.md), at the end of a run and by replay
      .lock               held by the process using the directory

A record is appended only after its step is complete, so a kill at any moment leaves at
most a partial last line, which :meth:`RunDir.records` drops (and :meth:`RunDir.repair`
truncates) — nothing already recorded is lost.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import attrs
import numpy as np
from filelock import FileLock, Timeout

from rizz.core import AdaptiveState, CandidateRule, Label, StepInput, Verdict, from_data, to_data
from rizz.shell.embed import EmbeddingStore

__all__ = ["RunDir", "RunDirBusy", "RunDirMismatch", "record_to_step", "write_json_atomic"]


class RunDirBusy(RuntimeError):
    """Another process holds the RUN_DIR lock."""


class RunDirMismatch(RuntimeError):
    """RUN_DIR was started with a different stream, policy, model or embedder."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temp file, fsync and ``os.replace``."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunDir:
    """Owner of one RUN_DIR. Use as a context manager to hold the lock."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.log_path = self.root / "log.jsonl"
        self.meta_path = self.root / "run.json"
        self.summary_path = self.root / "summary.json"
        self.snap_dir = self.root / "snapshots"
        self.prompt_dir = self.root / "prompts"
        self._lock: FileLock | None = None
        self._log: Any = None

    # -- lock ------------------------------------------------------------------------
    def __enter__(self) -> "RunDir":
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.root / ".lock"), timeout=0)
        try:
            self._lock.acquire()
        except Timeout:
            owner = (self.root / ".lock.pid").read_text().strip() if (self.root / ".lock.pid").exists() else "?"
            raise RunDirBusy(f"{self.root} is in use by another rizz process (pid {owner}); wait for it or use another --out") from None
        (self.root / ".lock.pid").write_text(str(os.getpid()))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._lock is not None:
            self._lock.release()

    # -- metadata ----------------------------------------------------------------------
    def check_or_write_meta(self, meta: dict[str, Any]) -> dict[str, Any]:
        """Write ``run.json`` for a new run; for an existing one, refuse any difference in
        the fields that decide the results (stream, policy, model, embedder, rendering)."""
        if not self.meta_path.exists():
            write_json_atomic(self.meta_path, meta)
            return meta
        old = json.loads(self.meta_path.read_text(encoding="utf-8"))
        diffs = [k for k in ("stream_sha256", "policy_digest", "model", "embedder", "embedder_dim", "rendering", "budget_cap") if old.get(k) != meta.get(k)]
        if diffs:
            lines = [f"  {k}: run has {old.get(k)!r}, this command has {meta.get(k)!r}" for k in diffs]
            raise RunDirMismatch(f"{self.root} was started with different settings; resume refused:\n" + "\n".join(lines) + "\nUse a new --out directory.")
        return old

    def meta(self) -> dict[str, Any]:
        if not self.meta_path.exists():
            subs = sorted(d.name for d in self.root.glob("*/") if (d / "run.json").exists()) if self.root.is_dir() else []
            hint = f"; a bench folder? its runs: {', '.join(str(self.root / s) for s in subs)}" if subs else ""
            raise FileNotFoundError(f"{self.root}: no run.json — not a rizz RUN_DIR{hint}")
        return json.loads(self.meta_path.read_text(encoding="utf-8"))

    @property
    def embeddings(self) -> EmbeddingStore:
        return EmbeddingStore(self.root / "embeddings")

    # -- log -----------------------------------------------------------------------------
    def repair(self) -> int:
        """Truncate a partial last line left by a kill. Returns the bytes removed."""
        if not self.log_path.exists():
            return 0
        data = self.log_path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end == len(data):
            return 0
        with open(self.log_path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        return len(data) - end

    def records(self) -> Iterator[dict[str, Any]]:
        """The complete records of ``log.jsonl`` in order (a partial last line is skipped)."""
        if not self.log_path.exists():
            return
        with open(self.log_path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    return
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{self.log_path}:{n}: corrupt log record ({e.msg})") from None

    def append(self, record: dict[str, Any]) -> None:
        """Append one record, flushed and fsynced before returning."""
        if self._log is None:
            self._log = open(self.log_path, "ab")
        self._log.write(json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        self._log.flush()
        os.fsync(self._log.fileno())

    def save_prompt(self, sha: str, text: str) -> None:
        self.prompt_dir.mkdir(exist_ok=True)
        p = self.prompt_dir / f"{sha}.txt"
        if not p.exists():
            tmp = p.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, p)

    # -- snapshots --------------------------------------------------------------------
    def save_snapshot(self, steps_done: int, state: AdaptiveState) -> None:
        self.snap_dir.mkdir(exist_ok=True)
        write_json_atomic(self.snap_dir / f"{steps_done:08d}.json", to_data(state))

    def latest_snapshot(self, at_most: int) -> tuple[int, AdaptiveState] | None:
        """The newest snapshot taken after ≤ ``at_most`` steps, as (steps done, state)."""
        if not self.snap_dir.exists():
            return None
        done = sorted(int(p.stem) for p in self.snap_dir.glob("*.json") if p.stem.isdigit() and int(p.stem) <= at_most)
        if not done:
            return None
        data = json.loads((self.snap_dir / f"{done[-1]:08d}.json").read_text(encoding="utf-8"))
        return done[-1], from_data(data)


def record_to_step(rec: dict[str, Any], store: EmbeddingStore) -> tuple[StepInput, Verdict | None]:
    """Rebuild the core's step input and verdict from a log record (no model calls)."""
    x = rec["input"]

    def vec(key: str | None) -> bytes:
        return store.get(key).astype(np.float32).tobytes() if key else b""

    judge = rec.get("judge")
    label = Label(judge["function"], judge["application"]) if judge else None
    rules = tuple(CandidateRule(a, s, vec(k)) for a, s, k in (rec.get("distill") or {}).get("rules", []))
    prompt = rec.get("prompt") or {}
    inp = StepInput(
        step=rec["step"], item_id=rec["id"], text=x["text"], embedding=vec(x["embedding"]), instruction=x.get("instruction"),
        evidence=x.get("evidence"), scope=x.get("scope"), shape=x.get("shape"), context_only=rec["context_only"],
        label=label, label_embedding=vec(judge.get("label_embedding")) if judge else b"",
        answer=(rec.get("answer") or {}).get("extracted"), prompt_rule_ids=tuple(prompt.get("rule_ids", ())),
        prompt_episode_keys=tuple(prompt.get("episode_keys", ())), prompt_tokens=prompt.get("tokens", 0),
        completion_tokens=sum(c["completion_tokens"] for c in rec.get("calls", []) if c["kind"] == "answer"),
        dropped=len(prompt.get("dropped", ())), candidate_rules=rules, distilled=bool((rec.get("distill") or {}).get("asked")),
        prompt_blocks=tuple(prompt.get("blocks", ())),
        declared_label=Label(rec["declared_label"]["function"], rec["declared_label"]["application"]) if rec.get("declared_label") else None,
    )
    v = rec.get("verdict")
    verdict = Verdict(v["reward"], v["verifier"], v["parsed"]) if v else None
    return inp, verdict


_ = attrs
