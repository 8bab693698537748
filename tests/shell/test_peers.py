"""The peers (issue #15): recording proxy, sampling pin, and each adapter on a few elements
against a stub OpenAI-compatible server (no model). The adapter tests need the peers installed
(`make peers`); they skip without them, except under CI (CI=true), where they must run."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from pathlib import Path

import pytest

from rizz.formats.policy_file import load_policy
from rizz.lab.peers.proxy import CallProxy
from rizz.lab.peers.run_peer import PEER_OPTIONS, PeerError, peer_python, run_peer


def _usage(messages) -> dict:
    n = sum(len(str(m.get("content", "")).split()) for m in messages)
    return {"prompt_tokens": n, "completion_tokens": 3, "total_tokens": n + 3}


def _chat(text: str, messages) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "stub",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": _usage(messages)}


def _stub(http_server, reply):
    """An OpenAI-compatible stub: ``reply(messages, body) -> text`` for chat completions."""

    def route(method, path, body):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "stub", "object": "model", "created": 0, "owned_by": "t"}]}, {}
        if path == "/v1/chat/completions":
            return 200, _chat(reply(body["messages"], body), body["messages"]), {}
        return 404, {"error": "not found"}, {}

    return http_server(route)


# -- proxy ------------------------------------------------------------------------------
def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_proxy_records_calls_by_kind_and_serves_repeats_from_its_cache(http_server, tmp_path):
    srv = _stub(http_server, lambda msgs, body: "echo " + msgs[-1]["content"])
    with CallProxy(srv.url + "/v1", cache=tmp_path / "c.sqlite") as proxy:
        msgs = [{"role": "user", "content": "one two three"}]
        a = _post(proxy.base_url("reflect") + "/chat/completions", {"model": "stub", "messages": msgs})
        b = _post(proxy.base_url("curate") + "/chat/completions", {"model": "stub", "messages": msgs})
        assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"] == "echo one two three"
        calls = proxy.take()
        assert [c["kind"] for c in calls] == ["reflect", "curate"]
        assert [c["cached"] for c in calls] == [False, True]
        assert calls[0]["prompt_tokens"] == 3 and calls[0]["completion_tokens"] == 3
        assert calls[0]["request"] == msgs and calls[0]["reply"] == "echo one two three"
        assert proxy.take() == []
    posts = [r for r in srv.requests if r["path"] == "/v1/chat/completions"]
    assert len(posts) == 1  # the repeat never reached the upstream


def test_proxy_passes_upstream_errors_through_and_counts_them(http_server):
    srv = http_server(lambda m, p, b: (500, {"error": {"message": "boom"}}, {}))
    with CallProxy(srv.url + "/v1") as proxy:
        with pytest.raises(urllib.error.HTTPError) as e:
            _post(proxy.base_url("answer") + "/chat/completions", {"model": "m", "messages": []})
        assert e.value.code == 500
        (call,) = proxy.take()
        assert call["status"] == 500 and call["kind"] == "answer"


def _anthropic_stub(http_server, reply):
    """A Messages API stub: ``reply(body) -> text``; usage 11 in / 2 out."""

    def route(method, path, body):
        if path.startswith("/v1/messages/count_tokens"):
            return 200, {"input_tokens": 7}, {}
        if path.startswith("/v1/messages"):
            return 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                         "content": [{"type": "text", "text": reply(body)}], "stop_reason": "end_turn",
                         "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 2}}, {}
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}, {}

    return http_server(route)


def test_proxy_answers_with_a_rizz_backend_when_there_is_no_upstream(http_server, tmp_path):
    """``--model anthropic:``: the peers' OpenAI-shaped calls are answered by rizz's Anthropic backend."""
    from rizz.adapters.models.anthropic_backend import AnthropicModel, price_usd

    srv = _anthropic_stub(http_server, lambda body: "echo " + body["messages"][-1]["content"])
    backend = AnthropicModel("claude-haiku-4-5", api_key="sk-ant-test-key", base_url=srv.url)
    with CallProxy(None, backend=backend, cache=tmp_path / "c.sqlite") as proxy:
        body = {"model": "claude-haiku-4-5", "max_tokens": 7, "stop": ["\n\n"], "temperature": 0.9,
                "messages": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]}]}
        a = _post(proxy.base_url("answer") + "/chat/completions", body)
        assert a["object"] == "chat.completion" and a["choices"][0]["message"] == {"role": "assistant", "content": "echo one two"}
        assert a["choices"][0]["finish_reason"] == "stop"
        assert a["usage"] == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
        b = _post(proxy.base_url("reflect") + "/chat/completions", body)  # the same body: from the cache
        assert b == a
        legacy = _post(proxy.base_url("memory") + "/completions", {"prompt": "three", "max_tokens": 3})
        assert legacy["choices"][0]["text"] == "echo three"
        with urllib.request.urlopen(proxy.base_url("answer") + "/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == backend.name
        calls = proxy.take()
        assert [c["kind"] for c in calls] == ["answer", "reflect", "memory"]
        assert [c["cached"] for c in calls] == [False, True, False]
        assert calls[0]["prompt_tokens"] == 11 and calls[0]["cost_usd"] == pytest.approx(price_usd("claude-haiku-4-5", 11, 2))
        with pytest.raises(urllib.error.HTTPError) as e:  # not JSON a completion can be built from
            _post(proxy.base_url("answer") + "/chat/completions", {"messages": "nope"})
        assert e.value.code == 400
    sent = [r for r in srv.requests if r["path"].startswith("/v1/messages") and "count_tokens" not in r["path"]]
    assert len(sent) == 2  # the cached repeat never reached the API
    assert sent[0]["body"]["system"] == "Be brief." and sent[0]["body"]["max_tokens"] == 7
    assert sent[0]["body"]["messages"] == [{"role": "user", "content": "one two"}]
    assert sent[0]["body"]["temperature"] == 0.0  # the backend's sampling, not the request's 0.9


def test_proxy_answers_a_tools_request_with_the_messages_apis_tools(http_server, tmp_path):
    """ACE under ``RIZZ_PEER_ACE_MODE=tools`` on ``--model anthropic:``: instructor's forced
    function call goes to the Messages API as a tool with ``tool_choice``, and its ``tool_use``
    block comes back as the ``tool_calls`` the openai SDK (instructor's client) reads; it was
    answered as plain text, which the TOOLS mode cannot parse."""
    import openai

    from rizz.adapters.models.anthropic_backend import AnthropicModel, price_usd

    schema = {"type": "object", "properties": {"reasoning": {"type": "string"}, "bullet_ids": {"type": "array", "items": {"type": "string"}}},
              "required": ["reasoning"]}

    def route(method, path, body):
        if path.startswith("/v1/messages") and "count_tokens" not in path:
            assert body["tools"] == [{"name": "ReflectorOutput", "description": "What went wrong.", "input_schema": schema}]
            assert body["tool_choice"] == {"type": "tool", "name": "ReflectorOutput"}
            return 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                         "content": [{"type": "tool_use", "id": "toolu_1", "name": "ReflectorOutput",
                                      "input": {"reasoning": "misread the unit", "bullet_ids": ["s-1"]}}],
                         "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 9}}, {}
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}, {}

    srv = http_server(route)
    backend = AnthropicModel("claude-haiku-4-5", api_key="sk-ant-test-key", base_url=srv.url)
    with CallProxy(None, backend=backend, cache=tmp_path / "c.sqlite") as proxy:
        client = openai.OpenAI(base_url=proxy.base_url("reflect"), api_key="x", max_retries=0)
        resp = client.chat.completions.create(
            model="claude-haiku-4-5", max_tokens=64,
            messages=[{"role": "system", "content": "You reflect."}, {"role": "user", "content": "Why was 12 wrong?"}],
            tools=[{"type": "function", "function": {"name": "ReflectorOutput", "description": "What went wrong.", "parameters": schema}}],
            tool_choice={"type": "function", "function": {"name": "ReflectorOutput"}})
        (call,) = resp.choices[0].message.tool_calls
        assert call.function.name == "ReflectorOutput"
        assert json.loads(call.function.arguments) == {"reasoning": "misread the unit", "bullet_ids": ["s-1"]}
        assert resp.choices[0].finish_reason == "tool_calls" and resp.usage.prompt_tokens == 40
        (rec,) = proxy.take()
        assert rec["kind"] == "reflect" and rec["cost_usd"] == pytest.approx(price_usd("claude-haiku-4-5", 40, 9))
        assert json.loads(rec["reply"]) == {"reasoning": "misread the unit", "bullet_ids": ["s-1"]}
        with pytest.raises(openai.BadRequestError, match="tool_choice 'sometimes'"):
            client.chat.completions.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}],
                                           tools=[{"type": "function", "function": {"name": "F", "parameters": schema}}],
                                           tool_choice="sometimes")
    sent = [r["body"] for r in srv.requests if r["path"].startswith("/v1/messages")]
    assert len(sent) == 1 and sent[0]["system"] == "You reflect."


def test_proxy_turns_a_model_failure_into_502(http_server):
    from rizz.adapters.models.anthropic_backend import AnthropicModel

    srv = http_server(lambda m, p, b: (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}, {}))
    backend = AnthropicModel("claude-haiku-4-5", api_key="sk-ant-test-key", base_url=srv.url)
    with CallProxy(None, backend=backend) as proxy:
        with pytest.raises(urllib.error.HTTPError) as e:
            _post(proxy.base_url("answer") + "/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert e.value.code == 502 and "anthropic:claude-haiku-4-5" in json.loads(e.value.read())["error"]["message"]
        assert proxy.take()[0]["status"] == 502


def test_peer_model_serves_anthropic_through_the_proxy(monkeypatch, tmp_path):
    from rizz.lab.peers.setup import peer_model

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    with peer_model("anthropic:claude-haiku-4-5", tmp_path / "r.sqlite") as pm:
        assert pm.upstream is None and pm.answer_with is pm.backend.backend and pm.model_id == "claude-haiku-4-5"
        assert pm.rendering == "chat" and pm.backend.name == "anthropic:claude-haiku-4-5"
    with pytest.raises(ValueError, match="peers need embedded, gguf:PATH, openai:BASE_URL"):
        with peer_model("oracle", None):
            pass


def test_peer_model_passes_kv_reuse_to_the_llama_server_under_one_name(monkeypatch, tmp_path):
    import rizz.lab.peers.setup as setup

    made = []

    class FakeServer:
        def __init__(self, gguf, *, kv_reuse=False):
            made.append((Path(gguf).name, kv_reuse))
            self.gguf, self.url = Path(gguf), "http://127.0.0.1:9"

        spec = "openai:http://127.0.0.1:9#smollm2"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(setup, "LlamaServer", FakeServer)
    monkeypatch.setattr(setup.SentTokenCounter, "of_file", classmethod(lambda cls, path: ("counter of", Path(path).name)))
    gguf = tmp_path / "m.gguf"
    with setup.peer_model(f"gguf:{gguf}?kv_reuse=0", None) as pm:  # the same answers: one name
        assert pm.backend.name == "llama_cpp.server:m" and pm.upstream == "http://127.0.0.1:9/v1"
        assert pm.backend.sent_counter == ("counter of", "m.gguf")  # the served file's template counts its prompts
    with setup.peer_model(f"gguf:{gguf}", None) as pm:
        assert pm.backend.name == "llama_cpp.server:m"
    assert made == [("m.gguf", False), ("m.gguf", True)]
    with pytest.raises(ValueError, match="reasoning=N does not apply to a local model"):
        with setup.peer_model(f"gguf:{gguf}?reasoning=8", None):
            pass


@pytest.mark.parametrize("rendering", ["raw", "chat"])
def test_mem0_prompt_is_frozens_prompt_with_the_memories_above(rendering):
    """Every element of the shipped TRACE and StreamBench-style slices (HotpotQA's evidence,
    instructions, every shape): mem0's prompt without memories is exactly the prompt rizz's
    ``frozen`` entry sends, under the same budget cap (a newcomer found HotpotQA's differed:
    no ``Evidence:`` header, no budget)."""
    from stubs import HashEmbedder, StubBackend

    from rizz.engine.session import Session
    from rizz.formats.streams import read_stream
    from rizz.lab.peers.run_peer import mem0_messages

    class Recorder(StubBackend):
        name, context_window = "stub:recorder", 8192

        def __init__(self):
            self.sent = []

        def reply(self, messages):
            self.sent.append(list(messages))
            return "A"

    root = Path(__file__).resolve().parents[2] / "data"
    elements = [el for f in ("trace-mini/test.jsonl", "streambench-mini/test.jsonl") for el in read_stream(root / f).elements
                if not el.context_only and not el.is_episode]
    assert any(el.evidence_items for el in elements) and len({el.task for el in elements}) >= 8
    for cap in (None, 300):
        model = Recorder()
        session = Session(load_policy("frozen"), model, HashEmbedder(), rendering=rendering, budget_cap=cap)
        for el in elements:
            model.sent.clear()
            p = session.answer(el)
            session.fold(p.id, 0.0)
            if not model.sent:  # the input alone overflows the cap: frozen sends nothing
                with pytest.raises(ValueError):
                    mem0_messages(el, [], rendering, model, cap)
                continue
            assert mem0_messages(el, [], rendering, model, cap) == model.sent[-1], (el.id, cap)
            with_memories = mem0_messages(el, ["a fact", "another"], rendering, model, cap)
            assert with_memories[0].content == "Memories:\n- a fact\n- another\n\n" + model.sent[-1][0].content


def test_a_failure_a_peer_logs_and_raises_counts_once_and_max_prompt_is_the_answer_call():
    """ACE's reflector: instructor logs the error it then raises (a newcomer saw totals 2x the
    failures); and a peer's "max prompt tokens" is its largest answer call, not its reflector's."""
    from rizz.lab.peers.report import distinct_failures, peer_results
    from rizz.lab.report import _policy_stats

    echo = [{"where": "ace.learn", "error": "IncompleteOutputException: The output is incomplete due to a max_tokens length limit."},
            {"where": "ace.llm_providers.instructor_client",
             "error": "Instructor validation failed: The output is incomplete due to a max_tokens length limit."}]
    other = {"where": "ace.agent", "error": "ValidationError: no JSON"}
    assert distinct_failures(echo) == echo[:1] and distinct_failures(echo + [other]) == [echo[0], other]
    calls = [{"kind": "answer", "prompt_tokens": 900, "completion_tokens": 5}, {"kind": "reflect", "prompt_tokens": 3600, "completion_tokens": 256}]
    recs = [{"id": f"q{i}", "verdict": {"reward": 0.0}, "answer": {"raw": "360"}, "calls": calls, "wall_s": 1.0,
             "peer": {"failures": echo}} for i in range(3)]
    f = peer_results({"peer:ace": recs})["peer:ace"]["failures"]
    assert f["steps"] == 3 and f["total"] == 3 and f["by_where"] == {"ace.learn": 3, "ace.llm_providers.instructor_client": 3}
    stats = _policy_stats(recs, {"policy": "peer:ace"}, 0)
    assert stats["max_prompt_tokens"] == 900  # the answer call, not the reflector's 3600
    assert stats["model_calls"]["by_kind"] == {"answer": 3, "reflect": 3}  # a peer's own kinds, no rizz judge/distill zeros


# -- server's sampling pin (no model needed) -----------------------------------------------
def test_sampling_pin_rewrites_completion_bodies_only():
    from rizz.lab.peers.server import PINNED, _PinSampling

    seen = {}

    async def app(scope, receive, send):
        msg = await receive()
        seen[scope["path"]] = (json.loads(msg["body"]) if msg["body"] else None,
                               dict(scope["headers"]).get(b"content-length"))

    async def drive(path, method, body):
        sent = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            return sent.pop(0)

        await _PinSampling(app)({"type": "http", "method": method, "path": path,
                                 "headers": [(b"content-length", str(len(body)).encode())]}, receive, None)

    body = json.dumps({"messages": [], "temperature": 0.7, "seed": 9, "top_p": 0.5}).encode()
    asyncio.run(drive("/v1/chat/completions", "POST", body))
    asyncio.run(drive("/v1/embeddings", "POST", body))
    pinned, length = seen["/v1/chat/completions"]
    assert pinned == {"messages": [], "top_p": 0.5, **PINNED}
    assert int(length) == len(json.dumps(pinned).encode())
    assert seen["/v1/embeddings"][0]["temperature"] == 0.7


# -- adapters ------------------------------------------------------------------------------
def _need(name: str) -> None:
    """Skip unless peer ``name``'s Python can import it (under CI, fail instead)."""
    import subprocess

    try:
        py = peer_python(name)
        module = {"ace": "ace", "mem0": "mem0"}[name]
        if subprocess.run([py, "-c", f"import {module}"], capture_output=True, timeout=300).returncode != 0:
            raise PeerError(f"{py} cannot import {module} (make peers / pip install 'rizz[peers]')")
    except PeerError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))


