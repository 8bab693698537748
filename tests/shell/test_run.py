"""Runs, log, replay, resume, lock, diff, inspect and the Session API (fake model, real embedder)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rizz.adapters.embedder import Embedder
from rizz.core import Verdict
from rizz.engine.run import replay, run_stream
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy, policy_differences
from rizz.formats.streams import StreamError, read_stream
from rizz.lab.diff import diff_run, inspect_run
from rizz.store.runlog import RunDir, RunDirBusy, RunDirMismatch

ROOT = Path(__file__).resolve().parents[2]
TRACE_MINI = ROOT / "data" / "trace-mini" / "test.jsonl"


def _answer(messages) -> str:
    """Deterministic stand-in for a model: a letter/number chosen by the prompt's hash."""
    text = messages[-1].content
    if '"function"' in text or "function" in text.split("\n")[0].lower():
        return '{"function": "classify", "application": "stance"}'
    if text.rstrip().endswith("Answer:") or "Reply with" in text:
        h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
        return ["A", "B", "C", "1", "2"][h % 5]
    return "IF the text is about rates THEN answer B"


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


@pytest.fixture
def stream(tmp_path) -> Path:
    lines = [l for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l or '"task": "C-STANCE"' in l][:14]
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _run(stream, out, fake_model, embedder, policy="default", **kw):
    pol = load_policy(policy)
    return run_stream(stream, pol, policy, out, fake_model(_answer), embedder, log=lambda m: None, **kw)


def test_a_refused_resume_names_the_policy_and_says_what_to_do(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "r"
    _run(stream, out, fake_model, embedder, limit=2)
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, out, fake_model, embedder, policy="frozen")
    lines = str(info.value).splitlines()
    assert lines[0] == f"{out} was started with different settings; resume refused:"
    assert lines[1].startswith("  policy: run has 'default', this command has 'frozen' (differing fields: ")
    assert "name 'default' -> 'frozen'" in lines[1] and " more)" in lines[1]
    assert lines[2] == ("To resume, give the policy the run started with, unchanged; to run this policy,"
                        " use a new --out directory.")
    assert len(lines) == 3 and "sha256" not in str(info.value)  # the policy by its name and fields, not its digest
    # the same file, edited since the run started
    pfile = tmp_path / "mine.yaml"
    pfile.write_text("extends: default\nrouting: {snap_threshold: 0.5}\n")
    _run(stream, tmp_path / "m", fake_model, embedder, policy=str(pfile), limit=1)
    pfile.write_text("extends: default\nrouting: {snap_threshold: 0.6}\n")
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, tmp_path / "m", fake_model, embedder, policy=str(pfile))
    assert str(info.value).splitlines()[1] == (f"  policy: {str(pfile)!r} both times, but it changed since the run started"
                                               " (differing fields: routing.snap_threshold 0.5 -> 0.6)")


def test_cli_run_refused_resume_names_the_policy(tmp_path, stream, fake_model, monkeypatch):
    from stubs import HashEmbedder
    from typer.testing import CliRunner

    from rizz.apps import cli

    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: fake_model(_answer))
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    out = tmp_path / "run"
    args = ["run", str(stream), "--out", str(out), "--limit", "1", "--policy"]
    assert CliRunner().invoke(cli.app, args + ["default"]).exit_code == 0
    res = CliRunner().invoke(cli.app, args + ["frozen"])
    err = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == 2 and "Traceback" not in err
    assert "  policy: run has 'default', this command has 'frozen' (differing fields:" in err
    # the fake model's run recorded its name, so the default --model differs too: what to give for each
    assert "  --model: run has 'fake:scripted', this command has " in err
    assert ("To resume, give the model the run used ('fake:scripted') and the policy the run started with, unchanged; "
            "to run with this command's settings, use a new --out directory.") in err
    assert "loading the model" not in err  # refused from run.json alone, before any model is loaded
    loaded = []
    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: loaded.append(spec))
    res = CliRunner().invoke(cli.app, args[:-1] + ["--budget", "512", "--policy", "default"])
    assert res.exit_code == 2 and loaded == []
    assert "  --budget: run has none, this command has 512" in res.output + (res.stderr if res.stderr_bytes is not None else "")


def test_cli_run_refused_resume_says_which_option_to_give_back(tmp_path, stream, fake_model, monkeypatch):
    """A newcomer re-ran `rizz run ... --out runs/r1` without the `--budget 2048` it started with
    and was told only "Use a new --out directory.", not to add `--budget 2048` to resume."""
    from stubs import HashEmbedder
    from typer.testing import CliRunner

    from rizz.apps import cli

    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: fake_model(_answer))
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    monkeypatch.setattr("rizz.apps.cli._check_model", lambda model, user_model: None)  # the fake model's own spec: the same model each time
    out = tmp_path / "r1"
    args = ["run", str(stream), "--out", str(out), "--limit", "1", "--model", "fake:scripted"]
    assert CliRunner().invoke(cli.app, args + ["--budget", "2048"]).exit_code == 0
    for extra, lines in (([], ["  --budget: run has 2048, this command has none",
                               "To resume, give --budget 2048; to run with this command's settings, use a new --out directory."]),
                         (["--budget", "1024"], ["  --budget: run has 2048, this command has 1024",
                                                 "To resume, give --budget 2048; to run with this command's settings, use a new --out directory."])):
        res = CliRunner().invoke(cli.app, args + extra)
        err = res.output + (res.stderr if res.stderr_bytes is not None else "")
        assert res.exit_code == 2 and "Traceback" not in err, err
        assert "\n".join(lines) in err, err
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(tmp_path / "r2"), "--limit", "1", "--model", "fake:scripted"])
    assert res.exit_code == 0
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(tmp_path / "r2"), "--model", "fake:scripted", "--budget", "2048"])
    err = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == 2 and ("  --budget: run has none, this command has 2048\n"
                                   "To resume, leave out --budget; to run with this command's settings, use a new --out directory.") in err, err


def test_a_resume_refused_for_several_settings_says_how_to_resume_each(tmp_path, stream, fake_model, embedder):
    """rizz run --policy frozen --budget 1000 on a default run without --budget listed both
    changes but said only how to fix the policy."""
    out = tmp_path / "r"
    _run(stream, out, fake_model, embedder, limit=2)
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, out, fake_model, embedder, policy="frozen", budget=1000)
    lines = str(info.value).splitlines()
    assert lines[1] == "  --budget: run has none, this command has 1000"
    assert lines[2].startswith("  policy: run has 'default', this command has 'frozen' (differing fields: ")
    assert lines[3:] == ["To resume, leave out --budget and give the policy the run started with, unchanged; "
                         "to run with this command's settings, use a new --out directory."]
    assert [c.setting for c in info.value.changes] == ["budget_cap", "policy"] and info.value.changes[0][1:3] == (None, 1000)
    _run(stream, tmp_path / "b", fake_model, embedder, limit=2, budget=512)
    meta = json.loads((tmp_path / "b" / "run.json").read_text())
    (tmp_path / "b" / "run.json").write_text(json.dumps(dict(meta, model="other:model", rendering="raw")))
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, tmp_path / "b", fake_model, embedder, limit=2)
    assert str(info.value).splitlines()[-1] == ("To resume, give the model the run used ('other:model'), --rendering raw and --budget 512; "
                                                "to run with this command's settings, use a new --out directory.")


