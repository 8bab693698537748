"""``rizz bench`` takes ``rizz run``'s ``--skip-bad``, ``--cache``, ``--snapshot-every`` and
``--durability``, with the same meaning, for every policy's run (fake model, hash embedder)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from stubs import HashEmbedder
from typer.testing import CliRunner

from rizz.adapters.models.cache import CachedModel, ResponseCache
from rizz.apps import cli
from rizz.store.runlog import RunDir

ROOT = Path(__file__).resolve().parents[2]
LINES = [l for l in (ROOT / "data" / "trace-mini" / "test.jsonl").read_text().splitlines() if '"task": "FOMC"' in l][:6]
POLICIES = ("frozen", "default")


def _answer(messages) -> str:
    """A letter chosen by the prompt's hash (a distiller's prompt gets a rule)."""
    text = messages[-1].content
    if text.rstrip().endswith("Answer:") or "Reply with" in text:
        return "ABC"[int(hashlib.sha256(text.encode()).hexdigest(), 16) % 3]
    return "IF the text is about rates THEN answer B"


@pytest.fixture
def models(monkeypatch, fake_model) -> list[dict]:
    """``rizz.apps.cli.load_model`` as the fake model in the response cache it is given (the
    keyword arguments of each call recorded), and the hash embedder."""
    calls: list[dict] = []

    def load(spec, cache=None, **kw):
        calls.append({"spec": spec, "cache": cache, **kw})
        model = fake_model(_answer)
        return CachedModel(model, ResponseCache(cache)) if cache is not None else model

    monkeypatch.setattr("rizz.apps.cli.load_model", load)
    monkeypatch.setattr("rizz.apps.cli.backend_name", lambda spec: "fake:scripted")
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    return calls


def _bench(stream: Path, out: Path, *extra: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli.app, ["bench", str(stream), "-P", ",".join(POLICIES), "--out", str(out), *extra])
    return res.exit_code, " ".join(res.output.split())


@pytest.fixture
def bad_stream(tmp_path) -> Path:
    """Six FOMC elements with a malformed line (line 4: metadata.shape not a string) among them."""
    bad = json.loads(LINES[2])
    bad["id"], bad["metadata"]["shape"] = "broken", 7
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*LINES[:3], json.dumps(bad), *LINES[3:]]) + "\n")
    return path


def test_without_skip_bad_the_bench_refuses_the_bad_line_and_writes_nothing(tmp_path, bad_stream, models):
    code, out = _bench(bad_stream, tmp_path / "b")
    assert code == 2 and f"{bad_stream}:4: field 'metadata.shape'" in out, out
    assert not (tmp_path / "b").exists() and models == []  # refused before the model loads


def test_with_skip_bad_every_policy_skips_the_line_and_the_report_says_so(tmp_path, bad_stream, models):
    code, out = _bench(bad_stream, tmp_path / "b", "--skip-bad")
    assert code == 0, out
    for p in POLICIES:
        run = tmp_path / "b" / p
        assert [b["line"] for b in json.loads((run / "bad_lines.json").read_text())] == [4], p
        assert json.loads((run / "summary.json").read_text())["steps"] == 6
        assert "broken" not in {r["id"] for r in RunDir(run).records()}
        assert f"skipped 1 bad line of {bad_stream}; see {run / 'bad_lines.json'}" in out
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert [b["line"] for b in results["skipped_lines"]] == [4]
    report = (tmp_path / "b" / "report.md").read_text()
    assert "**Stream lines skipped** (`--skip-bad`" in report and "line 4 (field 'metadata.shape'" in report, report


def test_a_clean_streams_report_names_no_skipped_lines(tmp_path, models):
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(LINES[:3]) + "\n")
    code, out = _bench(stream, tmp_path / "b", "--skip-bad")
    assert code == 0, out
    assert "skipped_lines" not in json.loads((tmp_path / "b" / "results.json").read_text())
    assert "Stream lines skipped" not in (tmp_path / "b" / "report.md").read_text()
    assert not (tmp_path / "b" / "default" / "bad_lines.json").exists()


def test_skip_bad_is_refused_with_peer_entries_and_with_ray(tmp_path, bad_stream, models):
    code, out = _bench(bad_stream, tmp_path / "b", "--skip-bad", "-P", "default,peer:ace")
    assert code == 2 and out.startswith("--skip-bad cannot run with peer entries yet (peer:ace read the stream whole)"), out
    clean = tmp_path / "s.jsonl"
    clean.write_text("\n".join(LINES) + "\n")
    for flags in (["--skip-bad"], ["--durability", "os"], ["--snapshot-every", "3"]):
        code, out = _bench(clean, tmp_path / "b", *flags, "--ray=local")
        assert code == 2 and out.startswith(f"{flags[0]} cannot run with --ray yet"), (flags, out)
    code, out = _bench(clean, tmp_path / "b", "--skip-bad", "--durability", "os", "--ray=local")
    assert code == 2 and out.startswith("--skip-bad, --durability cannot run with --ray yet"), out
    assert not (tmp_path / "b").exists() and models == []


def test_cache_is_the_file_every_policys_calls_go_through_and_a_second_bench_pays_nothing(tmp_path, models):
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(LINES) + "\n")
    shared = tmp_path / "shared.sqlite"
    code, out = _bench(stream, tmp_path / "b1", "--cache", str(shared))
    assert code == 0, out
    assert [c["cache"] for c in models] == [shared] and shared.is_file()
    assert not (tmp_path / "b1" / "responses.sqlite").exists()
    first = {p: json.loads((tmp_path / "b1" / p / "summary.json").read_text()) for p in POLICIES}
    assert sum(s["model_calls_uncached"] for s in first.values()) > 0
    code, out = _bench(stream, tmp_path / "b2", "--cache", str(shared))
    assert code == 0, out
    second = {p: json.loads((tmp_path / "b2" / p / "summary.json").read_text()) for p in POLICIES}
    assert all(s["model_calls_uncached"] == 0 and s["model_calls"] > 0 for s in second.values()), second  # paid once
    assert {p: s["state_digest"] for p, s in second.items()} == {p: s["state_digest"] for p, s in first.items()}
    models.clear()
    assert _bench(stream, tmp_path / "b3")[0] == 0
    assert [c["cache"] for c in models] == [tmp_path / "b3" / "responses.sqlite"]  # the default, as before


def test_snapshot_every_reaches_every_policys_run(tmp_path, models):
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(LINES) + "\n")
    assert _bench(stream, tmp_path / "few")[0] == 0
    assert all(RunDir(tmp_path / "few" / p).snapshot_steps() == [] for p in POLICIES)  # 50 records apart: none in 6 steps
    assert _bench(stream, tmp_path / "many", "--snapshot-every", "2")[0] == 0
    for p in POLICIES:
        assert len(RunDir(tmp_path / "many" / p).snapshot_steps()) >= 2, p
        assert json.loads((tmp_path / "many" / p / "summary.json").read_text())["state_digest"] == \
            json.loads((tmp_path / "few" / p / "summary.json").read_text())["state_digest"]


def test_durability_os_syncs_each_policys_log_once_not_each_step(tmp_path, models, monkeypatch):
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(LINES) + "\n")
    synced: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith("log.jsonl"):
            synced.append(Path(path).parent.name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    assert _bench(stream, tmp_path / "disk")[0] == 0
    disk = {p: synced.count(p) for p in POLICIES}
    synced.clear()
    assert _bench(stream, tmp_path / "os", "--durability", "os")[0] == 0
    assert all(n >= 6 for n in disk.values()), disk  # each step's records, before the next
    assert {p: synced.count(p) for p in POLICIES} == {p: 1 for p in POLICIES}  # once, at the end
    code, out = _bench(stream, tmp_path / "x", "--durability", "fast")
    assert code == 2 and out == "--durability must be disk or os, got 'fast'", out
    assert not (tmp_path / "x").exists()