def _stream(tmp_path: Path) -> Path:
    rows = [
        {"id": "q0", "input": "What is 2 + 2?", "metadata": {"task": "math", "shape": "number"}, "reference": "4", "verifier": "exact_match"},
        {"id": "q1", "input": "What is 3 + 3?", "metadata": {"task": "math", "shape": "number"}, "reference": "6", "verifier": "exact_match"},
        {"id": "q2", "input": "Pick: A. cat B. dog", "metadata": {"task": "mc", "shape": "letter"}, "reference": "B", "verifier": "exact_match"},
    ]
    p = tmp_path / "s.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _run(tmp_path, srv, name, rendering="chat", options=None, limit=None):
    from rizz.adapters.embedder import bundled_model_dir
    from rizz.adapters.models import load_model

    model = load_model(f"openai:{srv.url}#stub", cache=tmp_path / "responses.sqlite")
    with CallProxy(srv.url + "/v1", cache=tmp_path / "peer.sqlite") as proxy:
        return run_peer(_stream(tmp_path), name, tmp_path / f"peer:{name}", model, proxy, "stub", rendering=rendering, options=options,
                        write_threshold=load_policy("default").write_threshold, embedder_path=str(bundled_model_dir()), limit=limit)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "log.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_mem0_adds_verified_interactions_and_puts_them_in_later_prompts(http_server, tmp_path):
    _need("mem0")

    def reply(msgs, body):
        text = " ".join(str(m["content"]) for m in msgs)
        if body.get("response_format", {}).get("type") == "json_object":  # mem0's extraction call
            return json.dumps({"memory": [{"text": "two plus two is 4"}]})
        if "2 + 2" in text:
            return "4"
        return "B" if "A. cat" in text else "7"

    summary = _run(tmp_path, _stub(http_server, reply), "mem0")
    recs = _records(tmp_path / "peer:mem0")
    assert [r["verdict"]["reward"] for r in recs] == [1.0, 0.0, 1.0]
    assert summary["mean_reward"] == pytest.approx(2 / 3) and summary["peer_package"].startswith("mem0ai==")
    # q0 was verified: one extraction call (kind memory) after its answer; q1 failed: none
    assert [[c["kind"] for c in r["calls"]] for r in recs] == [["answer", "memory"], ["answer"], ["answer", "memory"]]
    assert recs[0]["peer_memories"] == 0 and recs[1]["peer_memories"] == 1
    calls = [json.loads(x) for x in (tmp_path / "peer:mem0" / "calls.jsonl").read_text().splitlines()]
    q1_prompt = next(c for c in calls if c["id"] == "q1" and c["kind"] == "answer")["request"][0]
    assert "Memories:\n- two plus two is 4" in q1_prompt
    assert summary["peer_failures"] == 0 and summary["calls_by_kind"] == {"answer": 3, "memory": 2}