def test_a_resume_with_a_smaller_limit_is_refused_naming_both(tmp_path, stream, fake_model, embedder):
    """A resume keeps every finished step: under a smaller --limit its summary (and a bench's
    report) would count more steps than the command asked for, so it is refused, writing nothing."""
    out = tmp_path / "r"
    _run(stream, out, fake_model, embedder, limit=5)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"}
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, out, fake_model, embedder, limit=3)
    assert str(info.value) == (f"{out} already holds 5 finished steps, more than this command's --limit 3 (a resume keeps every "
                               "finished step, so its summary and report would count 5); to resume it give --limit 5 or more, "
                               "or no --limit; to run 3, use a new --out directory")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"} == before
    assert _run(stream, out, fake_model, embedder, limit=5)["steps"] == 5  # the same limit, or a larger one, resumes
    assert _run(stream, out, fake_model, embedder, limit=7)["steps"] == 7


def test_cli_run_and_bench_refuse_a_smaller_limit_before_loading_the_model(tmp_path, stream, fake_model, monkeypatch):
    from stubs import HashEmbedder
    from typer.testing import CliRunner

    from rizz.apps import cli

    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: fake_model(_answer))
    monkeypatch.setattr("rizz.apps.cli.backend_name", lambda spec: "fake:scripted")  # the name the spec's model carries
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    run_dir, bench_dir = tmp_path / "run", tmp_path / "bench"
    assert CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(run_dir), "--limit", "4"]).exit_code == 0
    res = CliRunner().invoke(cli.app, ["bench", str(stream), "-P", "frozen,default", "--out", str(bench_dir), "--limit", "4"])
    assert res.exit_code == 0, res.output
    loaded = []
    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: loaded.append(spec))
    for args, folder in ((["run", str(stream), "--out", str(run_dir)], run_dir),
                         (["bench", str(stream), "-P", "frozen,default", "--out", str(bench_dir)], bench_dir / "frozen")):
        res = CliRunner().invoke(cli.app, [*args, "--limit", "2"])
        err = " ".join((res.output + (res.stderr if res.stderr_bytes is not None else "")).split())
        assert res.exit_code == 2 and "Traceback" not in err, err
        assert f"{folder} already holds 4 finished steps, more than this command's --limit 2" in err, err
        assert "to resume it give --limit 4 or more, or no --limit" in err
    assert loaded == []


def test_cli_run_and_bench_refuse_another_local_model_before_loading_it(tmp_path, stream, fake_model, monkeypatch):
    from stubs import HashEmbedder
    from typer.testing import CliRunner

    from rizz.adapters.models.shipped import shipped_model
    from rizz.apps import cli

    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: fake_model(_answer))
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    run_dir, bench_dir = tmp_path / "run", tmp_path / "bench"
    assert CliRunner().invoke(cli.app, ["run", str(stream), "--out", str(run_dir), "--limit", "4"]).exit_code == 0
    assert CliRunner().invoke(cli.app, ["bench", str(stream), "-P", "frozen", "--out", str(bench_dir), "--limit", "4"]).exit_code == 0
    recorded = json.loads((run_dir / "run.json").read_text())["model"]
    loaded = []
    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: loaded.append(spec))
    other = shipped_model("smollm2-135m-instruct").backend_name
    for args, folder in ((["run", str(stream), "--out", str(run_dir)], run_dir),
                         (["bench", str(stream), "-P", "frozen", "--out", str(bench_dir)], bench_dir / "frozen")):
        res = CliRunner().invoke(cli.app, [*args, "--limit", "8", "--model", "embedded:smollm2-135m-instruct"])
        err = " ".join((res.output + (res.stderr if res.stderr_bytes is not None else "")).split())
        assert res.exit_code == 2 and "Traceback" not in err and "loading the model" not in err, err
        assert f"{folder} was started with different settings; resume refused:" in err
        assert f"--model: run has '{recorded}', this command has '{other}'" in err, err
    assert loaded == []


def _fake_embedded_model(fake_model, monkeypatch):
    """``rizz.apps.cli`` loads a fake that carries the default model's name (as a run of
    ``--model embedded`` records) and the hash embedder; returns the fake's loader."""
    from stubs import HashEmbedder

    from rizz.adapters.models.spec import backend_name

    def embedded(spec, **kw):
        model = fake_model(_answer)
        model.name = backend_name("embedded")
        model.default_rendering = "chat"
        return model

    monkeypatch.setattr("rizz.apps.cli.load_model", embedded)
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    return embedded


def test_cli_run_prints_the_same_summary_for_a_first_run_and_an_already_finished_one(tmp_path, stream, fake_model, monkeypatch):
    """The printed summary's branches read {"total", "active"} after a first `rizz run` but
    {"active", "total"} on the re-run that found the run already finished (summary.json's keys
    are sorted)."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    _fake_embedded_model(fake_model, monkeypatch)
    args = ["run", str(stream), "--out", str(tmp_path / "run"), "--limit", "3"]
    first = CliRunner().invoke(cli.app, args)
    assert first.exit_code == 0 and list(json.loads(first.stdout)["branches"]) == ["total", "active"]
    again = CliRunner().invoke(cli.app, args)  # found finished before the model loads (cli.finished_run)
    assert again.exit_code == 0 and "already finished" in again.stderr and again.stdout == first.stdout
    monkeypatch.setattr("rizz.apps.cli._check_model", lambda model, user_model: None)
    loaded = CliRunner().invoke(cli.app, [*args, "--model", "some:spec"])  # known only once the model loads (run_stream)
    assert loaded.exit_code == 0 and "already finished" in loaded.stderr and loaded.stdout == first.stdout, loaded.stderr


def test_cli_run_and_bench_of_a_finished_folder_say_nothing_to_run_before_loading_the_model(tmp_path, stream, fake_model, monkeypatch):
    """A newcomer's second `rizz run` of a finished RUN_DIR loaded the model (up to a minute)
    only to say there was nothing to run; `rizz bench` the same for each policy."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    embedded = _fake_embedded_model(fake_model, monkeypatch)
    run_dir, bench_dir = tmp_path / "run", tmp_path / "bench"
    run_args, bench_args = ["run", str(stream), "--out", str(run_dir)], ["bench", str(stream), "-P", "frozen,default", "--out", str(bench_dir)]
    assert CliRunner().invoke(cli.app, [*run_args, "--limit", "4"]).exit_code == 0
    assert CliRunner().invoke(cli.app, [*bench_args, "--limit", "4"]).exit_code == 0
    (bench_dir / "report.md").unlink()
    loaded = []
    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: loaded.append(spec) or embedded(spec))

    def cli_run(*args):
        res = CliRunner().invoke(cli.app, list(args))
        return res.exit_code, res.stdout, " ".join(res.stderr.split())

    code, out, err = cli_run(*run_args, "--limit", "4")
    digest = json.loads((run_dir / "summary.json").read_text())["state_digest"]
    assert code == 0 and err == f"{run_dir}: already finished (4 steps); nothing to run", err
    assert json.loads(out)["state_digest"] == digest and json.loads(out)["steps"] == 4
    code, out, err = cli_run(*bench_args, "--limit", "4")
    assert code == 0 and err == f"{bench_dir / 'frozen'}: already finished (4 steps); nothing to run {bench_dir / 'default'}: already finished (4 steps); nothing to run", err
    assert "frozen" in out and "default" in out and f"report: {bench_dir / 'report.md'}" in out and (bench_dir / "report.md").exists()
    assert loaded == []
    # anything to run, or a setting known only once the model loads: the model loads, and the run says the rest
    code, out, err = cli_run(*run_args, "--limit", "4", "--rendering", "raw")
    assert code == 2 and "--rendering: run has 'chat', this command has 'raw'" in err and loaded == ["embedded"], err
    code, out, err = cli_run(*run_args, "--limit", "5")
    assert code == 0 and json.loads(out)["steps"] == 5 and loaded == ["embedded"] * 2, err
    code, out, err = cli_run(*bench_args, "--limit", "5")
    assert code == 0 and "loading the model embedded" in err and loaded == ["embedded"] * 3, err


