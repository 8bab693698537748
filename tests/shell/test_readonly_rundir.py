"""Read-only commands on a RUN_DIR: they read without writing (a read-only folder works, a replay
that confirms the run changes no file), and a refold's summary.replay.json does not outlive the
log it refolded."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import rizz.engine.run as run_mod
from rizz.engine.run import replay, run_stream
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.store.embeddings import embedding_key
from rizz.store.runlog import RunDir, RunDirBusy
from rizz.store.runstore import RunStore, RunStoreError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream  # noqa: E402


def _run(stream: Path, out: Path, limit: int | None = None, model=None, log=lambda m: None) -> dict:
    return run_stream(stream, load_policy("default"), "default", out, model or ArithmeticModel(), HashEmbedder(),
                      limit=limit, snapshot_every=3, log=log)


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (dotfiles too): its bytes and mtime."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def _vec(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(8).astype(np.float32)


def test_a_read_only_store_creates_no_file_and_sees_a_writer_that_opens_meanwhile(tmp_path):
    """The store of a cleanly closed run has no -wal/-shm; reading it read-only creates none (so it
    works in a folder that cannot be written) and still sees what a writer commits once one opens."""
    path = tmp_path / "store.sqlite"
    writer = RunStore(path)
    first = writer.put(embedding_key("a", "e"), _vec(0))
    writer.put_prompt("a" * 64, "the prompt")
    writer.close()
    before = _files(tmp_path)
    assert list(before) == ["store.sqlite"]  # the last close checkpointed and removed the WAL

    reader = RunStore(path, readonly=True)
    assert reader.get(first).tobytes() == _vec(0).tobytes() and reader.prompt("a" * 64) == "the prompt"
    assert list(reader.keys()) == [first] and reader.prompt("b" * 64) is None
    assert _files(tmp_path) == before  # no -wal or -shm created, the file untouched (immutable=1)
    with pytest.raises(RunStoreError, match="opened read-only"):
        reader.put(embedding_key("b", "e"), _vec(1))
    with pytest.raises(RunStoreError, match="opened read-only"):
        reader.put_prompt("c" * 64, "text")

    writer = RunStore(path)  # a whole resume between two reads: its commits checkpointed into the file, no WAL left
    second = writer.put(embedding_key("b", "e"), _vec(1))
    writer.close()
    assert list(_files(tmp_path)) == ["store.sqlite"]
    assert reader.get(second).tobytes() == _vec(1).tobytes()  # the file changed under it: reopened, not read from a stale view

    writer = RunStore(path)  # a run resumes while the reader is open: it commits into its WAL
    third = writer.put(embedding_key("c", "e"), _vec(2))
    assert Path(f"{path}-wal").exists()
    assert reader.get(third).tobytes() == _vec(2).tobytes()  # read through the WAL (mode=ro), not the file alone
    assert third in reader and sorted(reader.keys()) == sorted([first, second, third])
    writer.close()
    reader.close()
    assert RunStore(tmp_path / "missing.sqlite", readonly=True).prompt("a" * 64) is None
    assert not (tmp_path / "missing.sqlite").exists()


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[Path]:
    """``folder`` as the newcomer had it: ``chmod -R a-w`` (as root, which file modes do not stop,
    a read-only bind mount of it, else ``chattr +i``). Yields the path to use."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for p, m in modes.items():
            p.chmod(m & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield folder
        finally:
            for p, m in modes.items():
                p.chmod(m)
        return
    view = folder.parent / (folder.name + "-ro")
    view.mkdir()
    mounted = shutil.which("mount") is not None and subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True).returncode == 0
    if mounted:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True).returncode == 0:
            try:
                yield view
            finally:
                gc.collect()  # the read-only connections of the commands' RunDirs
                subprocess.run(["umount", "-l", str(view)], check=True)
            return
        subprocess.run(["umount", "-l", str(view)], check=True)
    paths = [folder, *folder.rglob("*")]
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True).returncode == 0:
        try:
            yield folder
        finally:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
        return
    subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)
    pytest.skip("running as root, which chmod does not stop, and neither a read-only bind mount nor chattr +i is allowed here")


