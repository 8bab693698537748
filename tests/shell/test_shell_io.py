"""Issue #11 §3: what one element costs in syncs, what the durability promise keeps, and that
nothing in a long-lived session grows without bound but memory itself.

The sync counts are the contract of ``Session`` on a RUN_DIR (``durability="disk"``):
``answer`` → one ``fdatasync`` of the log (its record) plus one commit of ``store.sqlite``
(the new vectors and the prompt, fsynced by SQLite's ``synchronous=FULL`` before the record
is written; issue #27); ``fold`` → one ``fdatasync`` for the verdict and the distillation it
may make due, plus one store commit when the distillation made new rule vectors;
``run_element`` → one of each. ``durability="os"``: none until ``close``. SQLite's own
fsyncs are made in C, out of sight of the ``os.fsync`` counter below: the store's are counted
by its ``commits``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import attrs
import pytest
from livekit import HashEmbedder, StubModel, element

from rizz import Session, Verdict
from rizz.engine import session as session_mod
from rizz.engine.run import replay
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import element_from_json
from rizz.store import durable
from tests.core.helpers import distilling_every_batch

ROOT = Path(__file__).resolve().parents[2]


class Syncs:
    """Counts ``os.fsync`` / ``os.fdatasync`` calls from every thread, by file kind."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)

            def wrapped(fd: int, _real=real, _name=name) -> None:
                path = os.readlink(f"/proc/self/fd/{fd}")
                kind = ("log" if path.endswith("log.jsonl") else "embedding" if "/embeddings/" in path else
                        "store" if "/store.sqlite" in path else "snapshot" if "/snapshots/" in path else path)
                with self._lock:
                    self.calls.append((_name, kind))
                _real(fd)

            monkeypatch.setattr(os, name, wrapped)

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            out, self.calls = sorted(self.calls), []
        return out


pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts syncs through /proc/self/fd (Linux)")


def _open(path: Path, policy=None, **kw) -> Session:
    """A live session with the stub model; by default the policy distils every due batch
    (the stub is always right, so ``distill_after_miss`` would never distil)."""
    pol = policy or distilling_every_batch(load_policy("default"))
    return Session.open(path, policy=pol, model=StubModel(), embedder=HashEmbedder(), **kw)


def _committed(path: Path, table: str, key: str) -> bool:
    """Whether ``key`` is committed in the RUN_DIR's store (a second connection sees commits only)."""
    import sqlite3
    from contextlib import closing

    col = "key" if table == "embeddings" else "sha256"
    with closing(sqlite3.connect(path / "store.sqlite")) as db:
        return db.execute(f"SELECT 1 FROM {table} WHERE {col} = ?", (key,)).fetchone() is not None


def test_one_sync_of_the_log_and_one_store_commit_per_call(tmp_path, monkeypatch):
    s = _open(tmp_path / "live", snapshot_every=0)
    store = s.run_dir.embeddings
    assert store._conn(create=True).execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: a commit fsyncs the WAL
    syncs = Syncs(monkeypatch)
    distilled = 0
    for i in range(12):
        before = store.commits
        s.answer(element(i))
        got = syncs.take()
        if i == 0:  # the log was created: its directory entry is synced once
            assert got.count(("fsync", str(tmp_path / "live"))) == 1, got
            got.remove(("fsync", str(tmp_path / "live")))
        assert got == [("fdatasync", "log")], (i, got)
        assert store.commits - before == 1, i  # the input's vector, the label's, the prompt: one transaction
        before = store.commits
        f = s.fold(f"q{i}", Verdict(1.0, "exact_match"))
        got = syncs.take()
        distilled += any(c.kind == "distill" for c in f.calls)
        assert got == [("fdatasync", "log")], (i, got)
        assert store.commits - before <= 1 and (store.commits > before) <= any(c.kind == "distill" for c in f.calls), i
    assert distilled >= 2  # some folds wrote a verdict and a distill record under that one sync
    s.close()


class SevenModel(StubModel):
    """The live stub, answering every sum with 7 (so a reference of 7 verifies and distils)."""

    def generate(self, messages, **kw):
        g = super().generate(messages, **kw)
        judging = any('"function"' in m.content or "IF-THEN" in m.content for m in messages)
        return g if judging else attrs.evolve(g, text="7")


def test_rizz_runs_element_is_one_log_sync_with_its_distillation(tmp_path, monkeypatch):
    s = Session.open(tmp_path / "run", policy=distilling_every_batch(load_policy("default")), model=SevenModel(), embedder=HashEmbedder(), snapshot_every=0)
    syncs = Syncs(monkeypatch)
    kinds = []
    for i in range(10):
        before = s.run_dir.embeddings.commits
        recs = s.run_element(element_from_json(dict(element(2 * i), reference="7")))
        kinds.append([r["kind"] for r in recs])
        got = [c for c in syncs.take() if c != ("fsync", str(tmp_path / "run"))]
        assert got == [("fdatasync", "log")], (i, got)
        assert 1 <= s.run_dir.embeddings.commits - before <= 1 + (["step", "distill"] == kinds[-1]), (i, kinds[-1])
    assert ["step", "distill"] in kinds
    s.close()