def test_run_writes_log_summary_and_replays_to_the_same_digest(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "run"
    s = _run(stream, out, fake_model, embedder, snapshot_every=5)
    assert s["steps"] == 14 and s["answered"] == 14
    assert set(s["per_task"]) == {"FOMC", "C-STANCE"} and sum(v["n"] for v in s["per_task"].values()) == 14
    assert json.loads((out / "summary.json").read_text()) == s
    recs = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(14))
    assert all(r["prompt"]["tokens"] <= r["prompt"]["budget"] for r in recs)
    assert sorted(p.name for p in (out / "snapshots").iterdir()) == [
        "00000005.inflight.json", "00000005.json", "00000010.inflight.json", "00000010.json"]
    assert replay(out, write_summary=False)["state_digest"] == s["state_digest"]
    other = replay(out, load_policy("single-branch"), "single-branch")
    assert other["state_digest"] != s["state_digest"] and (out / "summary.replay.json").exists()
    assert other["branches"]["total"] == 1
    # specs/stream-format.md names exactly the fields summary.json has
    doc = (ROOT / "specs/stream-format.md").read_text().split("## RUN_DIR/summary.json")[1].split("## ")[0]
    stable = set(json.loads(doc.split("```json")[1].split("```")[0].replace("…", "")))
    extra = set(re.findall(r"`([a-z_]+)`", doc.split("rizz adds")[1])) - {"judge", "answer", "distill", "user"}
    assert stable | extra == set(s) | {"episodes"} and not stable & extra  # episodes: only runs with episode elements


def test_extending_a_run_removes_its_stale_counterfactual_summary(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "run"
    _run(stream, out, fake_model, embedder, limit=3)
    assert replay(out, load_policy("single-branch"), "single-branch")["steps"] == 3
    _run(stream, out, fake_model, embedder, limit=3)  # nothing new: the refold still describes the run
    assert (out / "summary.replay.json").exists()
    said: list[str] = []
    pol = load_policy("default")
    s = run_stream(stream, pol, "default", out, fake_model(_answer), embedder, limit=5, log=said.append)
    assert s["steps"] == 5 and not (out / "summary.replay.json").exists()
    assert any("summary.replay.json: removed" in m for m in said), said
    assert replay(out, load_policy("single-branch"), "single-branch")["steps"] == 5  # rebuilt on demand


def test_resume_equals_uninterrupted(tmp_path, stream, fake_model, embedder):
    full = _run(stream, tmp_path / "full", fake_model, embedder)
    out = tmp_path / "cut"
    _run(stream, out, fake_model, embedder, limit=6, snapshot_every=4)
    with open(out / "log.jsonl", "ab") as f:  # a kill mid-append leaves a partial line
        f.write(b'{"step": 6, "id": "half')
    resumed = _run(stream, out, fake_model, embedder, snapshot_every=4)
    assert resumed["state_digest"] == full["state_digest"] and resumed["steps"] == 14
    assert resumed["mean_reward"] == full["mean_reward"]
    said: list[str] = []
    pol = load_policy("default")
    again = run_stream(stream, pol, "default", out, fake_model(_answer), embedder, log=said.append)
    assert again == resumed and said == [f"{out}: already finished (14 steps); nothing to run"]


def test_resume_refuses_other_settings(tmp_path, stream, fake_model, embedder):
    _run(stream, tmp_path / "r", fake_model, embedder, limit=2)
    before = sorted(p.name for p in (tmp_path / "r").iterdir())
    with pytest.raises(RunDirMismatch, match="policy: run has 'default', this command has 'frozen'"):
        _run(stream, tmp_path / "r", fake_model, embedder, policy="frozen")
    # a refused resume writes nothing, not even the bad-line report of a --skip-bad stream
    bad = tmp_path / "bad.jsonl"
    bad.write_text(stream.read_text() + "{not json\n")
    with pytest.raises(RunDirMismatch, match=re.escape(f"  stream: run has {str(stream)!r}, this command has {str(bad)!r}")):
        _run(bad, tmp_path / "r", fake_model, embedder, skip_bad=True)
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == before and "bad_lines.json" not in before


def test_a_refused_resume_names_settings_as_the_command_line_does(tmp_path, stream, fake_model, embedder):
    """Each setting by the option that sets it, null as none, the stream by its path (and, when
    only its content changed, the start of both sha256s); no run.json key names."""
    out = tmp_path / "r"
    _run(stream, out, fake_model, embedder, limit=2, budget=512)
    recorded = json.loads((out / "run.json").read_text())["stream_sha256"]
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, out, fake_model, embedder, limit=2)
    assert str(info.value).splitlines()[1:] == ["  --budget: run has 512, this command has none",
                                                "To resume, give --budget 512; to run with this command's settings, use a new --out directory."]
    stream.write_text(stream.read_text().replace("FOMC", "FOMC2", 1))  # the same file, edited since
    now = hashlib.sha256(stream.read_bytes()).hexdigest()
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, out, fake_model, embedder, limit=2, budget=512)
    assert str(info.value).splitlines()[1] == (f"  stream: {str(stream)!r} both times, but its content changed since the run started "
                                               f"(sha256 {recorded[:12]}… -> {now[:12]}…)")
    meta = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps(dict(meta, model="other:model")))
    with pytest.raises(RunDirMismatch) as info:
        _run(stream, out, fake_model, embedder, limit=2, budget=None)
    text = str(info.value)
    assert "  --model: run has 'other:model', this command has 'fake:scripted'" in text and "  --budget: run has 512, this command has none" in text
    assert not re.search(r"budget_cap|stream_sha256|policy_digest|None", text), text


