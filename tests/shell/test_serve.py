"""``rizz serve``'s HTTP layer over a test double of the live Session API, through real HTTP on loopback.

The double keeps the CONTRACT's Session API (answer / fold / digest / pending_ids / step_index /
state / close) and calls the shared model for every answer, so queueing, model failures and
metrics go through the real :class:`FairModel`. The real-Session tests are test_serve_live.py.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="rizz[serve] not installed")
pytest.importorskip("prometheus_client", reason="rizz[serve] not installed (prometheus-client)")
import uvicorn  # noqa: E402
from stubs import StubBackend  # noqa: E402

from rizz.adapters.models import Message, ModelError  # noqa: E402
from rizz.apps.serve.run import build  # noqa: E402
from rizz.apps.serve.tenants import FairModel, ModelQueueTimeout  # noqa: E402

KEY_A, KEY_A2, KEY_B = "a" * 20, "a2-" + "x" * 20, "b" * 20


class Model(StubBackend):
    """Scripted model: 'FAIL' in the prompt -> ModelError, 'SLOW' -> sleeps 1 s, else "B"."""

    name = "double:model"

    def reply(self, messages) -> str:
        text = messages[-1].content
        if "FAIL" in text:
            raise ModelError("backend said 500")
        if "SLOW" in text:
            time.sleep(1.0)
        return "B"


class _Branch:
    def __init__(self) -> None:
        self.label, self.shape, self.active = "classify/stance", None, True
        self.episodes = self.rules = self.anti_patterns = self.context = self.quarantine = ()

        class S:
            traffic, answered, mean_reward = 0, 0, 0.0

        self.stats = S()


class _State:
    def __init__(self) -> None:
        self.branches = {"b0": _Branch()}
        self.rule_ledger: dict[str, Any] = {}

    def branch_ids(self):
        return list(self.branches)


class FakeSession:
    """Test double of ``rizz.Session`` (the CONTRACT live API); refuses like it (ValueError)."""

    def __init__(self, path: Path, model: Any) -> None:
        self.path, self.model = path, model
        self.pending: dict[str, str] = {}
        self.folded: list[tuple[str, float]] = []
        self.corrections: list[str | None] = []
        self.answered: dict[str, int] = {}
        self.step_index = 0
        self.state = _State()
        self.inside = 0
        self.max_inside = 0
        self.closed = False
        path.mkdir(parents=True, exist_ok=True)

    def _enter(self) -> None:
        self.inside += 1
        self.max_inside = max(self.max_inside, self.inside)
        time.sleep(0.02)

    def answer(self, el: dict):
        self._enter()
        try:
            if el["id"] in self.pending:
                raise ValueError(f"answer: {el['id']!r} is already pending")
            if "BOOM" in el["input"]:
                raise RuntimeError("a bug")
            gen = self.model.generate([Message("user", el["input"])], max_tokens=4)
            self.pending[el["id"]] = gen.text
            self.answered[el["id"]] = self.step_index
            self.step_index += 1

            class P:
                id, answer, prompt_tokens, branch = el["id"], gen.text, gen.prompt_tokens, "b0"

            return P()
        finally:
            self.inside -= 1

    def fold(self, item_id, verdict):
        if item_id not in self.pending:
            raise ValueError(f"fold: {item_id!r} is not pending (unknown id)")
        del self.pending[item_id]
        self.folded.append((item_id, verdict.reward))
        self.corrections.append(verdict.correction)

    def pending_ids(self):
        return list(self.pending)

    def used_id(self, item_id):
        if item_id not in self.answered:
            return None
        return f"answered at step {self.answered[item_id]}, {'pending' if item_id in self.pending else 'already folded'}"

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(json.dumps(self.folded).encode()).hexdigest()

    def close(self) -> None:
        self.closed = True


class Server:
    def __init__(self, tmp: Path, keys: dict | None = None, queue_timeout_s: float | None = 30.0, **build_kw: Any) -> None:
        keys_file = None
        if keys:
            keys_file = tmp / "keys.yaml"
            import yaml

            keys_file.write_text(yaml.safe_dump(keys))
        self.sessions: dict[str, FakeSession] = {}
        self.data = tmp / "data"

        def opener(path: Path) -> FakeSession:
            s = FakeSession(path, self.fair)
            self.sessions[path.name] = s
            return s

        self.app, self.tenants, self.fair = build(self.data, None, Model(), keys_file=str(keys_file) if keys_file else None,
                                                  queue_timeout_s=queue_timeout_s, opener=opener, **build_kw)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="error", access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def call(self, method: str, path: str, body: Any = None, key: str | None = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        given, headers = headers, {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        headers.update(given or {})
        headers = {k: v for k, v in headers.items() if v is not None}  # None: leave the header out
        c.request(method, path, body=raw if raw is not None else (json.dumps(body) if body is not None else None), headers=headers)
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def server(tmp_path):
    made = []

    def make(**kw) -> Server:
        s = Server(tmp_path, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


EL = {"id": "q1", "input": "Is the stance hawkish?", "metadata": {"shape": "letter", "task": "FOMC"}}


def test_answer_verdict_state_and_404(server):
    s = server()
    st, body = s.call("POST", "/v1/tenants/acme/answer", EL)
    assert st == 200 and body == {"id": "q1", "answer": "B", "prompt_tokens": 4, "branch": "b0"}, body
    st, state = s.call("GET", "/v1/tenants/acme/state")
    assert st == 200 and state["steps"] == 1 and state["pending"] == 1 and state["branches"] == 1
    assert s.call("GET", "/v1/tenants/acme/pending") == (200, {"pending": ["q1"]})
    st, v = s.call("POST", "/v1/tenants/acme/verdict", {"id": "q1", "reward": 1.0})
    assert st == 200 and v["folded"] is True and s.sessions["acme"].folded == [("q1", 1.0)]
    st, state2 = s.call("GET", "/v1/tenants/acme/state")
    assert state2["pending"] == 0 and state2["digest"] == v["digest"] != state["digest"]
    st, again = s.call("POST", "/v1/tenants/acme/verdict", {"id": "q1", "reward": 1.0})
    assert st == 404 and "not pending" in again["error"] and again["field"] == "$.id"
    assert s.call("POST", "/v1/tenants/acme/verdict", {"id": "nope", "reward": 0.0})[0] == 404
    assert s.sessions["acme"].folded == [("q1", 1.0)]  # folded exactly once
    assert s.sessions["acme"].corrections == [None]
    st, rows = s.call("GET", "/v1/tenants/acme/branches")
    assert st == 200 and rows[0]["branch"] == "b0" and rows[0]["label"] == "classify/stance"
    assert s.call("GET", "/healthz") == (200, {"ok": True, "tenants_open": 1})


@pytest.mark.parametrize("body, field", [
    ({"input": "x"}, "$.id"),
    ({"id": "q2"}, "$.input"),
    ({"id": "q2", "input": "x", "metadata": {"shape": "banana"}}, "$.metadata.shape"),
    ({"id": "q2", "input": "x", "verifier": "nope"}, "$.verifier"),
    ({"id": "q2", "input": "x", "colour": 1}, "$.colour"),
    ({"id": "q2", "input": "x", "metadata": {"tenant": "other"}}, "$.metadata.tenant"),
    ([1, 2], "$"),
])
def test_bad_answer_input_is_422_with_the_field_and_changes_nothing(server, body, field):
    s = server()
    st, err = s.call("POST", "/v1/tenants/acme/answer", body)
    assert st == 422 and err["field"] == field, err
    assert s.fair.waiting == 0 and "acme" not in s.sessions  # no session touched, no model call


@pytest.mark.parametrize("body, field", [
    ({"id": "q1", "reward": 1.5}, "$.reward"), ({"id": "q1", "reward": -0.1}, "$.reward"), ({"id": "q1"}, "$.reward"),
    ({"reward": 1.0}, "$.id"), ({"id": "q1", "reward": "high"}, "$.reward"), ({"id": "q1", "reward": 1, "x": 2}, "$.x"),
    # strict: a string or a boolean is not a reward (both were folded, as 1.0)
    ({"id": "q1", "reward": "1"}, "$.reward"), ({"id": "q1", "reward": True}, "$.reward"), ({"id": 5, "reward": 1.0}, "$.id"),
    ([1, 2], "$"),
])
def test_bad_verdict_is_422_and_the_answer_stays_pending(server, body, field):
    s = server()
    s.call("POST", "/v1/tenants/acme/answer", EL)
    st, err = s.call("POST", "/v1/tenants/acme/verdict", body)
    assert st == 422 and err["field"] == field, err
    assert s.sessions["acme"].pending_ids() == ["q1"] and s.sessions["acme"].folded == []


def test_not_json_and_bad_tenant(server):
    s = server()
    st, err = s.call("POST", "/v1/tenants/acme/answer", raw=b"{not json")
    assert st == 422 and err["field"] == "$"
    st, err = s.call("POST", "/v1/tenants/-x/answer", EL)
    assert st == 422 and err["field"] == "$.tenant" and not s.sessions
    assert s.call("GET", "/v1/tenants/a%2F..%2Fb/state")[0] in (404, 422)


def test_keys_401_403_and_nothing_of_b_is_touched(server, tmp_path):
    s = server(keys={"a": [KEY_A, KEY_A2], "b": KEY_B})
    assert s.call("POST", "/v1/tenants/a/answer", EL)[0] == 401
    assert s.call("POST", "/v1/tenants/a/answer", EL, key="wrong" * 5)[0] == 401
    assert s.call("GET", "/metrics")[0] == 401
    assert s.call("GET", "/healthz")[0] == 200 and s.call("GET", "/docs")[0] == 200
    assert s.call("POST", "/v1/tenants/a/answer", EL, key=KEY_A)[0] == 200
    assert s.call("POST", "/v1/tenants/a/verdict", {"id": "q1", "reward": 1}, key=KEY_A2)[0] == 200
    for method, path, body in [("POST", "/v1/tenants/b/answer", EL), ("POST", "/v1/tenants/b/verdict", {"id": "q1", "reward": 1}),
                               ("GET", "/v1/tenants/b/state", None), ("GET", "/v1/tenants/b/branches", None)]:
        st, err = s.call(method, path, body, key=KEY_A)
        assert st == 403 and err["error"] == "this key belongs to another tenant, not to 'b'"
    assert "b" not in s.sessions and not (s.data / "b").exists()
    assert s.call("GET", "/v1/tenants/b/state", key=KEY_B)[1]["steps"] == 0
    st, text = s.call("GET", "/metrics", key=KEY_B)
    assert st == 200 and 'status="403"' in text and KEY_A not in text and KEY_B not in text


def test_model_failures_are_502_504_and_the_server_goes_on(server):
    s = server(queue_timeout_s=0.3)
    st, err = s.call("POST", "/v1/tenants/acme/answer", dict(EL, input="FAIL please"))
    assert st == 502 and "backend said 500" in err["error"]
    st, err = s.call("POST", "/v1/tenants/acme/answer", dict(EL, input="BOOM"))
    assert st == 500
    # tenant x holds the model for 1 s; tenant y's call waits 0.3 s in the queue -> 504
    t = threading.Thread(target=s.call, args=("POST", "/v1/tenants/x/answer", dict(EL, input="SLOW")))
    t.start()
    time.sleep(0.3)
    st, err = s.call("POST", "/v1/tenants/y/answer", EL)
    t.join()
    assert st == 504 and "model timeout" in err["error"]
    assert s.sessions["y"].pending_ids() == []  # nothing recorded for the refused answer
    assert s.call("POST", "/v1/tenants/acme/answer", EL)[0] == 200  # still serving


def test_tenants_serialised_each_and_parallel_between(server):
    s = server()
    out: list[int] = []

    def client(tenant: str, i: int) -> None:
        out.append(s.call("POST", f"/v1/tenants/{tenant}/answer", dict(EL, id=f"q{i}"))[0])

    threads = [threading.Thread(target=client, args=(t, i)) for i in range(8) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [200] * 16
    assert s.sessions["a"].max_inside == 1 and s.sessions["b"].max_inside == 1
    assert sorted(s.sessions["a"].pending_ids()) == [f"q{i}" for i in range(8)]
    st, text = s.call("GET", "/metrics")
    assert 'rizz_model_calls_total{outcome="ok",tenant="a"} 8.0' in text
    assert 'rizz_model_tokens_total{direction="prompt",tenant="b"} 32.0' in text
    assert 'rizz_requests_total{endpoint="answer",status="200",tenant="a"} 8.0' in text
    assert 'rizz_request_seconds_bucket{endpoint="answer",le="+Inf"} 16.0' in text


def test_fair_model_serves_in_arrival_order():
    order: list[str] = []
    gate = threading.Event()

    class M(Model):
        def generate(self, messages, **kw):
            if messages[-1].content == "first":
                gate.wait(5)
            order.append(messages[-1].content)
            return super().generate(messages, **kw)

    fair = FairModel(M())
    threads = [threading.Thread(target=fair.generate, args=([Message("user", n)],), kwargs={"max_tokens": 1})
               for n in ("first", "t1", "t2", "t3")]
    for t in threads:
        t.start()
        time.sleep(0.1)  # arrival order: first, t1, t2, t3
    assert fair.waiting == 4
    gate.set()
    for t in threads:
        t.join()
    assert order == ["first", "t1", "t2", "t3"]
    slow = FairModel(M(), queue_timeout_s=0.1)
    gate.clear()
    holder = threading.Thread(target=slow.generate, args=([Message("user", "first")],), kwargs={"max_tokens": 1})
    holder.start()
    time.sleep(0.05)
    with pytest.raises(ModelQueueTimeout):
        slow.generate([Message("user", "t9")], max_tokens=1)
    gate.set()
    holder.join()
    assert slow.waiting == 0


def test_load_keys_errors_name_the_entry_not_the_key(tmp_path):
    from rizz.apps.serve.app import load_keys

    p = tmp_path / "k.yaml"
    for text, msg in [("a: short", "$.a[0]: expected a string of at least 16"), ("'../x': " + KEY_A, "not a valid tenant"),
                      (f"a: {KEY_A}\nb: {KEY_A}", "$.b[0]: the same key is also 'a'"), ("[1]", "$: expected a mapping")]:
        p.write_text(text)
        with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("$", r"\$")) as e:
            load_keys(str(p))
        assert KEY_A not in str(e.value)
    p.write_text(f"a: [{KEY_A}, {KEY_A2}]\nb: {KEY_B}")
    assert load_keys(str(p)) == {KEY_A: "a", KEY_A2: "a", KEY_B: "b"}


def test_cli_refuses_a_public_host_without_keys(tmp_path):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, ["serve", "--data", str(tmp_path / "d"), "--host", "0.0.0.0", "--model", "embedded"])
    assert res.exit_code == 2 and "loopback only" in res.output
    res = CliRunner().invoke(app, ["serve", "--data", str(tmp_path / "d"), "--keys", str(tmp_path / "none.yaml")])
    assert res.exit_code == 2 and "cannot read" in res.output


def test_openapi_lists_the_endpoints(server):
    s = server()
    st, spec = s.call("GET", "/openapi.json")
    assert st == 200
    assert {"/v1/tenants/{tenant}/answer", "/v1/tenants/{tenant}/verdict", "/v1/tenants/{tenant}/state",
            "/v1/tenants/{tenant}/branches", "/healthz", "/metrics"} <= set(spec["paths"])


def test_a_verdict_carries_its_correction_to_the_session(server):
    """``correction`` reaches ``Verdict.correction`` (what ``write.corrections`` writes); an empty
    one is refused with its field, and the answer stays pending."""
    s = server()
    assert s.call("POST", "/v1/tenants/acme/answer", EL)[0] == 200
    st, err = s.call("POST", "/v1/tenants/acme/verdict", {"id": "q1", "reward": 0.0, "correction": ""})
    assert st == 422 and err["field"] == "$.correction" and s.sessions["acme"].pending
    st, v = s.call("POST", "/v1/tenants/acme/verdict", {"id": "q1", "reward": 0.0, "correction": "A"})
    assert st == 200 and v["folded"] is True
    assert s.sessions["acme"].folded == [("q1", 0.0)] and s.sessions["acme"].corrections == ["A"]


def test_a_verdict_is_read_as_json_whatever_its_content_type(server):
    """The serve example's (docs/serve.md) `curl ... -d '{...}'` sends application/x-www-form-urlencoded: /answer read it,
    /verdict answered 422 ("Input should be a valid dictionary")."""
    s = server()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert s.call("POST", "/v1/tenants/acme/answer", raw=json.dumps(EL).encode(), headers=form)[0] == 200
    st, out = s.call("POST", "/v1/tenants/acme/verdict", raw=b'{"id": "q1", "reward": 1.0}', headers=form)
    assert st == 200 and out["folded"] is True, out
    assert s.sessions["acme"].folded == [("q1", 1.0)]


def test_a_body_over_the_limit_is_413_unread_and_changes_nothing(server):
    s = server(max_body_bytes=4096)
    big = dict(EL, input="x" * 5000)
    st, err = s.call("POST", "/v1/tenants/acme/answer", big)
    assert st == 413 and err == {"error": "request body over 4096 bytes (rizz serve --max-body-kib)", "field": "$"}
    assert "acme" not in s.sessions
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)  # chunked: no Content-Length to refuse by
    c.putrequest("POST", "/v1/tenants/acme/answer")
    c.putheader("Transfer-Encoding", "chunked")
    c.putheader("Content-Type", "application/json")
    c.endheaders()
    data = json.dumps(big).encode()
    for i in range(0, len(data), 1000):
        part = data[i:i + 1000]
        c.send(f"{len(part):x}\r\n".encode() + part + b"\r\n")
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 413 and "acme" not in s.sessions
    c.close()
    assert s.call("POST", "/v1/tenants/acme/answer", EL)[0] == 200  # a body under the limit goes through


def test_the_bearer_scheme_is_case_insensitive_and_strangers_add_no_series(server):
    s = server(keys={"a": KEY_A})
    assert s.call("GET", "/v1/tenants/a/state", headers={"Authorization": f"bearer {KEY_A}"})[0] == 200
    for name in ("initech", "umbrella", "zzz"):
        assert s.call("GET", f"/v1/tenants/{name}/state")[0] == 401
    assert s.call("GET", "/v1/tenants/a/nonsense-endpoint", key=KEY_A)[0] == 404
    st, text = s.call("GET", "/metrics", key=KEY_A)
    assert st == 200 and not any(n in text for n in ("initech", "umbrella", "zzz", "nonsense-endpoint")), text
    assert 'rizz_requests_total{endpoint="state",status="401",tenant="-"} 3.0' in text


def test_a_branch_with_no_answered_step_has_no_mean_reward():
    """inspect and /branches showed 0.0 for a branch nothing was answered in (as if every answer failed)."""
    from rizz.apps.serve.tenants import branch_rows

    (row,) = branch_rows(_State())
    assert row["answered"] == 0 and row["mean_reward"] is None


def test_a_tenant_folder_of_other_settings_names_data_not_out(tmp_path):
    """The library's RunDirMismatch text tells a CLI user to pick another --out; serve's folders come from --data."""
    from fastapi.testclient import TestClient

    from rizz.apps.serve.run import build
    from rizz.store.runlog import RunDirMismatch, SettingChange

    def opener(path):
        raise RunDirMismatch(root=path, changes=(SettingChange("policy", "default", "frozen"),))

    app, _, _ = build(tmp_path / "data", None, Model(), opener=opener)
    r = TestClient(app).get("/v1/tenants/acme/state")
    assert r.status_code == 409 and r.json()["error"].endswith("to run this policy, use another --data folder."), r.json()
    assert "--out" not in r.json()["error"]


def test_a_tenant_store_that_cannot_be_read_is_a_503_naming_it_not_a_500(tmp_path):
    """A damaged store.sqlite came back as 500 "internal error: RunStoreError"."""
    from fastapi.testclient import TestClient

    from rizz.apps.serve.run import build
    from rizz.store.runstore import RunStoreError

    store = tmp_path / "data" / "acme" / "store.sqlite"

    def opener(path):
        raise RunStoreError(path=store, kind="unreadable", reason="file is not a database")

    app, _, _ = build(tmp_path / "data", None, Model(), opener=opener)
    r = TestClient(app).get("/v1/tenants/acme/state")
    assert r.status_code == 503, r.json()
    assert r.json()["error"] == RunStoreError(path=store, kind="unreadable", reason="file is not a database").worded("serve")
    assert str(store) in r.json()["error"] and "--data" in r.json()["error"] and "--out" not in r.json()["error"]


def test_a_reposted_id_is_refused_with_409_and_answered_once(server):
    """Issue #29 §10: re-posting an id that was already folded was accepted as a new pending answer."""
    s = server()
    assert s.call("POST", "/v1/tenants/acme/answer", EL)[0] == 200
    st, err = s.call("POST", "/v1/tenants/acme/answer", EL)  # a retry while the answer is pending
    assert st == 409 and err["field"] == "$.id" and err["error"].startswith("id 'q1' was already answered at step 0, pending;"), err
    assert s.call("POST", "/v1/tenants/acme/verdict", {"id": "q1", "reward": 1.0})[0] == 200
    st, err = s.call("POST", "/v1/tenants/acme/answer", dict(EL, input="Is it dovish?"))  # the id again, after its verdict
    assert st == 409 and "'q1' was already answered at step 0, already folded" in err["error"] and "new id" in err["error"], err
    assert s.sessions["acme"].step_index == 1 and s.sessions["acme"].pending_ids() == []  # nothing answered again
    assert s.call("POST", "/v1/tenants/acme/answer", dict(EL, id="q2"))[0] == 200  # a new id goes through