@pytest.mark.slow
def test_mem0_without_infer_stores_the_verified_interaction_as_it_is(http_server, tmp_path):
    _need("mem0")
    srv = _stub(http_server, lambda msgs, body: "4")
    summary = _run(tmp_path, srv, "mem0", options={"infer": False})
    recs = _records(tmp_path / "peer:mem0")
    assert summary["calls_by_kind"] == {"answer": 3}  # no extraction call
    assert recs[0]["peer_memories"] == 0 and recs[1]["peer_memories"] == 2  # q0's question and answer, one memory each
    calls = [json.loads(x) for x in (tmp_path / "peer:mem0" / "calls.jsonl").read_text().splitlines()]
    prompt = calls[1]["request"][0]
    assert "- What is 2 + 2?" in prompt and "- 4\n" in prompt  # stored raw, shown in q1's prompt


@pytest.mark.slow
def test_a_finished_peer_run_resumed_with_a_smaller_limit_is_refused(http_server, tmp_path):
    """As rizz's own runs: its summary would count more steps than the command's --limit."""
    _need("mem0")
    from rizz.store.runlog import RunDirMismatch

    srv = _stub(http_server, lambda msgs, body: "4")
    assert _run(tmp_path, srv, "mem0", options={"infer": False}, limit=3)["steps"] == 3
    before = (tmp_path / "peer:mem0" / "log.jsonl").read_bytes()
    with pytest.raises(RunDirMismatch) as err:
        _run(tmp_path, srv, "mem0", options={"infer": False}, limit=2)
    assert str(err.value).startswith(f"{tmp_path / 'peer:mem0'} already holds 3 finished steps, more than this command's --limit 2 ")
    assert (tmp_path / "peer:mem0" / "log.jsonl").read_bytes() == before