def test_missing_policy_and_bench_folder_errors_name_what_to_use(tmp_path):
    from rizz.formats.policy_file import PolicyError
    from rizz.store.runlog import RunDir

    with pytest.raises(PolicyError, match=r"cannot read: .*did you mean `default`\? \(shipped names: ace-style, content-words, corrections, cross-zone, default, evidence, evidence-explore, examples-floor, frozen, .*learned-routing, no-anti-fragmentation, no-procedural, no-votes"):
        load_policy(tmp_path / "defualt")
    (tmp_path / "child.yaml").write_text("extends: defualt\n")
    with pytest.raises(PolicyError, match=r"\$\.extends: 'defualt' not found; did you mean `default`\?"):
        load_policy(tmp_path / "child.yaml")
    (tmp_path / "bench" / "frozen").mkdir(parents=True)
    (tmp_path / "bench" / "frozen" / "run.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"a bench folder\? its runs: .*bench/frozen"):
        RunDir(tmp_path / "bench").meta()


def test_second_process_is_refused(tmp_path):
    out = tmp_path / "locked"
    code = f"from rizz.store.runlog import RunDir, RunDirBusy\ntry:\n    RunDir({str(out)!r}).__enter__()\nexcept RunDirBusy as e:\n    print('BUSY', e)\n"
    with RunDir(out):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert res.stdout.startswith("BUSY") and "in use by another rizz process" in res.stdout
        with pytest.raises(RunDirBusy, match=r"already open in this process \(a Session or a run holds it\)"):
            RunDir(out).__enter__()  # not "another rizz process (pid <our own pid>)"
    with RunDir(out):  # released
        pass


def test_bad_line_names_file_line_field_and_writes_nothing(tmp_path, stream, fake_model, embedder):
    lines = stream.read_text().splitlines()
    lines[3] = lines[3].replace('"shape": "letter"', '"shape": "letters"')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(StreamError, match=r"bad\.jsonl:4: field 'metadata\.shape'"):
        _run(bad, tmp_path / "b", fake_model, embedder)
    assert not (tmp_path / "b" / "log.jsonl").exists()
    s = _run(bad, tmp_path / "b2", fake_model, embedder, skip_bad=True)
    assert s["steps"] == 13
    assert json.loads((tmp_path / "b2" / "bad_lines.json").read_text())[0]["line"] == 4


def test_diff_and_inspect(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "d"
    _run(stream, out, fake_model, embedder)
    text = diff_run(out, 0)
    assert text.startswith("step 0 [") and "+ branch b0 spawned: classify/monetary-policy-stance" in text and "→ routed to b0" in text
    many = diff_run(out, 0, 13)
    assert many.count("\nstep ") == 13 and "after step 13:" in many
    with pytest.raises(ValueError, match="not in the log"):
        diff_run(out, 99)
    with pytest.raises(ValueError, match="numbered from 0"):
        diff_run(out, -1, 2)
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, ["diff", str(out), "--at", "-1"])
    assert res.exit_code == 2 and res.output == f"--at -1: steps are numbered from 0 (the log of {out} has steps 0..13)\n", res.output
    rows = inspect_run(out)
    assert sum(r["traffic"] for r in rows) == 14 and rows[0]["label"] == "classify/monetary-policy-stance"


def test_diff_gives_each_steps_place_and_where_its_budget_comes_from(tmp_path, stream, fake_model, embedder):
    """Issue #29 §8: steps are 0-based while progress counts steps done from 1, and "prompt: 72 of
    8120 tokens" named a budget nothing explained."""
    from rizz.lab.diff import budget_source

    _run(stream, tmp_path / "cap", fake_model, embedder, limit=3, budget=512)
    text = diff_run(tmp_path / "cap", 0, 2)
    heads = [l for l in text.splitlines() if l.startswith("step ")]
    assert [h.split(" task ")[0].split("] ")[1] for h in heads] == ["(1st element)", "(2nd element)", "(3rd element)"], heads
    prompts = [l for l in text.splitlines() if l.startswith("  prompt: ")]
    assert len(prompts) == 3 and all(re.match(r"  prompt: \d+ tokens \(budget 512: --budget\), \d+ rules?, \d+ examples?(; \d+ as sent to the model \(its chat template included\))?$", l)
                                     for l in prompts), prompts
    # a newcomer saw 568 tokens here and 604 in the log's call record: where the backend counted
    # otherwise than the compiler, the line gives the answer call's count too
    recs = [json.loads(l) for l in (tmp_path / "cap" / "log.jsonl").read_text().splitlines() if '"kind": "step"' in l][:3]
    for line, rec in zip(prompts, recs, strict=True):
        sent = next(c["prompt_tokens"] for c in rec["calls"] if c["kind"] == "answer")
        assert line.startswith(f"  prompt: {rec['prompt']['tokens']} tokens ")
        assert (f"; {sent} as sent to the model" in line) == (sent != rec["prompt"]["tokens"]), (line, sent)
    assert any("as sent to the model" in line for line in prompts), prompts  # the fake backend counts words, the compiler tokens
    _run(stream, tmp_path / "window", fake_model, embedder, limit=1)  # the fake model's 4096-token window is below default's 65536
    (line,) = [l for l in diff_run(tmp_path / "window", 0).splitlines() if l.startswith("  prompt: ")]
    assert "(budget " in line and line.split("(budget ")[1].split(")")[0].endswith(": the model's window less the reply's tokens"), line
    assert budget_source(65536, 65536, None) == "the policy's compiler.token_budget"


def test_session_api_answers_then_folds_a_late_verdict(fake_model, embedder):
    el = read_stream(TRACE_MINI).elements[0]
    s = Session(load_policy("default"), fake_model(_answer), embedder)
    p = s.answer(el)
    assert p.answer in {"A", "B", "C", "1", "2"} and p.prompt.token_count > 0 and p.prompt.dropped == ()
    # the route round folds at answer time (the branch it spawned); memory waits for the verdict
    assert list(s.state.branches) == ["b0"] and len(s.state.branches["b0"].episodes) == 0 and s.state.steps == 0
    assert [c.kind for c in p.calls] == ["answer"] and s.pending_ids() == [el.id]  # default labels a new route without the model
    inp, events, calls = s.fold(p, Verdict(1.0, "exact_match"))
    assert [type(e).__name__ for e in events][:2] == ["Routed", "EpisodeWritten"]
    assert len(s.state.branches["b0"].episodes) == 1 and s.step_index == 1 and s.state.steps == 1
    assert calls == () and s.pending_ids() == []  # no distillation due after one success


def test_policy_check_cli(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routing:\n  snap_threshold: 1.7\n")
    ok = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "policy", "check", str(ROOT / "policies/default.yaml")], capture_output=True, text=True)
    assert ok.returncode == 0 and "ok (default)" in ok.stdout
    res = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "policy", "check", str(bad)], capture_output=True, text=True)
    assert res.returncode == 1 and "$.routing.snap_threshold: expected a number in [0, 1], got 1.7" in res.stderr
    # a file with no extends: is valid, and told its unset fields are not default's
    loose = tmp_path / "loose.yaml"
    loose.write_text("routing:\n  snap_threshold: 0.85\n")
    res = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "policy", "check", str(loose)], capture_output=True, text=True)
    n = len([d for d in policy_differences(load_policy("default"), load_policy(str(loose))) if d[0] != "name"])
    assert res.returncode == 0 and n > 5 and res.stdout.strip() == (
        f"{loose}: ok (loose); note: no extends:, so its unset fields are rizz.core.Policy's values, not policies/default.yaml's"
        f" ({n} fields differ from default: rizz policy diff default {loose}; add extends: default to start from it)"), res.stdout
    assert "note" not in ok.stdout
    typo = tmp_path / "typo.yaml"
    typo.write_text("extends: default\nrouting: {snap_treshold: 0.5}\n")
    res = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "policy", "check", str(typo)], capture_output=True, text=True)
    assert res.returncode == 1
    assert f"{typo}:2: $.routing.snap_treshold: unknown key; did you mean `snap_threshold`? (allowed: " in res.stderr


