"""``rizz bench --ray``: a real local Ray (num_cpus=2), a scripted model, the real embedder.

The Ray bench must give the serial bench's RUN_DIRs: same logs (but timings and cache hits),
same digests, same results.json (but timings and cache-hit counts); each task's new cache
rows merge into the bench's cache, so a second run pays for nothing.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="rizz[ray] not installed (pip install 'rizz[ray]')")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import stub_model  # noqa: E402

from rizz.adapters.models import ResponseCache  # noqa: E402
from rizz.lab.bench import run_bench  # noqa: E402
from rizz.lab.ray_tasks import _snapshot_cache, merge_cache_rows  # noqa: E402
from rizz.store.runlog import RunDirMismatch  # noqa: E402

TRACE_MINI = ROOT / "data" / "trace-mini" / "test.jsonl"
POLICIES = ["frozen", "default", "single-branch"]
#: timings and cache-hit accounting: the only fields allowed to differ (rizz/lab/ray_tasks.py)
# what depends on which calls the response cache answered: a serial bench's later policies hit the
# prompts its earlier ones paid for, a Ray task has its own cache until the merge (the evaluated
# and sent prompt tokens of issue #27 count only the calls the backend got)
VOLATILE = {"wall_s", "latency_s", "cached", "uncached", "cost_usd", "command", "prompt_tokens_sent", "prompt_tokens_evaluated"}


@pytest.fixture(scope="module")
def local_ray():
    ray.cloudpickle.register_pickle_by_value(stub_model)  # workers cannot import benchmarks/
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def embedder():
    from rizz.adapters.embedder import Embedder

    return Embedder()


@pytest.fixture(scope="module")
def stream(tmp_path_factory) -> Path:
    lines = [l for l in TRACE_MINI.read_text().splitlines() if '"task": "FOMC"' in l or '"task": "C-STANCE"' in l][:8]
    p = tmp_path_factory.mktemp("s") / "s.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _serial(stream, out, embedder, policies=POLICIES, limit=None):
    out.mkdir(parents=True, exist_ok=True)
    model = stub_model.cached_stub(str(out / "responses.sqlite"))
    return run_bench(stream, policies, out, model, embedder, limit=limit, log=lambda m: None, title="t", command="c")


def _on_ray(stream, out, policies=POLICIES, limit=None):
    out.mkdir(parents=True, exist_ok=True)
    return run_bench(stream, policies, out, None, None, limit=limit, log=lambda m: None, title="t", command="c",
                     ray_address="local", model_factory=stub_model.cached_stub)


def _logs(bench: Path, p: str):
    return [json.loads(l) for l in (bench / p / "log.jsonl").read_text().splitlines()]


def _keys(path: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(str(path)) as db:
        return {k for (k,) in db.execute("SELECT key FROM responses")}


def _prompts(run: Path) -> dict:
    from contextlib import closing

    with closing(sqlite3.connect(run / "store.sqlite")) as db:
        return dict(db.execute("SELECT sha256, text FROM prompts"))


def test_ray_bench_equals_serial_bench(tmp_path, stream, embedder, local_ray):
    serial = _serial(stream, tmp_path / "serial", embedder)
    par = _on_ray(stream, tmp_path / "ray")
    for p in POLICIES:
        s_sum = json.loads((tmp_path / "serial" / p / "summary.json").read_text())
        r_sum = json.loads((tmp_path / "ray" / p / "summary.json").read_text())
        assert r_sum["state_digest"] == s_sum["state_digest"] and r_sum["steps"] == 8
        assert _strip(_logs(tmp_path / "ray", p)) == _strip(_logs(tmp_path / "serial", p))
        s_meta = json.loads((tmp_path / "serial" / p / "run.json").read_text())
        assert json.loads((tmp_path / "ray" / p / "run.json").read_text()) == s_meta  # stream path as given
        assert _prompts(tmp_path / "ray" / p) == _prompts(tmp_path / "serial" / p) != {}
    assert _strip(par) == _strip(serial)
    assert par["results"]["default"]["mean_reward"] == serial["results"]["default"]["mean_reward"]
    # every prompt any task paid for is in the bench's cache, as in the serial bench's
    assert _keys(tmp_path / "ray" / "responses.sqlite") == _keys(tmp_path / "serial" / "responses.sqlite")
    info = json.loads((tmp_path / "ray" / "ray.json").read_text())
    assert [t["policy"] for t in info["tasks"]] == POLICIES and all(t["steps_run"] == 8 for t in info["tasks"])
    assert sum(t["new_cache_rows"] for t in info["tasks"]) == len(_keys(tmp_path / "ray" / "responses.sqlite"))


def test_ray_bench_resumes_and_a_rerun_pays_for_nothing(tmp_path, stream, embedder, local_ray):
    full = _serial(stream, tmp_path / "full", embedder, ["frozen", "default"])
    out = tmp_path / "cut"
    _serial(stream, out, embedder, ["frozen", "default"], limit=5)  # an interrupted bench
    # ... finished on Ray: each task resumes its RUN_DIR after step 5
    _on_ray(stream, out, ["frozen", "default"])
    info = json.loads((out / "ray.json").read_text())
    assert [t["steps_run"] for t in info["tasks"]] == [3, 3]
    for p in ("frozen", "default"):
        assert json.loads((out / p / "summary.json").read_text())["state_digest"] == \
            json.loads((tmp_path / "full" / p / "summary.json").read_text())["state_digest"]
    n = len(_keys(out / "responses.sqlite"))
    again = _on_ray(stream, out, ["frozen", "default"])
    info = json.loads((out / "ray.json").read_text())
    assert [t["steps_run"] for t in info["tasks"]] == [0, 0] and [t["new_cache_rows"] for t in info["tasks"]] == [0, 0]
    assert len(_keys(out / "responses.sqlite")) == n
    assert _strip(again) == _strip(full)
    # a fresh Ray bench seeded with this cache makes no uncached model call at all
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "responses.sqlite").write_bytes(_snapshot_cache(out / "responses.sqlite"))  # WAL folded in
    res = _on_ray(stream, fresh, ["frozen", "default"])
    assert all(res["results"][p]["model_calls"]["uncached"] == 0 for p in ("frozen", "default"))
    assert all(res["results"][p]["model_calls"]["total"] > 0 for p in ("frozen", "default"))


def test_a_failing_task_is_raised_and_the_others_are_kept(tmp_path, stream, embedder, local_ray):
    out = tmp_path / "b"
    _serial(stream, out, embedder, ["frozen"], limit=3)
    meta = json.loads((out / "frozen" / "run.json").read_text())
    meta["model"] = "another:model"  # the frozen RUN_DIR was started with another model
    (out / "frozen" / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunDirMismatch, match="model"):
        _on_ray(stream, out, ["frozen", "default"])
    assert json.loads((out / "default" / "summary.json").read_text())["steps"] == 8
    assert len(_logs(out, "frozen")) == 3  # nothing recorded was lost


def test_merge_cache_rows_keeps_existing_entries(tmp_path):
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()
    assert merge_cache_rows(path, [("k1", "m", "{}", 1.0), ("k2", "m", "{}", 1.0)]) == 2
    assert merge_cache_rows(path, [("k1", "m", '{"other": 1}', 2.0), ("k3", "m", "{}", 1.0)]) == 1
    assert _keys(path) == {"k1", "k2", "k3"}


def test_serial_bench_refuses_ray_without_a_model_factory(tmp_path, stream):
    with pytest.raises(ValueError, match="model_factory"):
        run_bench(stream, ["frozen"], tmp_path, None, None, ray_address="local", log=lambda m: None, title="t", command="c")



def test_ray_flag_takes_an_optional_address():
    from rizz.apps.cli import ray_flag

    assert ray_flag(["bench", "s.jsonl", "--ray", "-o", "x"]) == ["bench", "s.jsonl", "--ray=local", "-o", "x"]
    assert ray_flag(["bench", "--ray", "s.jsonl"]) == ["bench", "--ray=local", "s.jsonl"]
    assert ray_flag(["bench", "s.jsonl", "--ray"]) == ["bench", "s.jsonl", "--ray=local"]
    for addr in ("auto", "10.0.0.5:6379", "ray://head:10001", "local"):
        assert ray_flag(["bench", "--ray", addr, "s.jsonl"]) == ["bench", "--ray", addr, "s.jsonl"]


def test_cli_bench_on_ray_end_to_end(tmp_path, stream, local_ray, monkeypatch):
    """`rizz bench --ray` through the CLI (the stub model stands in for --model via model_from_spec)."""
    from typer.testing import CliRunner

    import rizz.lab.ray_tasks as rt
    from rizz.apps.cli import app, ray_flag

    monkeypatch.setattr(rt, "model_from_spec", lambda spec, cache: stub_model.cached_stub(cache))
    args = ray_flag(["bench", str(stream), "-P", "frozen,default", "--out", str(tmp_path / "b"), "--model", "embedded", "--ray"])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "ray.json" in res.output and json.loads((tmp_path / "b" / "ray.json").read_text())["address"] == "local"
    assert json.loads((tmp_path / "b" / "results.json").read_text())["results"]["default"]["steps"] == 8


def test_cli_bench_on_ray_whose_model_fails_leaves_no_folder(tmp_path, stream, local_ray, monkeypatch):
    """A Ray bench whose every task failed before a step (a server that could not be reached)
    leaves no folder behind, as a bench without Ray does (it left each policy's folder holding
    only the driver's lock); a folder that was there before keeps what it had."""
    from typer.testing import CliRunner

    import rizz.lab.ray_tasks as rt
    from rizz.adapters.models import ModelUnavailableError
    from rizz.apps.cli import app, ray_flag

    def unreachable(spec, cache):
        raise ModelUnavailableError("cannot reach the server at http://127.0.0.1:9/v1")

    monkeypatch.setattr(rt, "model_from_spec", unreachable)
    out = tmp_path / "b"
    args = ray_flag(["bench", str(stream), "-P", "frozen,default", "--out", str(out), "--model", "embedded", "--ray"])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "cannot reach the server" in res.output, res.output
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and sorted(f.name for f in out.iterdir()) == ["notes.txt"], res.output