@pytest.mark.slow
def test_resume_with_other_settings_is_refused_naming_each_one(http_server, tmp_path):
    _need("mem0")
    from rizz.store.runlog import RunDirMismatch

    srv = _stub(http_server, lambda msgs, body: "4")
    _run(tmp_path, srv, "mem0", options={"infer": False})
    before = (tmp_path / "peer:mem0" / "log.jsonl").read_bytes()
    with pytest.raises(RunDirMismatch) as err:
        _run(tmp_path, srv, "mem0", options={"infer": True})
    msg = str(err.value)
    line = next(x for x in msg.splitlines() if x.strip().startswith("peer_options:"))
    assert "resume refused" in msg and "run has {" in line and "'infer': False" in line.split("this command has")[0]
    assert "'infer': True" in line.split("this command has")[1] and "stream_sha256" not in msg  # only what differs
    assert msg.endswith("\nUse a new --out directory.")  # peer options are not given back by an option
    assert (tmp_path / "peer:mem0" / "log.jsonl").read_bytes() == before  # nothing recorded was touched


@pytest.mark.slow
def test_a_restarted_peer_keeps_the_wall_time_of_the_steps_it_replays(http_server, tmp_path):
    """A newcomer saw a resumed ACE report 2 steps in 0.5 s: replayed steps now keep the wall
    time of the run that computed them."""
    _need("mem0")
    from rizz.adapters.embedder import bundled_model_dir
    from rizz.adapters.models import load_model

    srv = _stub(http_server, lambda msgs, body: json.dumps({"memory": []}) if body.get("response_format") else "4")
    model = load_model(f"openai:{srv.url}#stub", cache=tmp_path / "responses.sqlite")
    out = tmp_path / "peer:mem0"
    kw = dict(write_threshold=load_policy("default").write_threshold, embedder_path=str(bundled_model_dir()), log=lambda m: None)
    with CallProxy(srv.url + "/v1", cache=tmp_path / "peer.sqlite") as proxy:
        run_peer(_stream(tmp_path), "mem0", out, model, proxy, "stub", limit=2, **kw)
        first = _records(out)
        (out / "summary.json").unlink()  # as if stopped before its end
        s = run_peer(_stream(tmp_path), "mem0", out, model, proxy, "stub", limit=3, **kw)
    again = _records(out)
    assert [r["wall_s"] for r in again[:2]] == [r["wall_s"] for r in first]
    assert all("wall_s_replay" in r for r in again[:2]) and "wall_s_replay" not in again[2]  # step 2 was computed
    assert s["wall_s"] == pytest.approx(sum(r["wall_s"] for r in again), abs=0.02)


