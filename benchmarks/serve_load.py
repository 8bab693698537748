"""Load and crash test of ``rizz serve`` over loopback: concurrent clients, a client ledger, kill -9.

Usage::

    python benchmarks/serve_load.py --out DIR [--clients 32] [--tenants 8] [--pairs 2000]
        [--max-seconds 900] [--model stub|embedded] [--latency 0.0] [--kill-after N]

Starts the server as a child process on 127.0.0.1 (``--model stub``: ``benchmarks/serve_stub.py``,
the scripted model, so the server is what is measured; ``--model embedded``: ``rizz serve
--model embedded``), waits for ``/healthz``, then ``--clients`` threads, client ``c`` on tenant
``c % tenants``, each loop: POST an answer (a TRACE element from ``data/trace-mini/test.jsonl``
under a fresh id), score it itself (exact match with the reference: 1.0 or 0.0), POST the
verdict. It stops after ``--pairs`` answer+verdict pairs in all or ``--max-seconds``,
whichever comes first, and prints p50/p95/p99 latency per request kind and pairs per second.

Every acknowledged (HTTP 200) answer and verdict goes into the client ledger
(``DIR/ledger.jsonl``). With ``--kill-after N`` the server is killed with SIGKILL once N pairs
are done; the clients stop at their next failed request; the server is restarted on the same
data and the ledger is checked against it (``DIR/crash.json``):

* every acknowledged answer is still pending (``GET .../pending``) or folded (a ``verdict``
  record in ``DATA/<tenant>/log.jsonl``);
* every acknowledged verdict is folded exactly once (one ``verdict`` record for its id);

then the verdicts of the acknowledged answers still pending are sent, each tenant's ``/state``
digest is read, the server is stopped (SIGTERM: sessions close), and ``rizz replay
DATA/<tenant>`` must print the same digest. Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STREAM = ROOT / "data" / "trace-mini" / "test.jsonl"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(port: int, method: str, path: str, body: Any = None, timeout: float = 120.0) -> tuple[int, Any]:
    """One HTTP request on its own connection; raises OSError when the server is gone."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    return r.status, json.loads(data) if data else None