def test_a_record_on_disk_never_names_a_vector_or_prompt_that_is_not(tmp_path):
    """The store commits the vectors and the prompt before the record naming them is written."""
    s = _open(tmp_path / "keys", snapshot_every=0)
    for i in range(8):
        s.answer(element(i))
        s.fold(f"q{i}", 1.0)
        for r in (json.loads(x) for x in (tmp_path / "keys" / "log.jsonl").read_text().splitlines()):
            keys = [r["input"]["embedding"]] if "input" in r else [k for _, _, k in r.get("rules", [])]
            for k in keys:
                assert _committed(tmp_path / "keys", "embeddings", k), (i, r["kind"])
            if "prompt" in r:
                assert _committed(tmp_path / "keys", "prompts", r["prompt"]["sha256"]), (i, r["kind"])
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == [".lock", ".lock.pid", "log.jsonl", "run.json", "store.sqlite",
                                                                       "store.sqlite-shm", "store.sqlite-wal"]
    s.close()
    assert "store.sqlite-wal" not in {p.name for p in (tmp_path / "keys").iterdir()}  # closed: the WAL is folded into the file


def test_a_failed_vector_write_refuses_the_answer_and_changes_nothing(tmp_path, monkeypatch):
    s = _open(tmp_path / "full", snapshot_every=0)
    s.answer(element(0))
    d, n = s.digest(), len((tmp_path / "full" / "log.jsonl").read_bytes())
    monkeypatch.setenv(durable.FAULT_ENV, "enospc@embedding.write:1")
    monkeypatch.setattr(durable, "_counts", {})
    with pytest.raises(OSError) as info:
        s.answer(element(1))
    assert durable.disk_full(info.value, "embedding") is not None
    assert s.digest() == d and s.pending_ids() == ["q0"] and len((tmp_path / "full" / "log.jsonl").read_bytes()) == n
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(tmp_path / "full" / "store.sqlite")) as db:  # the failed transaction left no row
        assert db.execute("SELECT COUNT(*) FROM prompts").fetchone()[0] == 1
    monkeypatch.delenv(durable.FAULT_ENV)
    s.answer(element(1))  # space again: the same answer goes through
    assert s.pending_ids() == ["q0", "q1"]
    s.close()


def test_durability_os_syncs_nothing_per_call_and_everything_at_close(tmp_path, monkeypatch):
    s = _open(tmp_path / "os", snapshot_every=0, durability="os")
    syncs = Syncs(monkeypatch)
    for i in range(10):
        s.answer(element(i))
        s.fold(f"q{i}", 1.0)
    assert syncs.take() == []
    d = s.digest()
    s.close()
    got = syncs.take()
    assert ("fdatasync", "log") in got and ("fsync", "store") in got  # the store's commits since (its WAL)
    assert replay(tmp_path / "os", write_summary=False)["state_digest"] == d
    strong = _open(tmp_path / "disk", snapshot_every=0)
    for i in range(10):
        strong.answer(element(i))
        strong.fold(f"q{i}", 1.0)
    assert strong.digest() == d  # the same session, only the syncs differ
    strong.close()


def test_durability_os_survives_kill_9(tmp_path):
    """The kill -9 test of test_live.py with durability "os": every returned answer and verdict is kept."""
    path = tmp_path / "k9os"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests" / "shell")]))
    returned: list[str] = []
    for after in (5, 13):
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "shell" / "livekit.py"), str(path), "40", "os"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        for seen, line in enumerate(proc.stdout, 1):
            returned.append(line.strip())
            if seen == after:
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    s = _open(path, policy=load_policy("default"), durability="os")  # the child's policy (livekit.py)
    recs = [json.loads(x) for x in (path / "log.jsonl").read_text().splitlines()]
    answered = {r["id"] for r in recs if r["kind"] == "answer"}
    verdicts = [r["id"] for r in recs if r["kind"] == "verdict"]
    assert len(verdicts) == len(set(verdicts))
    for line in returned:
        kind, item = line.split()
        assert item in (answered if kind == "answered" else verdicts), line
    d = s.digest()
    s.close()
    assert replay(path, write_summary=False)["state_digest"] == d