def test_404_and_405_have_the_documented_error_shape(server):
    """Issue #29 §10: they were FastAPI's ``{"detail": ...}``."""
    s = server()
    st, err = s.call("GET", "/v1/nothing-here")
    assert (st, err) == (404, {"error": "GET /v1/nothing-here: Not Found", "field": None})
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("GET", "/v1/tenants/acme/answer")
    r = c.getresponse()
    body = json.loads(r.read())
    c.close()
    assert r.status == 405 and r.getheader("Allow") == "POST"
    assert body == {"error": "GET /v1/tenants/acme/answer: Method Not Allowed (allowed: POST)", "field": None}


def test_serve_answers_with_the_rendering_it_is_given(tmp_path):
    """Issue #29 §2: the README's serve example answered "" (a GGUF model's default raw rendering);
    ``rizz serve --rendering chat`` reaches every tenant's session and is recorded in its run.json."""
    import sys as _sys

    from fastapi.testclient import TestClient

    _sys.path.insert(0, str(Path(__file__).resolve().parent))
    from livekit import HashEmbedder, StubModel

    from rizz.apps.serve.run import build
    from rizz.formats.policy_file import load_policy

    class LocalStub(StubModel):
        name = "gguf:stub.gguf"  # a local model: raw by default

        def __init__(self):
            self.renderings = []

        def generate(self, messages, *, max_tokens, stop=(), rendering="chat"):
            self.renderings.append(rendering)
            return super().generate(messages, max_tokens=max_tokens, stop=stop, rendering=rendering)

    for given, expected in ((None, "raw"), ("chat", "chat")):
        model = LocalStub()
        app, tenants, _ = build(tmp_path / f"data-{given}", load_policy("default"), model, embedder=HashEmbedder(), rendering=given)
        with TestClient(app) as client:
            r = client.post("/v1/tenants/acme/answer", json={"id": "q1", "input": "What is the sum of 12 and 30?", "metadata": {"shape": "number"}})
        tenants.close()
        assert r.status_code == 200, r.json()
        assert model.renderings[-1] == expected  # the answer call (the judge's call is always chat)
        assert json.loads((tmp_path / f"data-{given}" / "acme" / "run.json").read_text())["rendering"] == expected


def test_cli_serve_takes_rendering_and_refuses_a_bad_one(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    got = {}
    monkeypatch.setattr("rizz.apps.cli_scale.load_model", lambda spec, **kw: Model())
    monkeypatch.setattr("rizz.apps.cli_scale.do_serve", lambda *a, **kw: got.update(kw))
    res = CliRunner().invoke(app, ["serve", "--data", str(tmp_path / "d"), "--rendering", "chat"])
    assert res.exit_code == 0 and got["rendering"] == "chat", res.output
    res = CliRunner().invoke(app, ["serve", "--data", str(tmp_path / "d"), "--rendering", "fancy"])
    assert res.exit_code == 2 and "--rendering 'fancy': expected one of raw, chat, chat-turns" in res.output
    help_text = " ".join(CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "--rendering" in help_text and "answered once" in help_text
