"""How ``rizz run`` and ``rizz bench`` start: a start that failed (a server that cannot be
reached) leaves no folder it made, one killed before its first step leaves a folder its rerun
takes, ``rizz replay`` of a run with no step says so and writes nothing, and every option value
is refused before the stream is read, the model loads or a folder is written.

A fake model (replies from the prompt's hash; a server that cannot be reached; or a process
killed at the first call, as ``kill -9`` leaves a folder) and a hash
embedder stand in for the real ones: no model runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rizz.adapters.models import Generation, Message, ModelConnectionError
from rizz.apps import cli
from rizz.store.runlog import RunDir
from tests.shell.stubs import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
LINES = [l for l in (ROOT / "data" / "trace-mini" / "test.jsonl").read_text().splitlines() if '"task": "FOMC"' in l][:4]


class FakeModel:
    """Answers a letter chosen by the prompt's hash (a distiller's prompt gets a rule); ``down…``:
    every call fails as a server that cannot be reached; ``crash…``: the first call ends the
    process as ``kill -9`` would (an error nothing handles: the folder stays as it was)."""

    context_window = 4096
    temperature = 0.0

    def __init__(self, spec: str) -> None:
        self.name = f"fake:{spec}"
        self.up = not spec.startswith("down")
        self.crash = spec.startswith("crash")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, messages: Sequence[Message], *, max_tokens: int, stop: Sequence[str] = (), rendering: str = "chat") -> Generation:
        if self.crash:
            raise SystemError(f"{self.name}: killed at its first call")
        if not self.up:
            raise ModelConnectionError(f"{self.name}: cannot reach the server (after the client's retries)")
        text = messages[-1].content
        reply = ("ABC"[int(hashlib.sha256(text.encode()).hexdigest(), 16) % 3]
                 if text.rstrip().endswith("Answer:") or "Reply with" in text else "IF the text is about rates THEN answer B")
        return Generation(text=reply, prompt_tokens=self.count_tokens(text), completion_tokens=1, latency_s=0.001, cost_usd=None,
                          model=self.name, finish_reason="stop")



@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """``rizz.apps.cli.load_model`` as :class:`FakeModel` (the specs it was asked for), the hash
    embedder, and any --model spec taken (``down...`` is a model whose server is down,
    ``crash...`` one whose process is killed at its first call)."""
    asked: list[str] = []

    def load(spec, **kw):
        asked.append(spec)
        return FakeModel(spec)

    monkeypatch.setattr("rizz.apps.cli.load_model", load)
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    monkeypatch.setattr("rizz.apps.cli.check_spec", lambda spec: None)
    return asked


@pytest.fixture
def stream(tmp_path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(LINES) + "\n")
    return path


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli.app, list(args))
    return res.exit_code, " ".join(res.output.split())


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".lock")}


# -- a start that failed ---------------------------------------------------------------------

def test_a_start_that_failed_leaves_no_folder_and_one_killed_is_started_anew_by_a_rerun_with_other_settings(tmp_path, stream, loads):
    out = tmp_path / "r"
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "down")
    assert code == 2 and "fake:down: cannot reach the server" in text and "no step had finished" in text, text
    assert not out.exists()  # nothing to keep, and nothing kept
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "crash")
    assert code == 1  # killed: its folder holds run.json and no step
    assert (out / "run.json").is_file() and RunDir(out).finished_steps() == 0
    (out / "summary.json").write_text(json.dumps({"steps": 0, "state_digest": "sha256:0"}))  # as `rizz replay` wrote one before

    # the corrected command: another model (known only once loaded) and another policy (known before)
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "default", "--model", "up")
    assert code == 0, text
    assert (f"{out}: started before with other settings (--model: run has 'fake:crash', this command has 'fake:up'; "
            "policy: run has 'frozen', this command has 'default' (differing fields:" in text
            and "but no step was recorded; its run.json is replaced by this command's settings" in text), text
    meta = json.loads((out / "run.json").read_text())
    assert (meta["policy"], meta["model"]) == ("default", "fake:up")
    assert json.loads((out / "summary.json").read_text())["steps"] == len(LINES)
    assert loads == ["down", "crash", "up"]


def test_the_same_command_after_a_killed_start_runs_without_a_note(tmp_path, stream, loads):
    out = tmp_path / "r"
    assert _cli("run", str(stream), "--out", str(out), "--model", "crash")[0] == 1
    (out / "run.json").write_text((out / "run.json").read_text().replace('"fake:crash"', '"fake:up"'))  # as if it came back
    code, text = _cli("run", str(stream), "--out", str(out), "--model", "up")
    assert code == 0 and "started before with other settings" not in text, text


def test_a_run_with_recorded_steps_is_refused_as_before_and_keeps_every_file(tmp_path, stream, loads):
    out = tmp_path / "r"
    assert _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "up", "--limit", "1")[0] == 0
    before = _files(out)
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "default", "--model", "up")
    assert code == 2 and text.startswith(f"{out} was started with different settings; resume refused: policy: run has 'frozen'"), text
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "other")
    assert code == 2 and "--model: run has 'fake:up', this command has 'fake:other'" in text, text
    assert _files(out) == before and loads == ["up", "other"]


def test_a_log_that_cannot_be_read_counts_as_started(tmp_path, stream, loads):
    out = tmp_path / "r"
    assert _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "crash")[0] == 1
    (out / "log.jsonl").write_text("{not json\n")
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "default", "--model", "up")
    assert code == 2 and "resume refused" in text, text
    assert json.loads((out / "run.json").read_text())["policy"] == "frozen"


def test_a_bench_whose_start_failed_with_its_cache_elsewhere_takes_the_same_and_the_corrected_command(tmp_path, stream, loads):
    out, cache = tmp_path / "b", tmp_path / "shared.sqlite"
    bench = ("bench", str(stream), "-P", "frozen,default", "--out", str(out), "--cache", str(cache))
    code, text = _cli(*bench, "--model", "down")
    assert code == 2 and "no step had finished" in text, text
    assert not out.exists()  # the folders it made are gone (the cache is elsewhere)
    assert _cli(*bench, "--model", "crash")[0] == 1  # killed: out/frozen/ holds run.json and no step
    assert sorted(p.name for p in out.iterdir()) == ["frozen"] and (out / "frozen" / "run.json").is_file()
    code, text = _cli(*bench, "--model", "down")  # the same command: its folder, not "other files (frozen)"
    assert code == 2 and "cannot reach the server" in text and "holds other files" not in text, text
    assert "(--model: run has 'fake:crash', this command has 'fake:down')" in text
    assert (out / "frozen" / "run.json").is_file()  # a folder it did not make stays, with this command's settings
    code, text = _cli(*bench, "--model", "up")
    assert code == 0, text
    assert f"{out / 'frozen'}: started before with other settings (--model: run has 'fake:down', this command has 'fake:up')" in text
    assert json.loads((out / "results.json").read_text())["policies"] == ["frozen", "default"]
    assert {json.loads((out / p / "run.json").read_text())["model"] for p in ("frozen", "default")} == {"fake:up"}
    before = _files(out)
    code, text = _cli(*bench, "--model", "other")  # recorded steps: refused as before, nothing changed
    assert code == 2 and "--model: run has 'fake:up', this command has 'fake:other'" in text, text
    assert _files(out) == before


# -- replay of a run with no step --------------------------------------------------------------

def test_replay_of_a_run_with_no_step_says_so_and_writes_nothing(tmp_path, stream, loads):
    out = tmp_path / "r"
    assert _cli("run", str(stream), "--out", str(out), "--model", "crash")[0] == 1
    before = _files(out)
    for extra in ([], ["--policy", "frozen"]):
        res = CliRunner().invoke(cli.app, ["replay", str(out), *extra])
        assert res.exit_code == 2 and res.output == f"the log of {out} has no steps yet: nothing to replay\n", res.output
    assert _files(out) == before and not (out / "summary.json").exists()


# -- option values first -----------------------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_bad_durability_is_refused_before_the_stream_and_the_oracle_check(tmp_path, stream, loads, command):
    out = tmp_path / "o"
    code, text = _cli(command, str(stream), "--out", str(out), "--model", "oracle", "--durability", "fast")
    assert code == 2 and text == "--durability must be disk or os, got 'fast'", text
    code, text = _cli(command, str(tmp_path / "missing.jsonl"), "--out", str(out), "--durability", "fast")
    assert code == 2 and text == "--durability must be disk or os, got 'fast'", text
    assert not out.exists() and loads == []


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_cache_that_cannot_be_a_response_cache_is_refused_and_left_as_it_is(tmp_path, stream, loads, command):
    out, folder, afile = tmp_path / "o", tmp_path / "folder", tmp_path / "notes.txt"
    folder.mkdir()
    (folder / "mine.txt").write_text("mine")
    afile.write_text("not a cache")
    for cache, said in ((folder, f"--cache {folder}: is a folder; give the response cache's file (SQLite), e.g. {folder / 'responses.sqlite'}"),
                        (stream, f"--cache {stream}: not a SQLite file (a response cache is one); give a cache file rizz wrote, or a new name"),
                        (afile / "c.sqlite", f"--cache {afile / 'c.sqlite'}: {afile} is a file, not a folder; give the response cache's file (SQLite) in a folder")):
        code, text = _cli(command, str(stream), "--out", str(out), "--cache", str(cache))
        assert code == 2 and text == said, text
    assert (folder / "mine.txt").read_text() == "mine" and afile.read_text() == "not a cache"
    assert stream.read_text() == "\n".join(LINES) + "\n" and not Path(f"{stream}.corrupt").exists()
    assert not out.exists() and loads == []
    empty = tmp_path / "new.sqlite"
    empty.write_bytes(b"")  # an empty file, as `touch` makes it, is taken (SQLite makes it a database)
    code, text = _cli(command, str(stream), "--out", str(out), "--cache", str(empty), "--model", "up", "--limit", "1")
    assert code == 0, text


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_cache_that_is_a_device_or_another_sqlite_file_is_refused_and_left_as_it_is(tmp_path, stream, loads, command):
    import sqlite3

    out, other = tmp_path / "o", tmp_path / "store.sqlite"
    with sqlite3.connect(other) as db:  # a run's store, say: SQLite, but not a response cache
        db.execute("CREATE TABLE chunks (key TEXT PRIMARY KEY, data BLOB)")
    before = other.read_bytes()
    code, text = _cli(command, str(stream), "--out", str(out), "--cache", "/dev/null")
    assert code == 2 and text == "--cache /dev/null: not a regular file (a device, a pipe or a socket); give the response cache's file (SQLite)", text
    code, text = _cli(command, str(stream), "--out", str(out), "--cache", str(other))
    assert code == 2 and text == (f"--cache {other}: a SQLite file of something else (its tables: chunks), not a response cache; "
                                  "give a cache file rizz wrote, or a new name"), text
    assert other.read_bytes() == before and not out.exists() and loads == [] and not Path("/dev/null-journal").exists()


def test_a_response_cache_on_a_device_is_refused():
    from rizz.adapters.models.cache import ResponseCache

    with pytest.raises(ValueError, match="/dev/null: not a regular file"):
        ResponseCache("/dev/null")


@pytest.mark.parametrize("layout", ["a run beside the user's report", "the user's folder named as a policy"])
def test_a_bench_refuses_a_folder_holding_a_users_files(tmp_path, stream, loads, layout):
    out = tmp_path / "mine"
    if layout == "a run beside the user's report":
        assert _cli("run", str(stream), "--out", str(out / "myrun"), "--model", "up", "--limit", "1")[0] == 0
    else:
        (out / "frozen").mkdir(parents=True)
        (out / "frozen" / "cat.jpg").write_bytes(b"photo")
    (out / "report.md").write_text("my notes")
    before = _files(out)
    code, text = _cli("bench", str(stream), "-P", "frozen", "--out", str(out), "--model", "up")
    assert code == 2 and "the folder holds other files (" in text and "report.md" in text and "and no results.json" in text, text
    assert _files(out) == before
    (out / "report.md").unlink()  # a folder of runs alone (a bench that stopped before its report) is taken
    if layout == "a run beside the user's report":
        assert _cli("bench", str(stream), "-P", "frozen", "--out", str(out), "--model", "up")[0] == 0


def test_a_bad_ray_address_is_refused_before_anything_is_written(tmp_path, stream, loads):
    out = tmp_path / "b"
    code, text = _cli("bench", str(stream), "-P", "frozen", "--out", str(out), "--ray=nowhere")
    assert code == 2 and text == "--ray 'nowhere': expected local, auto, HOST:PORT or ray://HOST:PORT", text
    assert not out.exists() and loads == []


# -- a RUN_DIR file that cannot be read --------------------------------------------------------

@pytest.mark.parametrize("log", ["\n", "garbage\n", "[1, 2]\n"])
@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_resume_of_a_run_whose_log_holds_a_corrupt_record_is_refused_in_one_line(tmp_path, stream, loads, log, command):
    out = tmp_path / "r"
    run_dir = out / "frozen" if command == "bench" else out
    start = ("bench", str(stream), "-P", "frozen") if command == "bench" else ("run", str(stream), "--policy", "frozen")
    assert _cli(*start, "--out", str(out), "--model", "up", "--limit", "1")[0] == 0
    (run_dir / "log.jsonl").write_text(log)
    before, loads[:] = _files(out), []
    code, text = _cli(*start, "--out", str(out), "--model", "up")
    why = "an array, not an object" if log.startswith("[") else "Expecting value at column 1"
    said = f"{run_dir / 'log.jsonl'}:1: corrupt log record ({why})"
    assert (code, text) == (2, said)  # at once: the model is not loaded first
    assert _files(out) == before and loads == []
    assert _cli("replay", str(run_dir)) == (2, said)  # the same words as rizz replay's


@pytest.mark.parametrize(("content", "why"), [
    ('{\n "model": "fake:up",\n "poli', "not valid JSON (Unterminated string starting at line 3 column 2; a truncated or edited file), "
                                          "not the run's settings"),
    ("", "empty, not the run's settings (a JSON object rizz writes when a run starts)"),
    ("[]\n", "holds an array, not the run's settings (a JSON object)"),
])
@pytest.mark.parametrize("command", ["run", "bench", "replay", "inspect", "diff"])
def test_a_run_json_that_cannot_be_read_is_named_in_one_line_and_nothing_changes(tmp_path, stream, loads, content, why, command):
    out = tmp_path / "r"
    run_dir = out / "frozen" if command == "bench" else out
    start = ("bench", str(stream), "-P", "frozen") if command == "bench" else ("run", str(stream), "--policy", "frozen")
    assert _cli(*start, "--out", str(out), "--model", "up", "--limit", "2")[0] == 0
    (run_dir / "run.json").write_text(content)
    before = _files(out)
    args = {"run": start, "bench": start, "replay": ("replay",), "inspect": ("inspect",), "diff": ("diff",)}[command]
    args += ("--out", str(out), "--model", "up") if command in ("run", "bench") else (str(out),)
    args += ("--to", "1") if command == "diff" else ()
    code, text = _cli(*args)
    assert (code, text) == (2, f"{run_dir / 'run.json'}: {why}")
    assert _files(out) == before


# -- two runs at once ------------------------------------------------------------------------

@pytest.mark.parametrize("pid_file", ["", None])
def test_a_folder_locked_before_its_pid_is_written_says_so_without_empty_parentheses(tmp_path, stream, loads, pid_file):
    from filelock import FileLock

    out = tmp_path / "r"
    assert _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "up", "--limit", "1")[0] == 0
    (out / ".lock.pid").unlink(missing_ok=True)
    if pid_file is not None:
        (out / ".lock.pid").write_text(pid_file)  # the other process has taken the lock, not yet written its pid
    before = _files(out)
    with FileLock(str(out / ".lock"), timeout=0):
        code, text = _cli("run", str(stream), "--out", str(out), "--policy", "frozen", "--model", "up")
    assert code == 2 and text.endswith(f"{out} is in use by another rizz process (pid not yet written); "
                                       "wait for it or use another --out"), text
    assert _files(out) == before


# -- a resume refused once the model is loaded -------------------------------------------------

@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_resume_refused_for_its_model_does_not_create_the_response_cache(tmp_path, stream, loads, monkeypatch, command):
    """The model's name is known only once it loads (an OpenAI-compatible server's spec): the
    refusal comes before the response cache is opened, so the folder is left as it was (it
    created responses.sqlite, which the first run, its --cache elsewhere, had not written)."""
    import socket

    from rizz.adapters.models import load_model

    out = tmp_path / "r"
    run_dir = out / "frozen" if command == "bench" else out
    start = ("bench", str(stream), "-P", "frozen") if command == "bench" else ("run", str(stream), "--policy", "frozen")
    assert _cli(*start, "--out", str(out), "--model", "up", "--limit", "2", "--cache", str(tmp_path / "shared.sqlite"))[0] == 0
    assert not any(p.name.startswith("responses.sqlite") for p in out.rglob("*"))  # the cache was elsewhere
    before = _files(out)
    monkeypatch.setattr("rizz.apps.cli.load_model", load_model)  # the real one: it opens the cache it is given
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens: the spec names its model, so loading it asks the server nothing
    spec = f"openai:http://127.0.0.1:{port}/v1#x"
    code, text = _cli(*start, "--out", str(out), "--model", spec)
    assert code == 2 and (f"{run_dir} was started with different settings; resume refused: --model: run has 'fake:up', "
                          f"this command has '{spec}'") in text, text
    assert _files(out) == before and not any(p.name.startswith("responses.sqlite") for p in out.rglob("*"))


def test_a_response_cache_file_is_made_at_its_first_request(tmp_path):
    from rizz.adapters.models.cache import ResponseCache

    path = tmp_path / "not" / "yet" / "c.sqlite"
    cache = ResponseCache(path)  # a --cache in a folder not made yet: neither is made before a request
    assert not (tmp_path / "not").exists() and len(cache) == 0 and not (tmp_path / "not").exists()
    assert cache.get("k") is None and path.is_file()
    cache.close()