def test_policy_check_lists_mistakes_in_line_order_as_written(tmp_path):
    """Issue #29 §11: several mistakes came out of line order (sorted by path), and `write: yes`
    was reported as "got True"."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: default\nwrite: yes\nrouting:\n  snap_threshold: 1.7\n  judge: off\ncompiler:\n  token_budget: -5\n"
                   "quarantine: ~\n")
    res = CliRunner().invoke(app, ["policy", "check", str(bad)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and lines[0].endswith("bad.yaml: invalid policy"), res.output
    assert [l.split(": $", 1)[0].rsplit(":", 1)[1] for l in lines[1:]] == ["2", "4", "5", "7", "8"], lines
    assert lines[1].endswith(":2: $.write: expected a mapping, got yes (YAML reads it as true)")
    assert lines[3].endswith(":5: $.routing.judge: expected one of always, when_uncertain, local, got off (YAML reads it as false)")
    assert lines[5].endswith(":8: $.quarantine: expected a mapping, got ~ (YAML reads it as null)")
    ok = tmp_path / "ok.yaml"
    ok.write_text("extends: default\nwrite:\n  enabled: true\n  threshold: 2\n")
    (line,) = CliRunner().invoke(app, ["policy", "check", str(ok)]).output.strip().splitlines()[1:]
    assert line.endswith(":4: $.write.threshold: unknown key; did you mean `thresholds`? (allowed: " + line.split("(allowed: ")[1]), line


def test_shared_cache_pays_each_prompt_once(tmp_path, stream, fake_model, embedder):
    from rizz.adapters.models import CachedModel, ResponseCache

    fake = fake_model(_answer)
    cache = ResponseCache(tmp_path / "c.sqlite")
    model = CachedModel(fake, cache)
    a = run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "a", model, embedder, log=lambda m: None)
    paid = len(fake.calls)
    assert paid == a["model_calls"] == 14  # frozen: one answer call per step, no judge
    b = run_stream(stream, load_policy("frozen"), "frozen", tmp_path / "b", model, embedder, log=lambda m: None)
    assert len(fake.calls) == paid and b["model_calls_uncached"] == 0 and b["state_digest"] == a["state_digest"]
    d = run_stream(stream, load_policy("default"), "default", tmp_path / "d", model, embedder, log=lambda m: None)
    new = len(fake.calls) - paid
    # step 0 has no memory yet: its prompt equals the frozen one and is served from the cache
    assert 0 < new < d["model_calls"] and d["model_calls"] - d["model_calls_uncached"] >= 1


def test_embedder_mismatch_refuses_resume(tmp_path, stream, fake_model, embedder):
    _run(stream, tmp_path / "e", fake_model, embedder, limit=2)

    class Other:
        name, dim = "other-embedder", 384

        def embed(self, texts):  # pragma: no cover - never reached
            raise AssertionError

    with pytest.raises(RunDirMismatch, match="embedder"):
        run_stream(stream, load_policy("default"), "default", tmp_path / "e", fake_model(_answer), Other(), log=lambda m: None)


def test_refused_stream_writes_nothing_and_names_the_column(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x1", "input": "hi", \n')
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "run", str(bad), "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 2 and "bad.jsonl:1: invalid JSON at column 29" in res.stderr
    assert not out.exists()
    noref = tmp_path / "noref.jsonl"
    noref.write_text('{"id": "x1", "input": "hi", "verifier": "exact_match"}\n')
    with pytest.raises(StreamError, match=r"noref\.jsonl:1: field 'reference': required when 'verifier' is 'exact_match'"):
        read_stream(noref)


def test_bench_refuses_a_bad_policy_name_before_writing(tmp_path, stream):
    out = tmp_path / "b"
    res = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "bench", str(stream), "-P", "frozen,defualt", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "defualt" in res.stderr and "shipped names:" in res.stderr
    assert not out.exists()


def _cli(*args: str):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, list(args))
    return res.exit_code, " ".join(res.output.replace("│", " ").split())


def test_run_refuses_a_bench_folder_and_bench_a_run_dir_though_both_hold_a_response_cache(tmp_path, stream):
    """A newcomer's `rizz run --out <bench folder>` ran and overwrote the bench's view: the
    shared responses.sqlite made any such folder look like one of ours."""
    bench, run = tmp_path / "bench", tmp_path / "run"
    (bench / "frozen").mkdir(parents=True)
    (bench / "frozen" / "run.json").write_text("{}")
    (bench / "responses.sqlite").write_bytes(b"")
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "responses.sqlite").write_bytes(b"")
    code, text = _cli("run", str(stream), "--out", str(bench))
    assert code == 2 and text == f"--out {bench}: a rizz bench folder (its runs: frozen), not a RUN_DIR; give a new folder for the RUN_DIR", text
    code, text = _cli("bench", str(stream), "-P", "frozen", "--out", str(run))
    assert code == 2 and text == f"--out {run}: a RUN_DIR (it holds run.json), not a bench folder; give a new folder for the BENCH_DIR", text
    assert sorted(p.name for p in bench.iterdir()) == ["frozen", "responses.sqlite"]  # nothing written
    assert sorted(p.name for p in run.iterdir()) == ["responses.sqlite", "run.json"]


def test_bench_refuses_two_policies_of_one_name_before_loading_the_model(tmp_path, stream, monkeypatch):
    loaded = []
    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: loaded.append(spec))
    copy = tmp_path / "mine.yaml"
    copy.write_text((ROOT / "policies" / "default.yaml").read_text())  # a copy keeps name: default
    code, text = _cli("bench", str(stream), "-P", f"frozen,default,{copy}", "--out", str(tmp_path / "b"))
    assert code == 2 and text == (f"policy names must differ (they name the run folders): default (name: default), {copy} (name: default); "
                                  "a copied policy file keeps the name: of the file it was copied from: give it its own"), text
    assert loaded == [] and not (tmp_path / "b").exists()


@pytest.mark.parametrize("extra, message", [
    (["--limit", "0"], "Invalid value for '--limit' / '-n': Input should be greater than or equal to 1"),
    (["--limit", "-1"], "Invalid value for '--limit' / '-n': Input should be greater than or equal to 1"),
    (["--budget", "0"], "Invalid value for '--budget': Input should be greater than or equal to 16"),
    (["--snapshot-every", "0"], "Invalid value for '--snapshot-every': Input should be greater than or equal to 1"),
    (["--rendering", "foo"], "--rendering 'foo': expected one of raw, chat, chat-turns"),
])
def test_run_refuses_bad_options_before_writing(tmp_path, stream, extra, message):
    out = tmp_path / "out"
    code, text = _cli("run", str(stream), "--out", str(out), "--policy", "frozen", *extra)
    assert code == 2 and message in text, text
    assert not out.exists()


def test_run_and_bench_refuse_an_out_that_is_not_theirs(tmp_path, stream):
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, text = _cli("run", str(stream), "--out", str(afile))
    assert code == 2 and "is a file; RUN_DIR must be a folder" in text
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    for cmd in ("run", "bench"):
        code, text = _cli(cmd, str(stream), "--out", str(notes), "-P" if cmd == "bench" else "--policy", "frozen")
        assert code == 2 and "the folder holds other files (notes.txt)" in text, text
    assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]


def test_model_help_shows_the_optional_model_name():
    code, text = _cli("run", "--help")
    assert code == 0 and "openai:BASE_URL[#MODEL]" in text


def test_model_help_is_not_cut_at_80_columns(monkeypatch):
    from rizz.adapters.models.anthropic_backend import DEFAULT_MODEL_ID

    monkeypatch.setenv("COLUMNS", "80")
    for cmd in ("run", "bench"):
        code, text = _cli(cmd, "--help")
        assert code == 0 and DEFAULT_MODEL_ID in text and "?reasoning=1024" in text, text
        model_part = text[text.index("--model"):text.index("--model") + 1500]
        assert "…" not in model_part, model_part


def _command_paths(group, prefix=()):
    """Every command path under a click group, sub-groups included (``("streams", "build")``)."""
    for name, cmd in sorted(group.commands.items()):
        yield (*prefix, name)
        if hasattr(cmd, "commands"):
            yield from _command_paths(cmd, (*prefix, name))


#: rizz's own flags (bool options that take no value), by the command that has them
FLAGS = {("run",): ["--skip-bad"], ("inspect",): ["--json", "--episodes", "--full", "--wide"], ("convert",): ["--keep-files"],
         ("streams", "build"): ["--keep-duplicates"], ("streams", "check"): ["--first"]}


def test_help_shows_no_value_type_beside_a_flag(monkeypatch):
    """A flag takes no value: typer's rich help prints ``<bool>`` beside one unless it is declared
    with ``metavar=""`` (rizz's flags, FLAGS) or, for typer's own ``--help``, given one by
    rizz/apps/cli_help.py's command classes. Every command and group, ``rizz`` itself included.

    Nor any other type placeholder typer makes up (``<str>``, ``<path>``, ``<int range>``,
    ``<list[str]>``) or an argument in braces by its parameter's name (``{file}``): every value
    has a readable metavar (``SPEC``, ``RUN_DIR``, ``N``), an argument its name in capitals."""
    import typer

    from rizz.apps.cli import app

    monkeypatch.setenv("COLUMNS", "200")
    found, placeholders, usage = {}, {}, {}
    for path in [(), *_command_paths(typer.main.get_command(app))]:
        code, text = _cli(*path, "--help")
        assert code == 0 and "--help -h Show this message and exit." in text, (path, text)
        assert _cli(*path, "-h") == (code, text), path  # -h wherever --help works
        found[path] = re.findall(r"(--[\w-]+) <bool>", text)
        placeholders[path] = re.findall(r"<\w[\w\[\],. ]*>|\{\w+\}", text)
        usage[path] = text.split("Usage: ", 1)[1].split(" ")[1: len(path) + 3]  # after the program's name
        for flag in FLAGS.get(path, []):
            assert f"{flag} " in text, (path, flag, text)
    assert {p: f for p, f in found.items() if f} == {}
    assert {p: f for p, f in placeholders.items() if f} == {}
    assert set(FLAGS) | {("policy",), ("streams",), ("policy", "show"), ("policy", "list")} <= set(found)
    assert usage[("run",)] == ["run", "[OPTIONS]", "STREAM"] and usage[("policy", "check")] == ["policy", "check", "[OPTIONS]", "POLICY..."]
    assert usage[("view",)] == ["view", "[OPTIONS]", "RUN_DIR"] and usage[("policy", "show")] == ["policy", "show", "[OPTIONS]", "POLICY"]
    code, text = _cli("run", "--help")
    assert "* STREAM Stream file" in text and "--model -m SPEC " in text and "--limit -n N [x>=1] " in text, text
    assert "--budget TOKENS [x>=16] " in text and "--out -o RUN_DIR " in text


def test_version_names_the_installed_distribution_or_the_source_tree(monkeypatch):
    import tomllib
    from importlib import metadata

    from rizz.apps.cli import version_text

    code, text = _cli("--version")
    assert code == 0 and text == f"rizz {metadata.version('rizz')}" == version_text(), text
    assert _cli("--version", "run") == (code, text)  # eager: before any command is parsed

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version_text() == f"rizz {declared} (not installed: the source tree at {ROOT})"


def test_an_option_declared_without_a_metavar_gets_a_readable_one():
    """rizz/apps/cli_help.py's fallback for an option that declares none: from its type."""
    from pathlib import Path

    import typer
    from typer.testing import CliRunner

    from rizz.apps.cli_help import Command

    app = typer.Typer(add_completion=False)

    @app.command(cls=Command)
    def cmd(name: str = typer.Argument(...), where: Path = typer.Option(Path("."), "--where"), n: int = typer.Option(1, "--n", min=0),
            x: float = typer.Option(0.5, "--x"), s: str = typer.Option("a", "--s"), names: list[str] | None = typer.Argument(None)) -> None:
        pass

    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.replace("│", " ").split())
    assert res.exit_code == 0 and "Usage: cmd [OPTIONS] NAME [NAMES...]" in text, text
    assert "--where PATH" in text and "--n N [x>=0]" in text and "--x NUMBER" in text and "--s TEXT" in text, text
    assert not re.search(r"<\w[\w\[\],. ]*>|\{\w+\}", text), text