@pytest.mark.slow
def test_mem0_unparseable_extraction_is_a_counted_failure_not_a_crash(http_server, tmp_path):
    _need("mem0")
    srv = _stub(http_server, lambda msgs, body: "not json {" if body.get("response_format") else "4")
    summary = _run(tmp_path, srv, "mem0")
    assert summary["steps"] == 3 and summary["peer_failures"] >= 1
    recs = _records(tmp_path / "peer:mem0")
    assert any(f["where"].startswith("mem0") for f in recs[0]["peer"]["failures"])


def _ace_reply(agent_text):
    def reply(msgs, body):
        text = " ".join(str(m["content"]) for m in msgs)
        if "SkillManagerOutput" in text:
            return json.dumps({"update": {"reasoning": "r", "operations": [
                {"type": "ADD", "section": "math", "content": "Reply with the bare number."}]}})
        if "ReflectorOutput" in text:
            return json.dumps({"reasoning": "r", "correct_approach": "add", "key_insight": "numbers only"})
        return agent_text(text)
    return reply


@pytest.mark.slow
def test_ace_online_loop_answers_reflects_curates_and_grows_the_skillbook(http_server, tmp_path):
    _need("ace")

    def agent(text):
        ans = "4" if "2 + 2" in text else ("B" if "A. cat" in text else "5")
        return json.dumps({"reasoning": "think", "final_answer": ans})

    summary = _run(tmp_path, _stub(http_server, _ace_reply(agent)), "ace")
    recs = _records(tmp_path / "peer:ace")
    assert [r["answer"]["raw"] for r in recs] == ["4", "5", "B"]
    assert [r["verdict"]["reward"] for r in recs] == [1.0, 0.0, 1.0]
    assert [[c["kind"] for c in r["calls"]] for r in recs] == [["answer", "reflect", "curate"]] * 3
    assert summary["peer_failures"] == 0 and summary["peer_package"] == "ace-framework==0.7.1"
    book = json.loads((tmp_path / "peer:ace" / "peer" / "skillbook.json").read_text())
    assert "Reply with the bare number." in json.dumps(book)
    calls = [json.loads(x) for x in (tmp_path / "peer:ace" / "calls.jsonl").read_text().splitlines()]
    q1_reflect = next(c for c in calls if c["id"] == "q1" and c["kind"] == "reflect")
    assert "The expected answer is: 6" in json.dumps(q1_reflect["request"])  # the verifier's reference as ground truth
    q2_agent = next(c for c in calls if c["id"] == "q2" and c["kind"] == "answer")
    assert "Reply with the bare number." in json.dumps(q2_agent["request"])  # the skillbook reached the agent


