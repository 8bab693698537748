"""A store's refusals (RunDirBusy, RunStoreError, RunDirMismatch) carry what they are about and
word themselves for their reader (rizz/store/refusal.py): ``rizz run``'s command line
(``"cli"``, the message), ``Session.open``'s caller (``"api"``) and ``rizz serve``
(``"serve"``). The exact texts are pinned here: the cli ones as the store wrote them before,
the api ones as ``Session.open`` made of those (it rewrote the text of a RunDirBusy or a
RunStoreError before they carried their kind) or as ``RunDirMismatch.worded`` rendered them."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from rizz.engine.session import _reword
from rizz.store.embeddings import embedding_key
from rizz.store.refusal import WORDINGS
from rizz.store.runlog import RunDir, RunDirBusy, RunDirMismatch, RunDirReadOnly, SettingChange
from rizz.store.runstore import RunStore, RunStoreError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from livekit import HashEmbedder, StubModel  # noqa: E402

STORE = Path("runs/a/store.sqlite")
UNREADABLE = ("runs/a/store.sqlite: not a readable rizz store (file is not a database); it holds the run's embeddings and "
              "prompts, so it is not rebuilt: restore it from a backup, or ")
WAL = ("runs/a/store.sqlite: store.sqlite-wal holds commits not yet in store.sqlite, and SQLite cannot read them without "
       "creating store.sqlite-shm in runs/a (attempt to write a readonly database); copy the RUN_DIR to a writable folder "
       "and run the command there")
READONLY = ("runs/a/store.sqlite: opened read-only (by a RunDir that does not hold the RUN_DIR's lock); writes go through "
            "the RunDir that holds it (`with RunDir(...) as rd`)")
HERE = "runs/a is already open in this process (a Session or a run holds it); close that one first, or use another directory"
ELSEWHERE = "runs/a is in use by another rizz process (pid 4242); wait for it or "

#: (the refusal, its cli, api and serve wordings), one per kind.
CASES = [
    (RunStoreError(path=STORE, kind="unreadable", reason="file is not a database"),
     UNREADABLE + "rerun into a new --out", UNREADABLE + "run again into a new directory (another path)",
     UNREADABLE + "rerun into another --data folder"),
    *((RunStoreError(path=STORE, kind="newer", version=7),) + ("runs/a/store.sqlite: store layout 7 is newer than this rizz reads (1); upgrade rizz",) * 3,),
    (RunStoreError(path=STORE, kind="wal", reason="attempt to write a readonly database"), WAL, WAL, WAL),
    (RunStoreError(path=STORE, kind="readonly"), READONLY, READONLY, READONLY),
    *((RunStoreError(path=STORE, kind="read", reason="disk I/O error"),) + ("runs/a/store.sqlite: read failed (disk I/O error)",) * 3,),
    *((RunStoreError(path=STORE, kind="write", reason="database is locked"),) + ("runs/a/store.sqlite: write failed (database is locked)",) * 3,),
    (RunDirBusy(root="runs/a", kind="this process", owner="17"), HERE, HERE, HERE),
    (RunDirBusy(root="runs/a", kind="another process", owner="4242"), ELSEWHERE + "use another --out",
     ELSEWHERE + "give Session.open another path", ELSEWHERE + "use another --data folder"),
    (RunDirMismatch(root="runs/a", changes=(SettingChange("budget_cap", None, 512),)),
     "runs/a was started with different settings; resume refused:\n  --budget: run has none, this command has 512\n"
     "To resume, leave out --budget; to run with this command's settings, use a new --out directory.",
     "runs/a was started with different settings; resume refused:\n  budget_cap: run has none, this call has 512\n"
     "To resume, leave out budget_cap; to run with this call's settings, give Session.open another path (a new directory).",
     "runs/a was started with different settings; resume refused:\n  --budget: run has none, this command has 512\n"
     "To resume, leave out --budget; to run with this command's settings, use another --data folder."),
    (RunDirMismatch(root="runs/a", changes=(SettingChange("budget_cap", 2048, None),)),
     "runs/a was started with different settings; resume refused:\n  --budget: run has 2048, this command has none\n"
     "To resume, give --budget 2048; to run with this command's settings, use a new --out directory.",
     "runs/a was started with different settings; resume refused:\n  budget_cap: run has 2048, this call has none\n"
     "To resume, give budget_cap=2048; to run with this call's settings, give Session.open another path (a new directory).",
     "runs/a was started with different settings; resume refused:\n  --budget: run has 2048, this command has none\n"
     "To resume, give --budget 2048; to run with this command's settings, use another --data folder."),
    (RunDirMismatch(root="runs/a", changes=(SettingChange("model", "a:b", "c:d"),)),  # recorded by its backend's name, not a spec to give back
     "runs/a was started with different settings; resume refused:\n  --model: run has 'a:b', this command has 'c:d'\nUse a new --out directory.",
     "runs/a was started with different settings; resume refused:\n  model: run has 'a:b', this call has 'c:d'\n"
     "Use a new directory: give Session.open another path.",
     "runs/a was started with different settings; resume refused:\n  --model: run has 'a:b', this command has 'c:d'\nUse another --data folder."),
    (RunDirMismatch(root="runs/a", changes=(SettingChange("policy", "default", "frozen"),)),
     "runs/a was started with different settings; resume refused:\n  policy: run has 'default', this command has 'frozen'\n"
     "To resume, give the policy the run started with, unchanged; to run this policy, use a new --out directory.",
     "runs/a was started with different settings; resume refused:\n  policy: run has 'default', this call has 'frozen'\n"
     "To resume, give the policy the run started with, unchanged; to run this policy, give Session.open another path (a new directory).",
     "runs/a was started with different settings; resume refused:\n  policy: run has 'default', this command has 'frozen'\n"
     "To resume, give the policy the run started with, unchanged; to run this policy, use another --data folder."),
    (RunDirMismatch(root="runs/a", changes=(SettingChange("rendering", "chat", "raw"), SettingChange("budget_cap", None, 512))),
     "runs/a was started with different settings; resume refused:\n  --rendering: run has 'chat', this command has 'raw'\n"
     "  --budget: run has none, this command has 512\n"
     "To resume, leave out --budget and give --rendering chat; to run with this command's settings, use a new --out directory.",
     "runs/a was started with different settings; resume refused:\n  rendering: run has 'chat', this call has 'raw'\n"
     "  budget_cap: run has none, this call has 512\n"
     "To resume, leave out budget_cap and give rendering='chat'; to run with this call's settings, give Session.open another path (a new directory).",
     "runs/a was started with different settings; resume refused:\n  --rendering: run has 'chat', this command has 'raw'\n"
     "  --budget: run has none, this command has 512\n"
     "To resume, leave out --budget and give --rendering chat; to run with this command's settings, use another --data folder."),
    (RunDirMismatch(root="runs/a", changes=(SettingChange("budget_cap", 2048, None), SettingChange("user_model", None, "u:m"),
                                            SettingChange("rendering", "chat", "raw"))),
     "runs/a was started with different settings; resume refused:\n  --budget: run has 2048, this command has none\n"
     "  --user-model: run has none, this command has 'u:m'\n  --rendering: run has 'chat', this command has 'raw'\n"
     "To resume, leave out --user-model, and give --budget 2048 and --rendering chat; "
     "to run with this command's settings, use a new --out directory.",
     "runs/a was started with different settings; resume refused:\n  budget_cap: run has 2048, this call has none\n"
     "  user_model: run has none, this call has 'u:m'\n  rendering: run has 'chat', this call has 'raw'\n"
     "To resume, leave out user_model, and give budget_cap=2048 and rendering='chat'; "
     "to run with this call's settings, give Session.open another path (a new directory).",
     "runs/a was started with different settings; resume refused:\n  --budget: run has 2048, this command has none\n"
     "  --user-model: run has none, this command has 'u:m'\n  --rendering: run has 'chat', this command has 'raw'\n"
     "To resume, leave out --user-model, and give --budget 2048 and --rendering chat; "
     "to run with this command's settings, use another --data folder."),
]
IDS = [f"{type(c[0]).__name__}-{getattr(c[0], 'kind', '') or '+'.join(ch.setting for ch in c[0].changes)}" for c in CASES]


@pytest.mark.parametrize(("error", "cli", "api", "serve"), CASES, ids=IDS)
def test_each_refusal_is_worded_for_a_command_a_python_caller_and_serve(error, cli, api, serve):
    assert str(error) == cli  # the message is the command line's, as before
    assert (error.worded("cli"), error.worded("api"), error.worded("serve")) == (cli, api, serve)
    with pytest.raises(ValueError, match="words must be one of cli, api, serve, got 'shell'"):
        error.worded("shell")


@pytest.mark.parametrize(("error", "cli", "api", "serve"), CASES, ids=IDS)
def test_session_open_rewords_a_refusal_from_its_structure_and_keeps_it(error, cli, api, serve):
    """``_reword`` (Session.open's ``words="api"``) puts the api wording in the message; the
    structure stays, so the error still words itself for another reader."""
    error = type(error)(str(error), **_fields(error))  # a copy: CASES are shared
    _reword(error, "cli")
    assert str(error) == cli
    _reword(error, "api")
    assert str(error) == api and (error.worded("cli"), error.worded("serve")) == (cli, serve)


def _fields(error):
    if isinstance(error, RunDirMismatch):
        return {"root": error.root, "changes": error.changes}
    if isinstance(error, RunDirBusy):
        return {"root": error.root, "kind": error.kind, "owner": error.owner}
    return {"path": error.path, "kind": error.kind, "reason": error.reason, "version": error.version}


def test_a_refusal_built_from_its_text_alone_is_worded_as_it_is_everywhere():
    """rizz raises none (every refusal carries its structure); a caller's own keeps its message."""
    for error in (RunDirBusy("runs/a is in use by another rizz process (pid 1); wait for it or use another --out"),
                  RunStoreError("x: not a readable rizz store (y); ... or rerun into a new --out"),
                  RunDirMismatch("runs/a: resume refused:\n  --budget: run has none, this command has 512\nUse a new --out directory.")):
        assert {error.worded(w) for w in WORDINGS} == {str(error)}
        before = str(error)
        _reword(error, "api")
        assert str(error) == before
    read_only = RunDirReadOnly("runs/a: cannot write here (runs/a/.lock: Read-only file system); ...")
    assert {read_only.worded(w) for w in WORDINGS} == {str(read_only)} and read_only.kind == ""
    with pytest.raises(ValueError, match="a RunDirBusy's kind is one of 'this process', 'another process', with its root"):
        RunDirBusy(root="runs/a", kind="busy")
    with pytest.raises(ValueError, match="a RunStoreError's kind is one of unreadable, newer, wal, readonly, read, write"):
        RunStoreError(kind="newer")


def test_the_store_raises_its_refusals_with_their_structure(tmp_path):
    root = tmp_path / "run"
    with RunDir(root):
        with pytest.raises(RunDirBusy) as busy:
            RunDir(root).__enter__()
    assert (busy.value.root, busy.value.kind) == (root, "this process")
    assert str(busy.value) == (f"{root} is already open in this process (a Session or a run holds it); "
                               "close that one first, or use another directory")

    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database, " * 512)
    with pytest.raises(RunStoreError) as unreadable:
        RunStore(bad).get(embedding_key("a", "e"))
    e = unreadable.value
    assert (e.path, e.kind, e.reason) == (bad, "unreadable", "file is not a database")
    assert str(e) == (f"{bad}: not a readable rizz store (file is not a database); it holds the run's embeddings and prompts, "
                      "so it is not rebuilt: restore it from a backup, or rerun into a new --out")
    assert e.worded("api").endswith("restore it from a backup, or run again into a new directory (another path)")

    newer = tmp_path / "newer.sqlite"
    with closing(sqlite3.connect(newer)) as db:
        db.execute("PRAGMA user_version=9")
    for readonly in (False, True):
        with pytest.raises(RunStoreError) as info:
            RunStore(newer, readonly=readonly).get(embedding_key("a", "e"))
        assert (info.value.kind, info.value.version) == ("newer", 9)
        assert str(info.value) == f"{newer}: store layout 9 is newer than this rizz reads (1); upgrade rizz"

    store = tmp_path / "store.sqlite"
    RunStore(store).close()
    with pytest.raises(RunStoreError) as info:
        RunStore(store, readonly=True).put(embedding_key("a", "e"), np.zeros(3, np.float32))
    assert info.value.kind == "readonly" and str(info.value) == READONLY.replace("runs/a/store.sqlite", str(store))


def test_session_open_words_a_busy_directory_in_its_callers_terms(tmp_path):
    from rizz import Session

    path = tmp_path / "app"
    kw = dict(policy="default", model=StubModel(), embedder=HashEmbedder())
    s = Session.open(path, **kw)
    try:
        for words in ("api", "cli"):
            with pytest.raises(RunDirBusy) as info:
                Session.open(path, words=words, **kw)
            assert info.value.kind == "this process" and str(info.value) == info.value.worded(words)
    finally:
        s.close()


def test_serve_words_a_refusal_by_its_data_folder(tmp_path):
    pytest.importorskip("fastapi", reason="rizz[serve] not installed")
    pytest.importorskip("prometheus_client", reason="rizz[serve] not installed (prometheus-client)")
    from fastapi.testclient import TestClient
    from stubs import StubBackend

    from rizz.apps.serve.run import build

    class Model(StubBackend):
        name = "double:model"

        def reply(self, messages) -> str:
            return "B"

    refusals = {"busy": RunDirBusy(root="d/acme", kind="another process", owner="9"),
                "mismatch": RunDirMismatch(root="d/acme", changes=(SettingChange("model", "a:b", "double:model"),))}

    for name, (status, text) in {"busy": (503, "d/acme is in use by another rizz process (pid 9); wait for it or use another --data folder"),
                                 "mismatch": (409, "d/acme was started with different settings; resume refused:\n"
                                                   "  --model: run has 'a:b', this command has 'double:model'\nUse another --data folder.")}.items():
        def opener(path, error=refusals[name]):
            raise error

        app, _, _ = build(tmp_path / name, None, Model(), opener=opener)
        r = TestClient(app).get("/v1/tenants/acme/state")
        assert (r.status_code, r.json()["error"]) == (status, text)


def _held(root: Path, steps: int) -> Path:
    """A RUN_DIR whose log holds ``steps`` finished steps (records as check_limit counts them)."""
    root.mkdir(parents=True)
    (root / "run.json").write_text("{}")
    (root / "log.jsonl").write_text("".join(f'{{"v": 1, "kind": "step", "step": {i}}}\n' for i in range(steps)))
    return root


def test_a_resume_under_a_smaller_limit_carries_it_and_is_worded_for_each_reader(tmp_path):
    root = _held(tmp_path / "run", 5)
    with pytest.raises(RunDirMismatch) as info:
        RunDir(root).check_limit(3)
    e = info.value
    assert (e.root, e.changes) == (root, (SettingChange("limit", 5, 3),))
    held = f"{root} already holds 5 finished steps, more than this "
    why = " (a resume keeps every finished step, so its summary and report would count 5); "
    assert str(e) == e.worded("cli") == (held + "command's --limit 3" + why + "to resume it give --limit 5 or more, or no --limit; "
                                         "to run 3, use a new --out directory")
    assert e.worded("api") == (held + "call's limit=3" + why + "to resume it give limit=5 or more, or limit=None; "
                               "to run 3, use a new directory (another path)")
    assert e.worded("serve") == (held + "command's --limit 3" + why + "to resume it give --limit 5 or more, or no --limit; "
                                 "to run 3, use another --data folder")
    _reword(e, "api")
    assert str(e) == e.worded("api")
    RunDir(root).check_limit(5)  # as many as it holds, or no limit: resumed
    RunDir(root).check_limit(None)


def test_a_peer_resumed_with_other_settings_carries_them_and_is_worded_for_each_reader(tmp_path):
    import json

    from stubs import arithmetic_stream

    from rizz.lab.peers.run_peer import PEER_OPTIONS, _sha, run_peer

    stream = arithmetic_stream(tmp_path / "s.jsonl", 3)
    out = tmp_path / "peer:mem0"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"stream": str(stream), "stream_sha256": _sha(stream), "policy": "peer:mem0",
                                              "model": "a:b", "rendering": "chat", "peer_options": PEER_OPTIONS["mem0"],
                                              "budget_cap": 2048}))

    class Model:
        name = "c:d"

    with pytest.raises(RunDirMismatch) as info:
        run_peer(stream, "mem0", out, Model(), None, "stub", log=lambda m: None)
    e = info.value
    assert (e.root, e.changes) == (out, (SettingChange("model", "a:b", "c:d"), SettingChange("budget_cap", 2048, None)))
    head = f"{out} was started with different settings; resume refused:\n"
    assert str(e) == e.worded("cli") == (head + "  --model: run has 'a:b', this command has 'c:d'\n"
                                         "  --budget: run has 2048, this command has none\n"
                                         "To resume, give the model the run used ('a:b') and --budget 2048; "
                                         "to run with this command's settings, use a new --out directory.")
    assert e.worded("api") == (head + "  model: run has 'a:b', this call has 'c:d'\n  budget_cap: run has 2048, this call has none\n"
                               "To resume, give the model the run used ('a:b') and budget_cap=2048; "
                               "to run with this call's settings, give Session.open another path (a new directory).")
    assert e.worded("serve").endswith("\n  --budget: run has 2048, this command has none\n"
                                      "To resume, give the model the run used ('a:b') and --budget 2048; "
                                      "to run with this command's settings, use another --data folder.")
    assert not (out / "log.jsonl").exists() and json.loads((out / "run.json").read_text())["model"] == "a:b"  # nothing written
