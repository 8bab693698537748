"""Issue #12 §7 "Crashes": kill -9 at 20 random points, flipped snapshot bytes, a corrupted
response cache and a full disk. Every interrupted run resumes to the uninterrupted digest.

The runs are real ``run_stream`` runs (RUN_DIR, log, snapshots, embedding store, response
cache) with the deterministic stubs of ``stubs.py`` in place of the model and the embedder,
so a process starts in about a second; ``crash_runner.py`` is the process that gets killed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rizz.adapters.models import Generation
from rizz.adapters.models.cache import CachedModel, ResponseCache
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.store import durable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().parent / "crash_runner.py"
SITES = ("log.append", "snapshot.write", "embedding.write", "prompt.write", "cache.put", "step")


def _run(stream: Path, out: Path, every: int = 3, log=lambda m: None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    model = CachedModel(ArithmeticModel(), ResponseCache(out / "responses.sqlite"))
    return run_stream(stream, load_policy("default"), "default", out, model, HashEmbedder(),
                      snapshot_every=every, rendering="chat", log=log)


def _proc(stream: Path, out: Path, fault: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(durable.FAULT_ENV, None)
    if fault:
        env[durable.FAULT_ENV] = fault
    return subprocess.run([sys.executable, str(RUNNER), str(stream), str(out), "3"], env=env,
                          capture_output=True, text=True, timeout=300)


def _steps(out: Path) -> int:
    """Complete step records in the log (distillation records apart)."""
    log = out / "log.jsonl"
    lines = log.read_bytes().split(b"\n")[:-1] if log.exists() else []
    return sum(1 for line in lines if b'"kind": "distill"' not in line)


@pytest.mark.slow
def test_kill_9_at_20_random_points_then_resume_reaches_the_same_digest(tmp_path):
    stream = arithmetic_stream(tmp_path / "s.jsonl", 90)
    want = _run(stream, tmp_path / "full")["state_digest"]
    rng = random.Random(20261201)
    plans = ["log.append", "snapshot.write", "embedding.write"] + [rng.choice(SITES) for _ in range(17)]
    out = tmp_path / "killed"
    seen_partial_line = seen_tmp_snapshot = 0
    history = []
    for site in plans:
        plan = f"{site}:{rng.randint(1, 3)}"
        before = _steps(out)
        res = _proc(stream, out, plan)
        assert res.returncode == -signal.SIGKILL, (plan, res.returncode, res.stderr[-2000:])
        history.append((plan, before, _steps(out)))
        log = out / "log.jsonl"
        seen_partial_line += log.exists() and not log.read_bytes().endswith(b"\n")
        seen_tmp_snapshot += any((out / "snapshots").glob("*.tmp")) if (out / "snapshots").exists() else 0
    assert _steps(out) < 90, history  # every one of the 20 runs was killed before the end
    assert seen_partial_line >= 1 and seen_tmp_snapshot >= 1, history
    done = _proc(stream, out, None)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["state_digest"] == want, history
    assert replay(out, write_summary=False)["state_digest"] == want


def _flip(path: Path, offset_from_end: int) -> None:
    data = bytearray(path.read_bytes())
    i = len(data) - offset_from_end
    data[i] = ord("7") if data[i] != ord("7") else ord("3")  # a digit: the file stays valid JSON
    path.write_bytes(bytes(data))


def test_a_snapshot_with_a_flipped_byte_is_ignored_and_rebuilt_from_the_log(tmp_path):
    stream = arithmetic_stream(tmp_path / "s.jsonl", 14)
    full = _run(stream, tmp_path / "full")
    out = tmp_path / "r"
    _run(stream, out)
    snap = out / "snapshots" / "00000012.json"
    # find a digit inside the state's data, near the end, and change it: still JSON, wrong state
    text = snap.read_bytes()
    pos = next(k for k in range(40, len(text)) if chr(text[-k]).isdigit())
    _flip(snap, pos)
    data, why = durable.read_snapshot(snap)
    assert data is None and why == "checksum mismatch"
    lines = (out / "log.jsonl").read_bytes().splitlines(keepends=True)
    (out / "log.jsonl").write_bytes(b"".join(lines[:13]))  # as if killed after step 13
    (out / "summary.json").unlink()
    msgs: list[str] = []
    again = _run(stream, out, log=msgs.append)
    assert again["state_digest"] == full["state_digest"]
    assert any("00000012.json: checksum mismatch; ignored and rebuilt from the log" in m for m in msgs), msgs
    assert durable.read_snapshot(snap)[1] is None  # rewritten, sound again


def test_an_old_snapshot_without_checksum_is_not_trusted(tmp_path):
    stream = arithmetic_stream(tmp_path / "s.jsonl", 8)
    out = tmp_path / "r"
    want = _run(stream, out)["state_digest"]
    snap = out / "snapshots" / "00000006.json"
    state = json.loads(snap.read_bytes())["state"]
    snap.write_text(json.dumps(state))  # the format before checksums
    assert durable.read_snapshot(snap) == (None, "no checksum (older format)")
    lines = (out / "log.jsonl").read_bytes().splitlines(keepends=True)
    (out / "log.jsonl").write_bytes(b"".join(lines[:7]))
    assert _run(stream, out)["state_digest"] == want


@pytest.mark.parametrize("damage", ["header", "middle", "garbage"])
def test_a_corrupted_response_cache_is_detected_and_rebuilt(tmp_path, damage, capsys):
    path = tmp_path / "responses.sqlite"
    cache = ResponseCache(path)
    for i in range(300):
        cache.put(f"{i:064x}", Generation("x" * 200, 1, 1, 0.0, None, "m", "stop"))
    cache.close()
    with sqlite3.connect(path) as db:  # fold the WAL into the main file before damaging it
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    if damage == "header":
        data[0:16] = b"not a database!!"
    elif damage == "middle":
        for k in range(len(data) // 2, len(data) // 2 + 4096):
            data[k] ^= 0x5A
    else:
        data = bytearray(os.urandom(len(data)))
    path.write_bytes(bytes(data))
    again = ResponseCache(path)
    got = [again.get(f"{i:064x}") for i in range(300)]  # never raises
    if again.rebuilt is None:  # damage only found on read: rebuilt then
        assert all(g is None or g.text == "x" * 200 for g in got)
    assert again.rebuilt is not None, "corruption not detected"
    assert (tmp_path / "responses.sqlite.corrupt").exists()
    assert "corrupt response cache" in capsys.readouterr().err
    again.put("f" * 64, Generation("y", 1, 1, 0.0, None, "m", "stop"))
    assert again.get("f" * 64).text == "y"


def test_a_run_resumes_over_a_corrupted_response_cache(tmp_path):
    stream = arithmetic_stream(tmp_path / "s.jsonl", 10)
    want = _run(stream, tmp_path / "full")["state_digest"]
    out = tmp_path / "r"
    res = _proc(stream, out, "step:6")  # killed before step 6
    assert res.returncode == -signal.SIGKILL
    (out / "responses.sqlite").write_bytes(b"\x00garbage" * 512)
    for extra in ("-wal", "-shm"):
        Path(str(out / "responses.sqlite") + extra).unlink(missing_ok=True)
    assert _run(stream, out)["state_digest"] == want


def test_a_full_disk_stops_cleanly_and_the_run_resumes_once_there_is_space(tmp_path, monkeypatch):
    """Injected ENOSPC in the middle of a log append (half a record written)."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    stream = arithmetic_stream(tmp_path / "s.jsonl", 9)
    want = _run(stream, tmp_path / "full")["state_digest"]
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    monkeypatch.setattr("rizz.apps.cli.load_model",
                        lambda spec, cache=None: CachedModel(ArithmeticModel(), ResponseCache(cache)))
    monkeypatch.setattr("rizz.apps.cli.backend_name", lambda spec: ArithmeticModel().name)  # what the spec loads
    out = tmp_path / "r"
    args = ["run", str(stream), "--out", str(out), "--rendering", "chat", "--snapshot-every", "3"]
    monkeypatch.setenv(durable.FAULT_ENV, "enospc@log.append:4")
    monkeypatch.setattr(durable, "_counts", {})
    res = CliRunner().invoke(cli.app, args)
    err = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == durable.EXIT_DISK_FULL, (res.exception, err)
    assert "disk full while writing step 3" in err and "run the same command again to resume" in err
    assert "Traceback" not in err
    log = (out / "log.jsonl").read_bytes()
    assert log.endswith(b"\n") and log.count(b"\n") == 3  # the half-written record was cut off
    assert [json.loads(x)["step"] for x in log.splitlines()] == [0, 1, 2]
    monkeypatch.delenv(durable.FAULT_ENV)
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 0, res.output
    assert json.loads((out / "summary.json").read_text())["state_digest"] == want


def test_a_full_disk_on_a_snapshot_or_the_cache_is_reported_too(tmp_path, monkeypatch):
    stream = arithmetic_stream(tmp_path / "s.jsonl", 5)
    for site in ("snapshot.write", "cache.put", "prompt.write", "embedding.write"):
        monkeypatch.setenv(durable.FAULT_ENV, f"enospc@{site}:1")
        monkeypatch.setattr(durable, "_counts", {})
        with pytest.raises(OSError) as info:
            _run(stream, tmp_path / site)
        assert durable.disk_full(info.value, site) is not None, site


def test_a_folder_given_as_the_response_cache_is_refused_not_moved(tmp_path):
    folder = tmp_path / "runs"
    (folder / "r1").mkdir(parents=True)
    (folder / "r1" / "log.jsonl").write_text("{}\n")
    with pytest.raises(IsADirectoryError, match="is a folder, not a response cache file"):
        ResponseCache(folder)
    assert (folder / "r1" / "log.jsonl").read_text() == "{}\n"
    assert not (tmp_path / "runs.corrupt").exists()