@pytest.mark.slow
def test_ace_agent_that_never_returns_json_is_counted_and_scored_zero(http_server, tmp_path):
    _need("ace")
    summary = _run(tmp_path, _stub(http_server, _ace_reply(lambda text: "I think it is 4")), "ace")
    recs = _records(tmp_path / "peer:ace")
    assert summary["steps"] == 3 and summary["no_answer"] == 3 and summary["mean_reward"] == 0.0
    assert all(r["peer"]["failures"][0]["where"] == "ace.agent" for r in recs)
    # instructor retries the agent (1 + max_retries calls per step); nothing is learnt
    tries = 1 + PEER_OPTIONS["ace"]["max_retries"]
    assert all([c["kind"] for c in r["calls"]] == ["answer"] * tries for r in recs)


@pytest.mark.slow
def test_ace_in_tools_mode_sends_each_schema_as_a_named_tool_and_reads_the_call(http_server, tmp_path):
    """RIZZ_PEER_ACE_MODE=tools: every ACE role asks for its output as a named function (which
    llama.cpp's server decodes under that schema's grammar); the reply's tool call is read."""
    _need("ace")
    seen = []
    answers = {"q0": "4", "q1": "5", "q2": "B"}

    def route(method, path, body):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "stub", "object": "model", "created": 0, "owned_by": "t"}]}, {}
        name = body["tool_choice"]["function"]["name"]
        tool = next(t for t in body["tools"] if t["function"]["name"] == name)
        seen.append((name, sorted(tool["function"]["parameters"]["properties"])))
        text = " ".join(str(m["content"]) for m in body["messages"])
        args = {"SkillManagerOutput": {"update": {"reasoning": "r", "operations": [
                    {"type": "ADD", "section": "math", "content": "Reply with the bare number."}]}},
                "ReflectorOutput": {"reasoning": "r", "correct_approach": "add", "key_insight": "numbers only"},
                "AgentOutput": {"reasoning": "think", "final_answer": next(
                    (a for q, a in answers.items() if {"q0": "2 + 2", "q1": "3 + 3", "q2": "A. cat"}[q] in text), "?")}}[name]
        call = {"id": "c0", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "stub", "usage": _usage(body["messages"]),
                     "choices": [{"index": 0, "finish_reason": "tool_calls",
                                  "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}, {}

    summary = _run(tmp_path, http_server(route), "ace", options={"instructor_mode": "tools"})
    recs = _records(tmp_path / "peer:ace")
    assert [r["answer"]["raw"] for r in recs] == ["4", "5", "B"] and summary["peer_failures"] == 0
    assert [n for n, _ in seen] == ["AgentOutput", "ReflectorOutput", "SkillManagerOutput"] * 3
    assert "update" in dict(seen)["SkillManagerOutput"]  # the schema's nesting, which the 1.5B missed in md_json mode
    book = json.loads((tmp_path / "peer:ace" / "peer" / "skillbook.json").read_text())
    assert "Reply with the bare number." in json.dumps(book)
    calls = [json.loads(x) for x in (tmp_path / "peer:ace" / "calls.jsonl").read_text().splitlines()]
    assert json.loads(calls[0]["reply"])["final_answer"] == "4"  # the call's arguments stand as the reply's text
    assert json.loads((tmp_path / "peer:ace" / "run.json").read_text())["peer_options"]["instructor_mode"] == "tools"


def test_an_unknown_ace_mode_is_refused_naming_the_modes(tmp_path):
    with pytest.raises(PeerError, match=r"RIZZ_PEER_ACE_MODE='xml'.*md_json, tools"):
        run_peer(_stream(tmp_path), "ace", tmp_path / "out", None, None, "stub", options={"instructor_mode": "xml"})
    assert not (tmp_path / "out").exists()


def test_unknown_peer_is_a_clear_error():
    with pytest.raises(PeerError, match="unknown peer 'amem'.*peer:ace, peer:mem0"):
        peer_python("amem")


@pytest.mark.slow
def test_bench_with_a_peer_writes_the_peers_table(http_server, tmp_path):
    """frozen and peer:mem0 in one bench over the stub: one report, Δ vs default, failures."""
    _need("mem0")
    from rizz.adapters.embedder import Embedder
    from rizz.adapters.models import load_model
    from rizz.lab.bench import run_bench
    from rizz.lab.peers.setup import PeerModel

    srv = _stub(http_server, lambda msgs, body: json.dumps({"memory": []}) if body.get("response_format") else "4")
    model = load_model(f"openai:{srv.url}#stub", cache=tmp_path / "b" / "responses.sqlite")
    pm = PeerModel(model, srv.url + "/v1", "stub", "chat")
    res = run_bench(_stream(tmp_path), ["frozen", "default", "peer:mem0"], tmp_path / "b", model, Embedder(), peer_model=pm,
                    title="t", command="c", log=lambda m: None)
    peers = res["peers"]
    assert set(peers) == {"frozen", "default", "peer:mem0"}
    assert peers["peer:mem0"]["mean_reward"] == pytest.approx(1 / 3)  # "4" is right only for q0
    assert peers["peer:mem0"]["delta_vs_default"]["n"] == 3 and peers["peer:mem0"]["failures"]["total"] == 0
    assert peers["peer:mem0"]["calls_by_kind"] == {"answer": 3, "memory": 1}
    report = (tmp_path / "b" / "report.md").read_text()
    assert "## Peers side by side" in report and "| peer:mem0 | 0.333" in report


@pytest.mark.slow
def test_bench_with_a_peer_on_anthropic_reaches_one_model(http_server, monkeypatch, tmp_path):
    """--model anthropic:…: rizz's entries and mem0 are answered by the same Messages API."""
    _need("mem0")
    from rizz.adapters.embedder import Embedder
    from rizz.lab.bench import run_bench
    from rizz.lab.peers.setup import peer_model

    def reply(body):  # mem0's fact extraction (its system prompt) gets its JSON, every answer "4"
        return json.dumps({"memory": []}) if "memor" in str(body.get("system", "")).lower() else "4"

    srv = _anthropic_stub(http_server, reply)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    with peer_model("anthropic:claude-haiku-4-5", tmp_path / "b" / "responses.sqlite") as pm:
        res = run_bench(_stream(tmp_path), ["frozen", "peer:mem0"], tmp_path / "b", pm.backend, Embedder(), peer_model=pm,
                        title="t", command="c", log=lambda m: None)
    peers = res["peers"]
    assert peers["frozen"]["mean_reward"] == peers["peer:mem0"]["mean_reward"] == pytest.approx(1 / 3)
    assert peers["peer:mem0"]["calls_by_kind"] == {"answer": 3, "memory": 1} and peers["peer:mem0"]["failures"]["total"] == 0
    sent = [r for r in srv.requests if r["path"].startswith("/v1/messages") and "count_tokens" not in r["path"]]
    # one model for all: frozen's 3 answers; mem0's extraction through the proxy; mem0's 3 answers
    # (rizz's adapter asks rizz's backend, whose response cache already holds frozen's equal prompts)
    assert len(sent) == 4 and sum("memor" in str(r["body"].get("system", "")).lower() for r in sent) == 1
    assert all(r["body"]["model"] == "claude-haiku-4-5" for r in sent)
    calls = [json.loads(l) for l in (tmp_path / "b" / "peer:mem0" / "calls.jsonl").read_text().splitlines()]
    assert calls and all(c["cost_usd"] is not None for c in calls)


def test_bench_refusals_are_clear_and_leave_no_folder(tmp_path, monkeypatch):
    """A newcomer's reports: `-P ""`, `-P mem0`, a model that cannot load, a server that is down."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    def bench(*args):
        res = CliRunner().invoke(app, ["bench", str(_stream(tmp_path)), *args])
        return res.exit_code, " ".join(res.output.replace("│", " ").split())

    code, text = bench("-P", "", "--out", str(tmp_path / "a"))
    assert code == 2 and "give at least one policy or peer:NAME" in text and not (tmp_path / "a").exists()
    code, text = bench("-P", "frozen,mem0", "--out", str(tmp_path / "b"))
    assert code == 2 and "the peer mem0 is the entry peer:mem0" in text and not (tmp_path / "b").exists()
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, text = bench("-P", "frozen,peer:mem0", "--model", "anthropic:claude-haiku-4-5", "--out", str(tmp_path / "c"))
    assert code == 2 and "ANTHROPIC_API_KEY" in text and not (tmp_path / "c").exists()
    kept = tmp_path / "d"
    kept.mkdir()  # a folder the user made is not removed
    code, text = bench("-P", "frozen", "--model", "openai:http://127.0.0.1:9", "--out", str(kept))
    assert code == 2 and "cannot reach the server at http://127.0.0.1:9/v1" in text and kept.is_dir()


def test_bench_refuses_an_unknown_peer_before_writing(tmp_path):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    out = tmp_path / "b"
    res = CliRunner().invoke(app, ["bench", str(_stream(tmp_path)), "-P", "frozen,peer:amem", "--out", str(out)])
    text = " ".join(res.output.replace("│", " ").split())
    assert res.exit_code == 2 and "unknown peer 'amem'" in text and "peer:mem0" in text, text
    assert not out.exists()


def test_the_peer_settings_from_the_environment_and_their_refusals():
    from rizz.lab.peers.run_peer import env_options

    assert env_options("mem0", {}) == {} and env_options("ace", {}) == {}
    for raw, on in (("0", False), ("false", False), (" OFF ", False), ("No", False), ("1", True), ("TRUE", True), ("on", True)):
        assert env_options("mem0", {"RIZZ_PEER_MEM0_INFER": raw}) == {"infer": on}, raw
    with pytest.raises(PeerError, match=r"RIZZ_PEER_MEM0_INFER='nope': give 0 .* or 1 "):
        env_options("mem0", {"RIZZ_PEER_MEM0_INFER": "nope"})  # it was read as "on"
    assert env_options("ace", {"RIZZ_PEER_ACE_MODE": " Tools"}) == {"instructor_mode": "tools"}
    assert env_options("ace", {"RIZZ_PEER_ACE_MODE": "md_json"}) == {}  # ACE's own default: recorded as unset, so resumable
    with pytest.raises(PeerError, match=r"RIZZ_PEER_ACE_MODE='xml': .* one of md_json, tools"):
        env_options("ace", {"RIZZ_PEER_ACE_MODE": "xml"})
    assert env_options("ace", {"RIZZ_PEER_MEM0_INFER": "nope"}) == {}  # each peer reads its own


def test_bench_refuses_a_bad_peer_setting_before_writing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    monkeypatch.setattr("rizz.lab.peers.run_peer.peer_python", lambda name: "python")
    monkeypatch.setenv("RIZZ_PEER_ACE_MODE", "xml")
    out = tmp_path / "b"
    res = CliRunner().invoke(app, ["bench", str(_stream(tmp_path)), "-P", "frozen,peer:ace", "--out", str(out)])
    text = " ".join(res.output.replace("│", " ").split())
    assert res.exit_code == 2 and text.startswith("RIZZ_PEER_ACE_MODE='xml': ACE's structured-output mode is one of"), text
    assert not out.exists()


@pytest.mark.model
def test_the_peers_server_keeps_only_the_sampled_tokens_logits():
    """llama_cpp.server keeps every evaluated token's logits by default (a vocabulary-sized
    float32 row per prompt token, and a copy of them in every saved prompt state); rizz's server
    keeps the sampled token's only, as the in-process backend does."""
    pytest.importorskip("llama_cpp")
    from llama_cpp.server import app as server_app

    from rizz.adapters.models.embedded import PROMPT_CHUNK
    from rizz.lab.peers.server import MODEL_ALIAS, LlamaServer

    with LlamaServer(n_ctx=1024, n_threads=1) as srv:
        llama = server_app._llama_proxy._current_model
        reply = _post(srv.url + "/v1/chat/completions", {"model": MODEL_ALIAS, "max_tokens": 4,
                                                         "messages": [{"role": "user", "content": "Say yes. " * 100}]})
        assert reply["usage"]["prompt_tokens"] > PROMPT_CHUNK  # more tokens than one batch's rows
        assert llama._logits_all is False and llama.scores.shape[0] == PROMPT_CHUNK  # not n_ctx rows
