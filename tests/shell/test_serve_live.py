"""``rizz serve`` over the real live Session (issue #11): HTTP round trip, load, and kill -9.

Skipped, with the reason, in a build without ``rizz.Session.open``. The server runs as a child
process on 127.0.0.1 with the scripted stub model (``benchmarks/serve_stub.py``), the real
embedder and real Sessions; clients are real HTTP clients (``benchmarks/serve_load.py``).
The full-size load test (32 clients, 8 tenants, 2,000 pairs) is ``benchmarks/serve_load.py``
with its defaults; figures in results/2026-12-01-serve-load.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("fastapi", reason="rizz[serve] not installed")
pytest.importorskip("prometheus_client", reason="rizz[serve] not installed (prometheus-client)")
try:
    from rizz import Session  # noqa: F401
    _LIVE = hasattr(Session, "open")
except ImportError:
    _LIVE = False
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _LIVE, reason="needs the live Session API (rizz.Session.open, issue #11), not in this build")]

import serve_load  # noqa: E402


@pytest.fixture
def server(tmp_path):
    port = serve_load._free_port()
    procs = []

    def start() -> serve_load.ServerProc:
        p = serve_load.ServerProc(tmp_path / "data", port, "stub", 0.0, tmp_path / "server.log")
        procs.append(p)
        p.wait_ready()
        return p

    yield start, port, tmp_path
    for p in procs:
        p.stop()


def _replay(run_dir: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "rizz.apps.cli", "replay", str(run_dir)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_http_round_trip_matches_replay(server):
    start, port, tmp = server
    srv = start()
    call = serve_load.call
    els = serve_load._elements()[:6]
    for el in els:
        st, body = call(port, "POST", "/v1/tenants/acme/answer", {k: v for k, v in el.items() if k not in ("reference", "verifier")})
        assert st == 200, body
        assert body["id"] == el["id"] and isinstance(body["prompt_tokens"], int) and body["prompt_tokens"] > 0
        assert isinstance(body["branch"], str)
    # verdicts in reverse order, later
    for el in reversed(els):
        assert call(port, "POST", "/v1/tenants/acme/verdict", {"id": el["id"], "reward": 1.0})[0] == 200
    st, again = call(port, "POST", "/v1/tenants/acme/verdict", {"id": els[0]["id"], "reward": 1.0})
    assert st == 404
    st, state = call(port, "GET", "/v1/tenants/acme/state")
    assert st == 200 and state["steps"] == 6 and state["pending"] == 0 and state["branches"] >= 1
    st, rows = call(port, "GET", "/v1/tenants/acme/branches")
    assert st == 200 and sum(r["answered"] for r in rows) == 6
    st, bad = call(port, "POST", "/v1/tenants/acme/answer", {"id": "x", "input": "y", "metadata": {"shape": "banana"}})
    assert st == 422 and bad["field"] == "$.metadata.shape"
    assert call(port, "GET", "/v1/tenants/acme/state")[1] == state  # the refused input changed nothing
    srv.stop()
    assert _replay(tmp / "data" / "acme") == state["digest"]


def test_small_load_then_kill_9_keeps_the_ledger(server):
    start, port, tmp = server
    srv = start()
    res = serve_load.run_load(port, clients=8, tenants=4, pairs=120, max_seconds=240, ledger=tmp / "ledger.jsonl",
                              kill=(40, srv.kill9))
    acked = res["acked"]
    assert res["pairs_done"] >= 40 and len(acked["answer"]) >= 40
    srv = start()  # restart on the same data
    crash = serve_load.check_after_crash(port, tmp / "data", acked)
    assert crash["acked_answers_lost"] == [] and crash["folded_more_than_once"] == []
    assert crash["acked_verdicts_not_folded_once"] == [] and crash["their_failures"] == []
    tenants = sorted({t for t, _ in acked["answer"]})
    acked_ids = {i for _, i in acked["answer"]}
    for t in tenants:  # still pending now: only answers the server wrote but never acknowledged (in flight at the kill)
        assert not set(serve_load.call(port, "GET", f"/v1/tenants/{t}/pending")[1]["pending"]) & acked_ids
    digests = {t: serve_load.call(port, "GET", f"/v1/tenants/{t}/state")[1]["digest"] for t in tenants}
    ledger = [json.loads(l) for l in (tmp / "ledger.jsonl").read_text().splitlines()]
    assert len([r for r in ledger if r["kind"] == "verdict"]) == len(acked["verdict"])
    srv.stop()
    for t in tenants:
        assert _replay(tmp / "data" / t) == digests[t]