def test_read_only_commands_work_on_a_read_only_run_dir(tmp_path):
    """A newcomer's `chmod -R a-w RUN_DIR`: replay and inspect ended in a traceback ("not a
    readable rizz store": SQLite could not create store.sqlite's -shm file, and replay took the
    writer's lock). Reading needs neither; what must be written and cannot is one line."""
    stream = arithmetic_stream(tmp_path / "s.jsonl", 10)
    out = tmp_path / "r"
    s = _run(stream, out)
    before = _files(out)
    with _read_only(out) as ro:
        with pytest.raises(OSError):
            (ro / "probe").write_text("x")  # really read-only
        code, stdout, stderr = _cli("replay", str(ro))
        assert (code, stdout) == (0, s["state_digest"] + "\n"), stderr
        assert stderr == f"= the digest the run recorded in {ro / 'summary.json'}: its log replays to the same state\n"
        code, stdout, stderr = _cli("inspect", str(ro), "--json")
        assert code == 0 and len(json.loads(stdout)) == s["branches"]["total"], stderr
        code, stdout, stderr = _cli("diff", str(ro), "--at", "2")
        assert code == 0 and stdout.startswith("step 2 "), stderr
        code, stdout, stderr = _cli("replay", str(ro), "--policy", "single-branch")  # must write summary.replay.json: cannot
        assert code == 0 and stdout.startswith("sha256:") and stdout != s["state_digest"] + "\n", stderr
        said = stderr.splitlines()
        assert said[0].startswith("differs from the run's summary.json (default) in: ") and len(said) == 2, stderr
        assert said[1].startswith(f"{ro / 'summary.replay.json'} not written: its folder cannot be written ({ro}"), said[1]
        assert said[1].endswith("; to keep the refolded summary, copy the RUN_DIR to a writable folder and replay it there")
        assert "Traceback" not in stderr and "wrote " not in stderr
    assert _files(out) == before


def test_a_replay_that_confirms_the_run_changes_no_file(tmp_path):
    """`rizz replay RUN_DIR` rewrote summary.json and .lock.pid although the refold found the
    digest the run recorded: a read-only command took the writer's lock and wrote its summary."""
    stream = arithmetic_stream(tmp_path / "s.jsonl", 10)
    out = tmp_path / "r"
    s = _run(stream, out)
    (out / ".lock.pid").write_text("1")  # as another process left it
    before = _files(out)
    names = sorted(p.name for p in out.iterdir())
    code, stdout, _ = _cli("replay", str(out))
    assert (code, stdout) == (0, s["state_digest"] + "\n")
    assert replay(out)["state_digest"] == s["state_digest"]
    assert _files(out) == before and sorted(p.name for p in out.iterdir()) == names  # bytes, mtimes, no new file

    code, _, _ = _cli("replay", str(out), "--policy", "single-branch")  # another policy still writes its refold
    assert code == 0 and json.loads((out / "summary.replay.json").read_text())["answers_from"] == "default"
    after = _files(out)
    assert {k: v for k, v in after.items() if k not in ("summary.replay.json", ".lock.pid")} == {
        k: v for k, v in before.items() if k != ".lock.pid"}
    assert _cli("replay", str(out))[0] == 0 and _files(out) == after  # the own policy again: nothing written

    with RunDir(out):  # a writer holds the folder: a confirming replay needs no lock
        assert _cli("replay", str(out))[:2] == (0, s["state_digest"] + "\n")
        with pytest.raises(RunDirBusy):
            replay(out, load_policy("single-branch"), "single-branch")  # a write still waits for the writer


def test_a_refold_summary_goes_with_the_log_it_refolded(tmp_path, monkeypatch):
    """summary.replay.json stayed after the run's log grew, and then misled: a resume removed it only
    once it had finished (not when interrupted), a live session never did, and a replay racing a
    run could write the refold of the shorter log after the run had finished."""
    stream = arithmetic_stream(tmp_path / "s.jsonl", 12)
    out = tmp_path / "r"
    _run(stream, out, limit=3)
    single = load_policy("single-branch")
    assert replay(out, single, "single-branch")["steps"] == 3
    stale = out / "summary.replay.json"

    with pytest.raises(KeyboardInterrupt):
        _run(stream, out, limit=8, model=_Interrupted())
    assert RunDir(out).finished_steps() == 5 and not stale.exists()  # the log grew: the refold of 3 steps is gone

    assert replay(out, single, "single-branch")["steps"] == 5
    said: list[str] = []
    assert _run(stream, out, limit=8, log=said.append)["steps"] == 8 and not stale.exists()
    assert any(m == f"{stale}: removed (it refolded the run before these new steps); `rizz replay --policy` rebuilds it" for m in said)

    real = run_mod.restore_fold
    extended: list[int] = []

    def fold_then_extend(rd, policy, **kw):  # a run extends the log between the replay's refold and its lock
        folded = real(rd, policy, **kw)
        if not extended:
            extended.append(_run(stream, out, limit=10)["steps"])
        return folded

    monkeypatch.setattr(run_mod, "restore_fold", fold_then_extend)
    assert replay(out, single, "single-branch")["steps"] == 10 == json.loads(stale.read_text())["steps"]  # the log as it is now
    monkeypatch.setattr(run_mod, "restore_fold", real)

    from livekit import HashEmbedder as LiveEmbedder, StubModel, element

    live = tmp_path / "live"
    with Session.open(live, load_policy("default"), StubModel(), embedder=LiveEmbedder()) as session:
        session.fold(session.answer(element(0)), 1.0)
    assert replay(live, single, "single-branch")["steps"] == 1 and (live / "summary.replay.json").exists()
    with Session.open(live, load_policy("default"), StubModel(), embedder=LiveEmbedder()) as session:
        session.answer(element(1))  # a live session's next answer
    assert not (live / "summary.replay.json").exists()