def test_counts_of_one_are_singular(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "one"
    _run(stream, out, fake_model, embedder, limit=1)
    assert diff_run(out, 0).endswith("\nafter step 0: 1 branch (1 active)")
    with pytest.raises(ValueError, match=r"step 1 is not in the log of .* \(it has step 0 only\)$"):
        diff_run(out, 1)
    said: list[str] = []
    run_stream(stream, load_policy("default"), "default", out, fake_model(_answer), embedder, limit=1, log=said.append)
    assert said == [f"{out}: already finished (1 step); nothing to run"]


def test_diff_refuses_steps_past_the_end_and_an_empty_log(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "d"
    _run(stream, out, fake_model, embedder, limit=3)
    with pytest.raises(ValueError, match=r"--to 99: step 99 is not in the log of .* \(it has steps 0\.\.2\)"):
        diff_run(out, 1, 99)
    assert diff_run(out) == diff_run(out, 2)  # no --at: the last step
    code, text = _cli("diff", str(out))
    assert code == 0 and text.startswith("step 2 ["), text
    (out / "log.jsonl").write_text("")
    with pytest.raises(ValueError, match="has no steps yet"):
        diff_run(out, 0)
    with pytest.raises(ValueError, match="has no steps yet"):
        diff_run(out)


def test_replay_under_another_policy_names_whose_answers_it_refolds(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "r"
    s = _run(stream, out, fake_model, embedder, limit=4)
    other = replay(out, load_policy("frozen"), "frozen")
    assert other["answers_from"] == "default" and other["mean_reward"] == s["mean_reward"]
    assert "answers_from" not in replay(out, write_summary=False)


def test_oracle_refuses_a_stream_that_is_not_episodes(tmp_path, stream):
    """--model oracle answered "" (reward 0) to every plain element; it is refused up front."""
    for cmd, flag in (("run", "--policy"), ("bench", "-P")):
        out = tmp_path / cmd
        code, text = _cli(cmd, str(stream), "--out", str(out), flag, "frozen", "--model", "oracle", "--limit", "2")
        assert code == 2 and "--model oracle replays each episode's gold actions" in text, text
        assert "2 elements of" in text and "are not an episode" in text and not out.exists()


def test_a_directory_as_the_stream_is_one_line_not_a_traceback(tmp_path):
    code, text = _cli("run", str(tmp_path), "--out", str(tmp_path / "r"))
    assert code == 2 and text.endswith(f"{tmp_path}: is a directory; expected a stream file (JSONL, one element a line)"), text
    assert not (tmp_path / "r").exists()


def test_replay_of_a_run_dir_another_process_holds_is_one_line(tmp_path, stream, fake_model, embedder):
    """A replay that only reads (it finds the recorded digest) needs no lock; one that writes a
    summary waits for the process holding it, in one line."""
    out = tmp_path / "held"
    s = _run(stream, out, fake_model, embedder, limit=1)
    code = f"from rizz.store.runlog import RunDir\nimport sys, time\nheld = RunDir({str(out)!r}).__enter__()\nprint('held', flush=True)\ntime.sleep(60)\n"
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc, text = _cli("replay", str(out))
        assert rc == 0 and text.startswith(s["state_digest"] + " = the digest the run recorded"), text
        rc, text = _cli("replay", str(out), "--policy", "single-branch")
        assert rc == 2 and "is in use by another rizz process (pid" in text and "replay it once that process has finished" in text, text
        assert "Traceback" not in text
    finally:
        holder.kill()
        holder.wait()



def test_inspect_of_a_run_with_no_step_says_so(tmp_path, stream, fake_model, embedder):
    out = tmp_path / "empty"
    _run(stream, out, fake_model, embedder, limit=1)
    (out / "log.jsonl").write_text("")  # as killed before its first step: run.json, no records
    for snap in (out / "snapshots").glob("*"):
        snap.unlink()
    code, text = _cli("inspect", str(out))
    assert code == 0 and text == f"{out}: no branches yet (no step has been folded)", text


def test_replay_says_whether_it_got_the_recorded_digest_and_what_another_policy_changed(tmp_path, stream, fake_model, embedder):
    """Issue #29 §7: `rizz replay` printed only a digest."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    out = tmp_path / "r"
    s = _run(stream, out, fake_model, embedder, limit=6)
    res = CliRunner().invoke(app, ["replay", str(out)])
    assert res.exit_code == 0 and res.stdout == s["state_digest"] + "\n"  # stdout: the digest alone
    assert res.stderr == f"= the digest the run recorded in {out / 'summary.json'}: its log replays to the same state\n"
    res = CliRunner().invoke(app, ["replay", str(out), "--policy", "single-branch"])
    other = json.loads((out / "summary.replay.json").read_text())
    assert res.exit_code == 0 and res.stdout == other["state_digest"] + "\n"
    said = res.stderr.splitlines()
    assert said[0] == f"wrote {out / 'summary.replay.json'}: the run's answers and rewards refolded under single-branch"
    assert said[1].startswith("differs from the run's summary.json (default) in: branches ")
    assert f"branches {s['branches']['total']} ({s['branches']['active']} active) → 1 (1 active)" in said[1]
    assert f"state digest {s['state_digest']} → {other['state_digest']}" in said[1] and "labels " in said[1]
    recorded = json.loads((out / "summary.json").read_text())
    recorded["state_digest"] = "sha256:" + "0" * 64  # as if written by a rizz whose fold differed
    (out / "summary.json").write_text(json.dumps(recorded))
    res = CliRunner().invoke(app, ["replay", str(out)])
    assert res.exit_code == 1  # a script checking that a log replays sees the difference
    assert res.stderr.startswith(f"≠ the digest the run recorded in {out / 'summary.json'} (sha256:{'0' * 64}): its log refolds to another state")
    # what the run recorded is kept: a second replay finds the same difference
    assert json.loads((out / "summary.json").read_text()) == recorded
    assert json.loads((out / "summary.replay.json").read_text())["state_digest"] == s["state_digest"]
    assert CliRunner().invoke(app, ["replay", str(out)]).exit_code == 1
    del recorded["state_digest"]  # a summary without a digest: nothing to compare with
    (out / "summary.json").write_text(json.dumps(recorded))
    res = CliRunner().invoke(app, ["replay", str(out)])
    assert res.exit_code == 0 and res.stderr.startswith("no digest recorded to compare with")
    assert json.loads((out / "summary.json").read_text())["state_digest"] == s["state_digest"]
    (out / "summary.json").unlink()
    res = CliRunner().invoke(app, ["replay", str(out)])
    assert res.stderr.startswith(f"no digest recorded to compare with: {out / 'summary.json'} is missing")


def test_inspect_of_an_evidence_policy_run_shows_what_evidence_withholds(tmp_path, stream, fake_model, embedder):
    """`rizz inspect` of a run under an evidence-enabled policy raised NameError (block_shown was
    imported inside inspect_run, not where branch_rows uses it)."""
    _run(stream, tmp_path / "ev", fake_model, embedder, policy="evidence", limit=4)
    rows = inspect_run(tmp_path / "ev")
    assert rows and all(isinstance(r["withheld"], str) and r["withheld"] for r in rows), rows


def _label_run(tmp_path, policy: str, judge_labels: list[str], n: int):
    """``n`` stance elements (livekit's) through ``policy``; the judge answers ``judge_labels`` in turn."""
    from livekit import HashEmbedder, StubModel, element

    class Judge(StubModel):
        asked = 0

        def reply(self, messages):
            if any('"function"' in m.content for m in messages):
                Judge.asked += 1
                f, a = judge_labels[min(Judge.asked, len(judge_labels)) - 1].split("/")
                return json.dumps({"function": f, "application": a})
            return super().reply(messages)

    stream = tmp_path / f"{policy}.jsonl"
    stream.write_text("".join(json.dumps(element(2 * i + 1)) + "\n" for i in range(n)))
    out = tmp_path / policy
    run_stream(stream, load_policy(policy), policy, out, Judge(), HashEmbedder(), log=lambda m: None)
    return out


def test_inspect_says_where_each_label_came_from_and_how_inputs_reached_it(tmp_path):
    """Issue #29 §9: branch labels read as nonsense and nothing said where one came from."""
    out = _label_run(tmp_path, "judge-uncertain", ["classify/stance"], 4)  # the judge names b0; the rest follow its anchor
    (row,) = inspect_run(out)
    assert (row["label"], row["label_from"], row["label_step"], row["label_proposed"]) == ("classify/stance", "judge", 0, None)
    assert row["routed_by"] == {"judge": 1, "fallback": 0, "snapped": 0, "declared": 0, "anchor": 3, "context": 0}
    out = _label_run(tmp_path, "judge-always", ["classify/stance", "classify/stance-detection"], 3)
    (row,) = inspect_run(out)  # the judge's later labels snapped to the first
    assert row["label_from"] == "judge" and row["routed_by"] == {"judge": 1, "fallback": 0, "snapped": 2, "declared": 0, "anchor": 0, "context": 0}
    code, text = _cli("inspect", str(out), "--wide")
    assert code == 0 and "judge @0" in text and "2 snapped, 1 judge" in text, text
    assert "label from @ step: judge = the judge model's label as it gave it" in " ".join(text.split()), text
    out = _label_run(tmp_path, "default", ["classify/stance"], 4)  # routing.judge: local: no judge call, a label from the input's task line
    (row,) = inspect_run(out)
    assert row["label_from"] == "fallback" and row["routed_by"]["judge"] == 0 and row["routed_by"]["fallback"] == 1, row
    assert "  label " in diff_run(out, 0) and "with no model call (routing.judge: local)" in diff_run(out, 0) and "judge proposed" not in diff_run(out, 0)
    code, text = _cli("inspect", str(out), "--wide")  # the table's "fallback @0" is said in words under it
    assert code == 0 and "fallback @0" in text and " ".join(text.split()).endswith(
        "label from @ step: fallback = made from the input's task line (its instruction, else its first line) with no model call"
        " (routing.judge: local)"), text


def test_inspect_fits_an_80_column_terminal_and_wide_shows_every_column(tmp_path, monkeypatch):
    """Issue #29 §3: `rizz inspect` was at least 160 columns wide and wrapped on an 80-column
    terminal, cutting labels."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app
    from rizz.lab.diff import MEMORY

    def label_parts(lines: list[str]) -> list[str]:
        i = next(n for n, l in enumerate(lines) if l.split()[:1] == ["b0"])
        parts = [lines[i].split()[1]]
        for line in lines[i + 1:]:
            if not line.strip():
                break
            parts.append(line.split()[0])
        return parts

    out = _label_run(tmp_path, "judge-uncertain", ["translate/reasons-compound-choices"], 3)
    row = inspect_run(out)[0]
    sizes = "/".join(str(row[k]) for k in MEMORY)
    for columns in (80, 40):  # 40: narrower than the kept columns
        res = CliRunner().invoke(app, ["inspect", str(out)], env={"COLUMNS": str(columns)})
        lines = res.output.splitlines()
        assert res.exit_code == 0 and "…" not in res.output and max(len(l) for l in lines) <= columns, res.output
        parts = label_parts(lines)
        assert "".join(parts) == "translate/reasons-compound-choices", res.output  # folded, not cut
        assert all(p.endswith(("/", "-")) for p in parts[:-1]), parts  # ... after a "/" or "-", not mid-word
        # the memory sizes stay: at 80 columns they were left out (a newcomer's terminal); here in one column
        assert "e/r/a/c/q" in res.output and f" {sizes}" in res.output and sizes.count("/") == 4, res.output
        legend = " ".join(res.output.split("memory e/r/a/c/q: ")[1].split())
        said = " label from @ step: judge = the judge model's label as it gave it" if "judge @0" in res.output else ""  # its column shown
        assert legend.startswith(f"episodes (verified examples), rules, anti-patterns, context, quarantined{said} (left out to fit "), legend
    res = CliRunner().invoke(app, ["inspect", str(out)], env={"COLUMNS": "80"})
    assert "mean" in res.output and "traffic" in res.output and "judge @0" in res.output
    assert row["mean_reward"] is not None and f"{row['mean_reward']:.3f}" in res.output  # three decimals
    footer = " ".join(res.output.split("(left out to fit ")[1].split())
    assert footer.startswith("80 columns: label_proposed, shape, ") and footer.endswith("--wide shows them, --json gives every field)")
    left_out = footer.split(": ", 1)[1].split("; --wide")[0].split(", ")
    assert "retired_rules" in left_out and not set(MEMORY) & set(left_out), footer
    res = CliRunner().invoke(app, ["inspect", str(out)], env={"COLUMNS": "140"})  # room for their own columns
    header = " ".join(res.output.split())
    assert all(h in header for h in ("episodes", "rules", "anti-", "patterns", "context", "quaran-", "tined")) and "e/r/a/c/q" not in header, header
    assert "translate/reasons-compound-choices" in res.output  # whole, on one line
    res = CliRunner().invoke(app, ["inspect", str(out), "--wide"], env={"COLUMNS": "80"})
    header = " ".join(res.output.split())
    for name in ("shape", "active", "answered", "episodes", "rules", "anti-", "patterns", "context", "quaran-", "tined", "inputs routed by"):
        assert name in header, (name, res.output)
    assert "left out" not in res.output


def test_inspect_counts_live_rules_as_view_does_and_retired_ones_apart():
    """`rizz inspect` counted rules retired by their counters (still in the branch, shown in no
    prompt) among its rules, while `rizz view`'s branch table counts live rules only."""
    from pyrsistent import pmap
    from rich.console import Console

    from rizz.core import events as ev
    from rizz.core.apply import fold
    from rizz.core.records import Label, Rule, empty_state
    from rizz.core.tenants import TenantStates
    from rizz.lab.diff import MEMORY, branch_rows, branch_table

    rules = [Rule(f"r{i}", f"when {i}", f"do {i}", b"", "b0", "classify", i) for i in range(3)]
    state = fold(empty_state(), [ev.BranchSpawned("b0", Label("classify", "stance"), b"", b"", None, 0),
                                 *(ev.RuleAdded("b0", r) for r in rules), ev.RuleActivated("r0"), ev.RuleRetired("r1")])
    (row,) = branch_rows(state)
    assert (row["rules"], row["retired_rules"]) == (2, 1), row
    (alice,) = branch_rows(TenantStates(tenants=pmap({"alice": state})))  # a tenant's rules, by its own ledger
    assert (alice["branch"], alice["rules"], alice["retired_rules"]) == ("alice/b0", 2, 1), alice
    assert "retired_rules" not in MEMORY  # not in e/r/a/c/q: 0/2/0/0/0

    def shown(width: int) -> tuple[str, list[str]]:
        table, dropped = branch_table([row], width)
        console = Console(width=width, record=True)
        console.print(table)
        return console.export_text(), dropped

    text, dropped = shown(140)  # room: a column of its own
    assert "retired_rules" not in dropped and "retired" in text, (dropped, text)
    text, dropped = shown(80)
    assert "retired_rules" in dropped and " 0/2/0/0/0" in text and max(len(l) for l in text.splitlines()) <= 80, text


def test_a_missing_run_dir_is_named_as_missing_by_every_command_that_reads_one(tmp_path):
    """A newcomer's typo in a RUN_DIR path read "no run.json — not a rizz RUN_DIR" (inspect,
    replay) or "the log ... has no steps yet" (diff): the folder was not there at all."""
    gone, empty = tmp_path / "nope", tmp_path / "empty"
    empty.mkdir()
    for args in (("inspect",), ("replay",), ("diff", "--at", "0")):
        code, text = _cli(args[0], str(gone), *args[1:])
        assert code == 2 and text == f"{gone}: no such directory (a RUN_DIR is the --out of rizz run)", (args, text)
        code, text = _cli(args[0], str(empty), *args[1:])
        assert code == 2 and text == f"{empty}: no run.json — not a rizz RUN_DIR", (args, text)


def test_policy_diff_prints_the_fields_two_policies_set_otherwise(tmp_path):
    """A newcomer read "a diff of two shows exactly what an experiment changes" in default.yaml and
    found no command for it."""
    code, text = _cli("policy", "diff", "default", "judge-uncertain")
    assert (code, text) == (1, 'routing.judge: "local" -> "when_uncertain" routing.fallback_application: "first_line" -> "content_words"')
    code, text = _cli("policy", "diff", "default", "judge-local")
    assert (code, text) == (1, 'routing.fallback_application: "first_line" -> "content_words"')
    code, text = _cli("policy", "diff", "content-words", "judge-local")
    assert (code, text) == (0, "content-words and judge-local: the same fields")
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: default\nname: mine\nretrieval: {examples_k: 2}\ncompiler: {layout: [instruction, input]}\n")
    code, text = _cli("policy", "diff", "default", str(mine))
    assert code == 1 and text == ('retrieval.examples_k: 4 -> 2 compiler.layout: ["scoped_context", "preamble", "instruction", "evidence", '
                                  '"rules", "examples", "mistakes", "working_memory", "input"] -> ["instruction", "input"]'), text
    code, text = _cli("policy", "diff", "default", str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read" in text


def test_policy_list_names_every_shipped_policy_with_its_headers_first_sentence():
    """A newcomer found no command that lists the shipped policies."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app, policy_list_lines
    from rizz.formats.policy_file import POLICY_DIR

    res = CliRunner().invoke(app, ["policy", "list"])
    lines = res.output.splitlines()
    assert res.exit_code == 0 and [l.split()[0] for l in lines] == sorted(p.stem for p in POLICY_DIR.glob("*.yaml"))
    rows = {l.split()[0]: l.split(None, 1)[1] for l in lines}
    assert rows["frozen"] == ("The frozen baseline: the model sees only the instruction, the evidence and the input; nothing is "
                              "written, no rules are distilled, no judge is asked (one global branch).")
    assert rows["corrections"] == "Verdicts that carry a correction, the way a user corrects an assistant."  # no tracker reference
    assert rows["labels-tuned"].startswith("Label quality tuned on TRAIN only: ") and "rizz streams build" not in rows["labels-tuned"]
    assert all(len(v) > 10 for v in rows.values())
    cut = policy_list_lines(60)  # a terminal 60 columns wide
    assert all(len(l) <= 60 for l in cut) and cut[1].startswith("content-words") and cut[1].endswith("…")
    assert cut[0] == "ace-style              An ACE-style baseline expressed in…"  # cut at a word


def test_policy_show_prints_the_files_header_then_the_resolved_policy(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from rizz.apps.cli import app
    from rizz.formats.policy_file import load_policy, policy_data

    res = CliRunner().invoke(app, ["policy", "show", "frozen"])
    assert res.exit_code == 0 and res.output.splitlines()[:4] == [
        "# The frozen baseline: the model sees only the instruction, the evidence and the input;",
        "# nothing is written, no rules are distilled, no judge is asked (one global branch).", "", "name: frozen"]
    assert yaml.safe_load(res.output) == policy_data(load_policy("frozen"))  # still a policy file
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: default\nname: mine\n")
    res = CliRunner().invoke(app, ["policy", "show", str(mine)])
    assert res.exit_code == 0 and res.output.startswith("name: mine\n")