def test_snapshots_thin_out_as_the_state_grows(tmp_path, monkeypatch):
    """Snapshot every 2 records while a snapshot is at most 2 × SNAPSHOT_RECORD_BYTES, then at
    the next multiple of 2 that keeps ≤ SNAPSHOT_RECORD_BYTES per record; a resume keeps the pace."""
    monkeypatch.setattr(session_mod, "SNAPSHOT_RECORD_BYTES", 1024)
    path = tmp_path / "snap"
    s = _open(path, snapshot_every=2, keep_snapshots=0)
    for i in range(30):
        s.answer(element(i))
        s.fold(f"q{i}", 1.0)
    s.close()
    snaps = sorted(int(p.stem) for p in (path / "snapshots").glob("*.json") if p.stem.isdigit())
    sizes = {n: (path / "snapshots" / f"{n:08d}.json").stat().st_size for n in snaps}
    for a, b in zip(snaps, snaps[1:-1]):  # the last one is close()'s
        want = 2 * max(1, -(-sizes[a] // 2048))
        assert b == (a // want + 1) * want, (a, b, sizes[a], want)
    assert snaps[0] == 2 and any(b - a > 2 for a, b in zip(snaps, snaps[1:-1]))
    d = s.digest()
    s = _open(path, snapshot_every=2, keep_snapshots=0)  # resumed: the interval comes from the newest snapshot's size
    assert s._snap_interval == 2 * max(1, -(-sizes[snaps[-1]] // 2048)) and s.digest() == d
    s.close()


def test_5000_answers_and_verdicts_leave_the_bookkeeping_bounded(monkeypatch):
    """Every map a live session keeps besides the state: answers in flight, ids recently closed,
    llm_judge calls awaiting a fold. 5,000 answer+fold pairs (and answers never folded, expired by
    feedback.max_pending) in memory with the stub model."""
    monkeypatch.setattr(session_mod, "_CLOSED_IDS", 256)  # the cap, small enough to be reached here
    pol = load_policy("default")
    pol = attrs.evolve(pol, feedback=attrs.evolve(pol.feedback, max_pending=8))
    s = Session(pol, StubModel(), HashEmbedder(), rendering="chat")
    peak = {"inflight": 0, "closed": 0, "verify": 0}
    for i in range(5000):
        p = s.answer(element(i))
        if i % 10 == 9:
            continue  # never folded: expired once 8 later answers are issued
        s.verify(p)  # exact-match: no llm_judge call is kept
        s.fold(p, 1.0 if i % 3 else 0.0)
        peak = {"inflight": max(peak["inflight"], len(s._fold.inflight)), "closed": max(peak["closed"], len(s._closed)),
                "verify": max(peak["verify"], len(s._verify_calls))}
    assert peak == {"inflight": 1, "closed": 256, "verify": 0}, peak
    assert s.pending_ids() == [] or s.pending_ids() == ["q4999"]
    assert s.step_index == 5000


def test_a_stored_vector_file_is_what_np_save_writes(tmp_path):
    """The store writes the .npy bytes itself (a cached header + the data): the file format is unchanged."""
    import io

    import numpy as np

    from rizz.store.embeddings import EmbeddingStore

    store = EmbeddingStore(tmp_path)
    for i, n in enumerate((384, 16, 1)):
        v = np.random.default_rng(i).standard_normal(n).astype(np.float32)
        key = f"{i:x}" * 64
        store.put(key, v, defer=bool(i % 2))
        store.flush()
        want = io.BytesIO()
        np.save(want, v, allow_pickle=False)
        assert (tmp_path / key[:2] / f"{key}.npy").read_bytes() == want.getvalue()
        assert store.get(key).tobytes() == v.tobytes()


def test_a_failed_log_sync_stops_the_session_until_it_is_reopened(tmp_path, monkeypatch):
    """The sync comes after the record is folded in memory (so threads can share it): when the
    sync itself fails, the call raises and the session refuses further calls; reopening refolds
    from what is on disk."""
    s = _open(tmp_path / "eio", snapshot_every=0)
    s.answer(element(0))
    real = os.fdatasync

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error (injected)")

    monkeypatch.setattr(os, "fdatasync", broken)
    with pytest.raises(OSError, match="injected"):
        s.fold("q0", 1.0)
    with pytest.raises(session_mod.SessionError, match="failed disk sync"):
        s.answer(element(1))
    monkeypatch.setattr(os, "fdatasync", real)
    s.close()  # releases the directory without a snapshot
    s = _open(tmp_path / "eio", snapshot_every=0)
    assert s.pending_ids() == []  # the verdict was written (the injected failure lost nothing here)
    s.close()


def test_rizz_run_durability_os_gives_the_same_run_and_a_bad_value_is_refused(tmp_path, monkeypatch):
    from stubs import ArithmeticModel, HashEmbedder as ArithmeticEmbedder, arithmetic_stream
    from typer.testing import CliRunner

    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.apps import cli

    stream = arithmetic_stream(tmp_path / "s.jsonl", 8)
    monkeypatch.setattr("rizz.apps.cli.Embedder", ArithmeticEmbedder)
    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, cache=None: CachedModel(ArithmeticModel(), ResponseCache(cache)))
    digests = {}
    for d in ("disk", "os"):
        res = CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(tmp_path / d), "--rendering", "chat", "--durability", d])
        assert res.exit_code == 0, res.output
        digests[d] = json.loads((tmp_path / d / "summary.json").read_text())["state_digest"]
        assert (tmp_path / d / "log.jsonl").read_bytes().count(b"\n") == 8
    assert digests["disk"] == digests["os"] == replay(tmp_path / "os", write_summary=False)["state_digest"]
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(tmp_path / "bad"), "--durability", "fast"])
    assert res.exit_code != 0 and "--durability must be disk or os" in res.output and not (tmp_path / "bad").exists()