def test_a_run_finished_on_a_ray_worker_removes_the_drivers_stale_refold(tmp_path):
    """`rizz bench --ray`: the task resumes a copy of the RUN_DIR, so its removal of
    summary.replay.json has to reach the driver's folder, which gets the task's files back."""
    from rizz.lab.ray_tasks import RunSpec, _install, _run_task, _tar_dir

    stream = arithmetic_stream(tmp_path / "s.jsonl", 8)
    out = tmp_path / "r"
    _run(stream, out, limit=3)
    replay(out, load_policy("single-branch"), "single-branch")
    spec = RunSpec("default", stream, load_policy("default"), "default", out, limit=3)
    again = _run_task(spec, stream.read_bytes(), _tar_dir(out), b"", lambda cache: ArithmeticModel(), HashEmbedder)
    _install(again["run_tar"], out)  # nothing run: the refold still describes the run
    assert again["steps_run"] == 0 and (out / "summary.replay.json").exists()
    spec = RunSpec("default", stream, load_policy("default"), "default", out, limit=6)
    more = _run_task(spec, stream.read_bytes(), _tar_dir(out), b"", lambda cache: ArithmeticModel(), HashEmbedder)
    _install(more["run_tar"], out)
    assert more["steps_run"] == 3 and RunDir(out).finished_steps() == 6 and not (out / "summary.replay.json").exists()


class _Interrupted(ArithmeticModel):
    """The resume is stopped (Ctrl-C) as it asks its third new question: two new elements logged."""

    asked = 0

    def reply(self, messages):
        if "What is" in messages[-1].content:
            self.asked += 1
            if self.asked == 3:
                raise KeyboardInterrupt
        return super().reply(messages)