class ServerProc:
    """The server as a child process (its own process group, so SIGKILL takes it whole)."""

    def __init__(self, data: Path, port: int, model: str, latency: float, log: Path, policy: str = "default") -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        env.setdefault("RIZZ_THREADS", "1")
        if model == "stub":
            cmd = [sys.executable, str(ROOT / "benchmarks" / "serve_stub.py"), "--data", str(data), "--port", str(port),
                   "--latency", str(latency), "--policy", policy]
        else:
            cmd = [sys.executable, "-m", "rizz.apps.cli", "serve", "--data", str(data), "--port", str(port), "--model", model,
                   "--policy", policy]
        self.port = port
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=self._log, start_new_session=True)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see its log")
            try:
                if call(self.port, "GET", "/healthz", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("server not ready in time")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._log.close()


def _elements() -> list[dict[str, Any]]:
    return [json.loads(line) for line in STREAM.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_load(port: int, *, clients: int, tenants: int, pairs: int, max_seconds: float, ledger: Path,
             kill: tuple[int, Any] | None = None, request_timeout: float = 120.0) -> dict[str, Any]:
    """Drive the server; returns latencies (s), counts and the ledger (see module docstring)."""
    els = _elements()
    lock = threading.Lock()
    state = {"issued": 0, "done": 0, "errors": 0, "killed": False}
    lat: dict[str, list[float]] = {"answer": [], "verdict": []}
    acked: dict[str, list[tuple[str, str]]] = {"answer": [], "verdict": []}
    led = open(ledger, "a", encoding="utf-8")
    t_end = time.time() + max_seconds

    def note(kind: str, tenant: str, item: str, seconds: float) -> None:
        with lock:
            lat[kind].append(seconds)
            acked[kind].append((tenant, item))
            led.write(json.dumps({"kind": kind, "tenant": tenant, "id": item}) + "\n")
            led.flush()

    def client(c: int) -> None:
        tenant = f"t{c % tenants}"
        k = 0
        while time.time() < t_end:
            with lock:
                if state["issued"] >= pairs or state["killed"]:
                    return
                state["issued"] += 1
                n = state["issued"]
            el = dict(els[n % len(els)], id=f"c{c:02d}-{k:05d}")
            k += 1
            ref = el.pop("reference", None)
            el.pop("verifier", None)
            try:
                t0 = time.perf_counter()
                st, body = call(port, "POST", f"/v1/tenants/{tenant}/answer", el, timeout=request_timeout)
                if st != 200:
                    raise RuntimeError(f"answer {st}: {body}")
                note("answer", tenant, el["id"], time.perf_counter() - t0)
                refs = ref if isinstance(ref, list) else [ref]
                reward = 1.0 if body["answer"] is not None and body["answer"] in refs else 0.0
                t0 = time.perf_counter()
                st, body = call(port, "POST", f"/v1/tenants/{tenant}/verdict", {"id": el["id"], "reward": reward},
                               timeout=request_timeout)
                if st != 200:
                    raise RuntimeError(f"verdict {st}: {body}")
                note("verdict", tenant, el["id"], time.perf_counter() - t0)
            except (OSError, http.client.HTTPException, RuntimeError) as e:
                with lock:
                    state["errors"] += 1
                    if not state["killed"]:
                        print(f"client {c}: {e}", file=sys.stderr)
                if not isinstance(e, RuntimeError):
                    return  # the server is gone (crash test): stop this client
                continue
            with lock:
                state["done"] += 1
                if kill is not None and state["done"] >= kill[0] and not state["killed"]:
                    state["killed"] = True
                    kill[1]()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    led.close()

    def pct(x: list[float]) -> dict[str, float]:
        a = np.asarray(x) * 1000.0
        return {f"p{q}": round(float(np.percentile(a, q)), 1) for q in (50, 95, 99)} if len(a) else {}

    return {"clients": clients, "tenants": tenants, "pairs_done": state["done"], "errors": state["errors"],
            "wall_s": round(wall, 2), "pairs_per_s": round(state["done"] / wall, 2) if wall else 0.0,
            "latency_ms": {k: pct(v) for k, v in lat.items()}, "acked": acked}


def _log_verdicts(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    path = run_dir / "log.jsonl"
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line (the crash): not a record
            if r.get("kind") == "verdict" or (r.get("kind", "step") == "step" and "verdict" in r):
                counts[r["id"]] = counts.get(r["id"], 0) + 1
    return counts


def check_after_crash(port: int, data: Path, acked: dict[str, list[tuple[str, str]]]) -> dict[str, Any]:
    """The ledger checks of the module docstring, against the restarted server and its logs."""
    tenants = sorted({t for t, _ in acked["answer"]})
    pending = {t: set(call(port, "GET", f"/v1/tenants/{t}/pending")[1]["pending"]) for t in tenants}
    folded = {t: _log_verdicts(data / t) for t in tenants}
    lost = [(t, i) for t, i in acked["answer"] if i not in pending[t] and folded[t].get(i, 0) == 0]
    twice = [(t, i) for t in tenants for i, n in folded[t].items() if n > 1]
    not_folded = [(t, i) for t, i in acked["verdict"] if folded[t].get(i, 0) != 1]
    verdicts_acked = set(acked["verdict"])
    finish = [(t, i) for t, i in acked["answer"] if (t, i) not in verdicts_acked and i in pending[t]]
    finish_fail = [(t, i, st) for t, i in finish for st in [call(port, "POST", f"/v1/tenants/{t}/verdict", {"id": i, "reward": 0.0})[0]]
                   if st != 200]
    return {"answers_acked": len(acked["answer"]), "verdicts_acked": len(acked["verdict"]),
            "pending_after_restart": sum(len(p) for p in pending.values()), "acked_answers_lost": lost,
            "folded_more_than_once": twice, "acked_verdicts_not_folded_once": not_folded,
            "pending_verdicts_sent_after_restart": len(finish), "their_failures": finish_fail}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--model", default="stub", help="stub (benchmarks/serve_stub.py) or a --model spec such as embedded")
    ap.add_argument("--latency", type=float, default=0.0, help="stub model seconds per call")
    ap.add_argument("--kill-after", type=int, default=None, help="SIGKILL the server after N pairs, restart, check the ledger")
    ap.add_argument("--request-timeout", type=float, default=120.0,
                    help="client-side seconds per request; a request that waits longer ends its client (the embedded "
                         "model serves one answer at a time, so 32 clients queue for minutes)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    data, port = a.out / "data", _free_port()
    srv = ServerProc(data, port, a.model, a.latency, a.out / "server.log")
    report: dict[str, Any] = {"command": " ".join(sys.argv), "model": a.model, "latency": a.latency}
    ok = True
    try:
        srv.wait_ready()
        res = run_load(port, clients=a.clients, tenants=a.tenants, pairs=a.pairs, max_seconds=a.max_seconds,
                       ledger=a.out / "ledger.jsonl", kill=(a.kill_after, srv.kill9) if a.kill_after else None,
                       request_timeout=a.request_timeout)
        acked = res.pop("acked")
        report["load"] = res
        print(json.dumps(res, indent=1))
        if a.kill_after:
            srv = ServerProc(data, port, a.model, a.latency, a.out / "server.log")
            srv.wait_ready()
            crash = check_after_crash(port, data, acked)
            tenants = sorted({t for t, _ in acked["answer"]})
            digests = {t: call(port, "GET", f"/v1/tenants/{t}/state")[1]["digest"] for t in tenants}
            srv.stop()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
            replayed = {t: subprocess.run([sys.executable, "-m", "rizz.apps.cli", "replay", str(data / t)], env=env, capture_output=True,
                                          text=True).stdout.strip().splitlines()[-1:] for t in tenants}
            crash["replay_matches_state"] = {t: replayed[t] == [digests[t]] for t in tenants}
            ok = not (crash["acked_answers_lost"] or crash["folded_more_than_once"] or crash["acked_verdicts_not_folded_once"]
                      or crash["their_failures"]) and all(crash["replay_matches_state"].values())
            crash["ok"] = ok
            report["crash"] = crash
            print(json.dumps(crash, indent=1))
    finally:
        srv.stop()
        (a.out / ("crash.json" if a.kill_after else "load.json")).write_text(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
