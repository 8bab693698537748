"""Issue #27 §1: a RUN_DIR of a few files — embeddings and prompts in ``store.sqlite``; old
RUN_DIRs (``embeddings/``, ``prompts/``) replay as they are and ``rizz convert`` moves them."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.store.convert import ConvertError, convert_run_dir
from rizz.store.embeddings import embedding_key
from rizz.store.runlog import RunDir
from rizz.store.runstore import RunStore, RunStoreError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream  # noqa: E402
from test_live import V1_DIGEST  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "fixtures" / "v1-rundir"


def test_store_round_trip_is_bit_exact_and_immutable(tmp_path):
    path = tmp_path / "store.sqlite"
    store = RunStore(path)
    assert "0" * 64 not in store and not path.exists()  # a read creates nothing
    vecs = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    keys = [store.put(embedding_key(f"t{i}", "e"), v) for i, v in enumerate(vecs)]
    store.put_prompt("a" * 64, "the prompt")
    assert store.prompt("a" * 64) == "the prompt"  # pending: served before its commit
    store.flush()
    store.close()
    again = RunStore(path)
    assert again.get_many(keys).tobytes() == vecs.tobytes() and again.get(keys[0]).dtype == np.float32
    again.put(keys[0], np.zeros(384, dtype=np.float32))  # an existing key keeps its first vector
    assert again.get(keys[0]).tobytes() == vecs[0].tobytes()
    assert again.prompt("a" * 64) == "the prompt" and again.prompt("b" * 64) is None
    with pytest.raises(KeyError):
        again.get("0" * 64)
    with pytest.raises(ValueError):
        again.get("../etc")
    got = again.get(keys[1])
    got[:] = 0.0  # the caller's copy
    assert again.get(keys[1]).tobytes() == vecs[1].tobytes()
    assert sorted(again.keys()) == sorted(keys)


def test_a_damaged_store_is_an_error_not_a_silent_rebuild(tmp_path):
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"not a database" * 100)
    with pytest.raises(RunStoreError, match="not a readable rizz store"):
        RunStore(path).get("0" * 64)
    assert path.read_bytes() == b"not a database" * 100


def _run(stream: Path, out: Path) -> dict:
    from rizz.adapters.models.cache import CachedModel, ResponseCache

    out.mkdir(parents=True, exist_ok=True)
    with ResponseCache(out / "responses.sqlite") as cache:
        return run_stream(stream, load_policy("default"), "default", out, CachedModel(ArithmeticModel(), cache), HashEmbedder(),
                          snapshot_every=3, rendering="chat", log=lambda m: None)


def test_a_new_run_dir_is_a_few_files_and_every_prompt_is_readable(tmp_path):
    stream = arithmetic_stream(tmp_path / "s.jsonl", 40)
    out = tmp_path / "r"
    summary = _run(stream, out)
    assert sorted(p.name for p in out.iterdir()) == [".lock", ".lock.pid", "log.jsonl", "responses.sqlite", "run.json", "snapshots",
                                                      "store.sqlite", "summary.json"]
    rd = RunDir(out)
    assert rd.layout == "sqlite"
    shas = [json.loads(x)["prompt"]["sha256"] for x in (out / "log.jsonl").read_text().splitlines() if '"prompt"' in x]
    assert len(shas) >= 30 and all(rd.prompt_text(s) is not None for s in shas)  # (context-only elements have no prompt)
    assert replay(out, write_summary=False)["state_digest"] == summary["state_digest"]


def test_an_old_run_dir_replays_in_its_layout_and_rizz_convert_moves_it(tmp_path):
    run = tmp_path / "v1"
    shutil.copytree(V1, run)
    n_vec, n_prompt = len(list((run / "embeddings").glob("*/*.npy"))), len(list((run / "prompts").glob("*.txt")))
    rd = RunDir(run)
    assert rd.layout == "files" and replay(run, write_summary=False)["state_digest"] == V1_DIGEST
    texts = {p.stem: p.read_text(encoding="utf-8") for p in (run / "prompts").glob("*.txt")}
    assert all(rd.prompt_text(s) == t for s, t in texts.items())

    out = convert_run_dir(run)
    assert (out["vectors"], out["prompts"], out["layout_before"]) == (n_vec, n_prompt, "files") and n_vec > 10
    assert not (run / "embeddings").exists() and not (run / "prompts").exists() and (run / "store.sqlite").is_file()
    rd = RunDir(run)
    assert rd.layout == "sqlite" and all(rd.prompt_text(s) == t for s, t in texts.items())
    assert replay(run, write_summary=False)["state_digest"] == V1_DIGEST
    vec = np.load(next((V1 / "embeddings").glob("*/*.npy")))
    key = next((V1 / "embeddings").glob("*/*.npy")).stem
    assert rd.embeddings.get(key).tobytes() == vec.tobytes()  # byte for byte
    assert convert_run_dir(run)["vectors"] == 0  # again: nothing to do
    from rizz.core import digest
    from rizz.engine.logfold import restore_fold
    from rizz.formats.policy_file import parse_policy

    meta = json.loads((run / "run.json").read_text())
    fold, _ = restore_fold(RunDir(run), parse_policy(meta["policy_data"]))  # a resume: its snapshots, then the log
    assert digest(fold.state) == V1_DIGEST


def test_a_convert_interrupted_after_its_rename_is_finished_by_the_next(tmp_path):
    run = tmp_path / "v1"
    shutil.copytree(V1, run)
    convert_run_dir(run, keep_files=True)  # the state a kill between rename and removal leaves
    assert (run / "embeddings").is_dir() and RunDir(run).layout == "sqlite"
    with closing(sqlite3.connect(run / "store.sqlite")) as db:  # a store missing a prompt the folder has
        db.execute("DELETE FROM prompts WHERE sha256 = (SELECT MIN(sha256) FROM prompts)")
        db.commit()
    with pytest.raises(ConvertError, match="not in .* as in the file; nothing was removed"):
        convert_run_dir(run)
    assert (run / "prompts").is_dir()
    shutil.rmtree(run)
    shutil.copytree(V1, run)
    convert_run_dir(run, keep_files=True)
    assert convert_run_dir(run)["files_removed"] > 20 and not (run / "embeddings").exists()
    assert replay(run, write_summary=False)["state_digest"] == V1_DIGEST


def test_a_damaged_prompt_file_stops_the_convert_before_anything_is_removed(tmp_path):
    run = tmp_path / "v1"
    shutil.copytree(V1, run)
    victim = next((run / "prompts").glob("*.txt"))
    victim.write_text("changed", encoding="utf-8")
    with pytest.raises(ConvertError, match="does not hash to its name"):
        convert_run_dir(run)
    assert (run / "prompts").is_dir() and (run / "embeddings").is_dir() and not (run / "store.sqlite").exists()
    assert RunDir(run).layout == "files"


def test_rizz_convert_cli_converts_each_run_of_a_bench_folder(tmp_path):
    from typer.testing import CliRunner

    from rizz.apps import cli

    bench = tmp_path / "bench"
    for name in ("a", "b"):
        shutil.copytree(V1, bench / name)
    res = CliRunner().invoke(cli.app, ["convert", str(bench)])
    assert res.exit_code == 0, res.output
    assert all(RunDir(bench / n).layout == "sqlite" and not (bench / n / "embeddings").exists() for n in ("a", "b"))
    assert "vectors and" in res.output and "moved into store.sqlite" in res.output
    res = CliRunner().invoke(cli.app, ["convert", str(tmp_path / "nothing")])
    assert res.exit_code != 0 and res.output == f"{tmp_path / 'nothing'}: no such directory\n"
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(cli.app, ["convert", str(tmp_path / "empty")])
    assert res.exit_code != 0 and "not a rizz RUN_DIR" in res.output
    helptext = CliRunner().invoke(cli.app, ["convert", "--help"]).output
    assert "embeddings/" in helptext and "store.sqlite" in helptext


def test_rizz_convert_on_a_read_only_run_dir_already_in_one_store_has_nothing_to_convert(tmp_path):
    """A read-only RUN_DIR already in one store was refused ("cannot write here"): whether there is
    anything to convert is decided first, as on a writable folder; an old layout is still refused."""
    from test_readonly_rundir import _read_only
    from typer.testing import CliRunner

    from rizz.apps import cli

    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(V1, old)
    shutil.copytree(V1, new)
    convert_run_dir(new)
    with _read_only(new) as ro:
        res = CliRunner().invoke(cli.app, ["convert", str(ro)])
        assert res.exit_code == 0, res.output
        assert res.stderr == f"{ro}: already in one store (store.sqlite); nothing to convert\n"
    with _read_only(old) as ro:
        res = CliRunner().invoke(cli.app, ["convert", str(ro)])
        assert res.exit_code == 2 and "cannot write here" in res.stderr, res.output


def test_prefetch_reads_many_vectors_in_one_query_then_gets_need_none(tmp_path):
    store = RunStore(tmp_path / "store.sqlite")
    vecs = np.random.default_rng(2).standard_normal((30, 8)).astype(np.float32)
    keys = [store.put(embedding_key(f"t{i}", "e"), v) for i, v in enumerate(vecs)]
    store.close()
    again = RunStore(tmp_path / "store.sqlite")
    seen: list[str] = []
    real = again._read
    again._read = lambda sql, args: seen.append(sql) or real(sql, args)  # type: ignore[method-assign]
    again.prefetch(keys + ["f" * 64, ""])  # an unknown key and an empty one are skipped
    assert seen == []  # prefetch queries the connection directly, in one batch here
    assert again.get_many(keys).tobytes() == vecs.tobytes() and seen == []