def _interrupted_resume(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A run of 3 steps, then a resume to 8 interrupted after 2 more: (stream, RUN_DIR, the 3 steps' summary)."""
    stream = arithmetic_stream(tmp_path / "s.jsonl", 12)
    out = tmp_path / "r"
    first = _run(stream, out, limit=3)
    with pytest.raises(KeyboardInterrupt):
        _run(stream, out, limit=8, model=_Interrupted())
    assert RunDir(out).finished_steps() == 5 and json.loads((out / "summary.json").read_text()) == first  # the old summary stays
    return stream, out, first


def test_replay_after_an_interrupted_resume_rewrites_the_stale_summary(tmp_path):
    """An interrupted resume left summary.json of the shorter log, and `rizz replay` then refolded the
    longer log and said "≠ ... another version of rizz?" with exit 1: a false alarm about determinism.
    summary.json says which log it folded (log_records); replay checks the digest at that record
    and rewrites the stale summary, in one line, exit 0."""
    stream, out, first = _interrupted_resume(tmp_path)
    whole = replay(out, write_summary=False)
    assert first["steps"] == 3 and whole["steps"] == 5

    code, stdout, stderr = _cli("replay", str(out))
    assert (code, stdout) == (0, whole["state_digest"] + "\n"), stderr
    assert stderr == (f"{out / 'summary.json'} is from 3 steps; the log has 5: rewrote it (up to where it ends, the log replays to "
                      "the digest it recorded; the rest came after it: a resume that did not finish, or a live session)\n")
    assert json.loads((out / "summary.json").read_text()) == whole and not (out / "summary.replay.json").exists()
    assert first["log_records"] == 3 and whole["log_records"] == len(list(RunDir(out).records())) > 3
    before = _files(out)
    code, stdout, stderr = _cli("replay", str(out))  # now it records the log as it is: nothing written
    assert (code, stdout) == (0, whole["state_digest"] + "\n") and stderr.startswith("= the digest the run recorded"), stderr
    assert _files(out) == before

    finished = _run(stream, out, limit=8)  # the resume finished: its summary, confirmed as before
    assert finished["steps"] == 8 and finished["log_records"] == len(list(RunDir(out).records()))
    assert _cli("replay", str(out))[:2] == (0, finished["state_digest"] + "\n")


def test_a_stale_summary_still_catches_a_refold_that_differs(tmp_path):
    """Staleness is no excuse: the digest at the records summary.json covers must be the one it
    recorded, else it is the ≠ of another refold (summary.json kept, the refold beside it); a summary
    from before log_records (an older rizz) is placed by its steps."""
    _, out, first = _interrupted_resume(tmp_path)
    whole = replay(out, write_summary=False)

    legacy = {k: v for k, v in first.items() if k != "log_records"}  # as an older rizz wrote it
    write = (out / "summary.json").write_text
    write(json.dumps(legacy))
    code, stdout, stderr = _cli("replay", str(out))
    assert (code, stdout) == (0, whole["state_digest"] + "\n") and stderr.startswith(f"{out / 'summary.json'} is from 3 steps; the log has 5: rewrote it"), stderr
    assert json.loads((out / "summary.json").read_text()) == whole

    write(json.dumps(dict(first, state_digest="sha256:" + "0" * 64)))  # edited, or another version's refold
    code, stdout, stderr = _cli("replay", str(out))
    assert (code, stdout) == (1, whole["state_digest"] + "\n"), stderr
    said = " ".join(stderr.split())
    assert said.startswith(f"≠ the digest the run recorded in {out / 'summary.json'} (sha256:{'0' * 64}): the log up to where it "
                           f"ends (3 steps; the log has 5) refolds to another state ({first['state_digest']})"), said
    assert json.loads((out / "summary.json").read_text())["state_digest"] == "sha256:" + "0" * 64  # kept as it was
    assert json.loads((out / "summary.replay.json").read_text()) == whole


def test_a_stale_summary_that_cannot_be_rewritten_is_said_so(tmp_path):
    """On a read-only RUN_DIR, and beside a process holding the lock, the stale summary is left as it
    is (exit 0: the refold is sound), in a line that says so; a replay that must write its refold
    elsewhere names the file it writes when the lock is held."""
    _, out, first = _interrupted_resume(tmp_path)
    whole = replay(out, write_summary=False)
    before = _files(out)
    with _read_only(out) as ro:
        code, stdout, stderr = _cli("replay", str(ro))
        assert (code, stdout) == (0, whole["state_digest"] + "\n"), stderr
        said = stderr.splitlines()
        assert said[0].startswith(f"{ro / 'summary.json'} is from 3 steps; the log has 5: not rewritten (up to where it ends"), said
        assert said[1].startswith(f"{ro / 'summary.json'} not written: its folder cannot be written (") and len(said) == 2, said
    assert _files(out) == before

    with RunDir(out):  # a run or a server holds the folder (it may be appending: the file would be stale again)
        code, stdout, stderr = _cli("replay", str(out))
        assert (code, stdout) == (0, whole["state_digest"] + "\n"), stderr
        assert stderr.startswith(f"{out / 'summary.json'} is from 3 steps; the log has 5: not rewritten while a rizz "
                                 f"process (pid {os.getpid()}) holds the RUN_DIR (up to where it ends"), stderr
        assert len(stderr.splitlines()) == 1
        code, stdout, stderr = _cli("replay", str(out), "--policy", "single-branch")
        assert code == 2 and "replay it once that process has finished (this replay writes summary.replay.json" in stderr, stderr
        assert "(replay writes summary.json)" not in stderr
    assert {k: v for k, v in _files(out).items() if k != ".lock.pid"} == {k: v for k, v in before.items() if k != ".lock.pid"}  # the holder wrote its pid


def test_a_live_session_folding_after_a_replay_leaves_a_stale_summary_not_a_mismatch(tmp_path):
    """A live session's folder: replay writes summary.json (none recorded); a verdict folded later
    adds a record but no step, so the step count alone would not tell; the record count does."""
    from livekit import HashEmbedder as LiveEmbedder, StubModel, element

    live = tmp_path / "live"
    with Session.open(live, load_policy("default"), StubModel(), embedder=LiveEmbedder()) as session:
        pending = session.answer(element(0))
    code, stdout, stderr = _cli("replay", str(live))
    assert code == 0 and "it now holds the refolded summary" in stderr, stderr
    recorded = json.loads((live / "summary.json").read_text())
    with Session.open(live, load_policy("default"), StubModel(), embedder=LiveEmbedder()) as session:
        session.fold(pending.id, 1.0)
    whole = replay(live, write_summary=False)
    assert recorded["steps"] == whole["steps"] == 1 and whole["state_digest"] != recorded["state_digest"]
    code, stdout, stderr = _cli("replay", str(live))
    assert (code, stdout) == (0, whole["state_digest"] + "\n"), stderr
    assert stderr.startswith(f"{live / 'summary.json'} is from 1 step (1 log record); the log has 2 records: rewrote it"), stderr
    assert json.loads((live / "summary.json").read_text()) == whole and (recorded["log_records"], whole["log_records"]) == (1, 2)
