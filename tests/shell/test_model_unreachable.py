"""A model server that cannot be reached stops a run with one line and exit 2, not a traceback
(found by a newcomer's try: an unresolvable API host printed ~200 lines and exited 1)."""
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from rizz.adapters.models import ModelConnectionError
from rizz.adapters.models.base import Message

MSGS = [Message("user", "Say yes.")]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # closed again on exit: connecting is refused


def test_openai_backend_unreachable_raises_model_connection_error():
    from rizz.adapters.models.openai_backend import OpenAICompatModel

    m = OpenAICompatModel(f"http://127.0.0.1:{_closed_port()}/v1", "x", max_retries=0, timeout_s=5)
    with pytest.raises(ModelConnectionError, match=r"openai:.*#x: cannot reach the server \(APIConnectionError"):
        m.generate(MSGS, max_tokens=4)


def test_anthropic_backend_unreachable_raises_model_connection_error():
    from rizz.adapters.models.anthropic_backend import AnthropicModel

    m = AnthropicModel("claude-haiku-4-5", api_key="k", base_url=f"http://127.0.0.1:{_closed_port()}",
                       max_retries=0, timeout_s=5, token_counting="estimate")
    with pytest.raises(ModelConnectionError, match=r"anthropic:claude-haiku-4-5: cannot reach the Messages API"):
        m.generate(MSGS, max_tokens=4)


def test_cli_run_against_an_unreachable_server_exits_2_in_one_message(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from rizz.apps import cli

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import HashEmbedder

    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    stream = tmp_path / "s.jsonl"
    stream.write_text(json.dumps({"id": "r0", "input": "Review: a wonderful film.", "metadata": {"shape": "label"},
                                  "reference": "positive", "verifier": "label_match"}) + "\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--policy", "frozen", "--out", str(out),
                                       "--model", f"openai:http://127.0.0.1:{_closed_port()}/v1#x"])
    err = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == 2, (res.exception, err)
    assert "cannot reach the server" in err  # at the first element: no log to name (issue #29 §6)
    assert "no step had finished, so there is nothing to keep; run the same command again to start" in err
    assert "Traceback" not in err
    assert not out.exists()  # nothing to keep, and nothing kept: the RUN_DIR it made is gone


def _episode_cli(tmp_path: Path, monkeypatch: Any, command: str, model: str) -> tuple[Any, str]:
    """``rizz run``/``bench`` of three bfcl-mini episode elements against ``model``: the result
    and everything it printed."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import HashEmbedder

    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    root = Path(__file__).resolve().parents[2]
    stream = tmp_path / "b.jsonl"
    stream.write_text("".join((root / "data/bfcl-mini/test.jsonl").read_text().splitlines(keepends=True)[:3]))
    policy = ["--policy", "default"] if command == "run" else ["-P", "frozen,default"]
    res = CliRunner().invoke(cli.app, [command, str(stream), *policy, "--out", str(tmp_path / "out"), "--model", model])
    return res, res.output + (res.stderr if res.stderr_bytes is not None else "")


@pytest.mark.parametrize("command", ["run", "bench"])
def test_cli_episode_stream_against_an_unreachable_server_exits_2_in_one_message(tmp_path, monkeypatch, command):
    """An episode stream (tools: the native tool-calling agent's own request) stops as a plain
    stream does; it was an openai.APIConnectionError traceback, exit 1."""
    res, err = _episode_cli(tmp_path, monkeypatch, command, f"openai:http://127.0.0.1:{_closed_port()}/v1#x")
    assert res.exit_code == 2, (res.exception, err)
    assert "openai:http://127.0.0.1:" in err and "#x: cannot reach the server (APIConnectionError" in err
    assert "no step had finished, so there is nothing to keep; run the same command again to start" in err
    assert "Traceback" not in err and isinstance(res.exception, SystemExit)
    assert not (tmp_path / "out").exists()  # a bench's out/frozen/ (run.json, lock, store) went too


@pytest.mark.parametrize("command", ["run", "bench"])
def test_cli_episode_stream_against_a_server_that_rejects_tools_exits_2_in_one_line(tmp_path, monkeypatch, http_server, command):
    """A server that takes no ``tools`` (llama.cpp's llama-server without --jinja answers 400)
    stops an episode stream with one line naming the server, the status and the rejected tools
    request, and what to do; it was an openai.BadRequestError traceback, exit 1."""
    def route(method, path, body):
        if isinstance(body, dict) and "tools" in body:
            return 400, {"error": {"code": 400, "message": "tools param requires --jinja flag", "type": "invalid_request_error"}}, {}
        return 404, {"error": "no"}, {}

    srv = http_server(route)
    res, err = _episode_cli(tmp_path, monkeypatch, command, f"openai:{srv.url}/v1#x")
    assert res.exit_code == 2, (res.exception, err)
    said = (f"openai:{srv.url}/v1#x: the server at {srv.url}/v1 rejected the tools request (HTTP 400 invalid_request_error: "
            "tools param requires --jinja flag); if it takes no tools (an episode's are sent as the API's tools, "
            "tool_choice auto), start it with tool-call support (llama.cpp's llama-server: --jinja; vLLM: --enable-auto-tool-choice "
            "--tool-call-parser NAME)")
    assert said in err.splitlines(), err
    assert "no step had finished, so there is nothing to keep; run the same command again to start" in err
    assert "Traceback" not in err and isinstance(res.exception, SystemExit)


def test_a_400_about_the_context_window_is_not_called_a_rejected_tools_request(tmp_path, monkeypatch, http_server):
    """llama.cpp's llama-server answers a prompt past its context with a 400: the line gives the
    server's message, without the advice for a server that takes no tools."""
    message = "the request exceeds the available context size, try increasing it"

    def route(method, path, body):
        if isinstance(body, dict) and "tools" in body:
            return 400, {"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}}, {}
        return 404, {"error": "no"}, {}

    srv = http_server(route)
    res, err = _episode_cli(tmp_path, monkeypatch, "run", f"openai:{srv.url}/v1#x")
    assert res.exit_code == 2, (res.exception, err)
    assert f"openai:{srv.url}/v1#x: the server refused the request (HTTP 400 exceed_context_size_error: {message})" in err.splitlines(), err
    assert "rejected the tools request" not in err and "Traceback" not in err


def _label_stream(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "input": f"Review {i}: a wonderful film.", "metadata": {"shape": "label"},
                                        "reference": "positive", "verifier": "label_match"}) + "\n" for i in range(n)))
    return path


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_failed_start_into_an_empty_folder_leaves_it_empty(tmp_path, monkeypatch, command):
    """An --out folder that was there but empty stays, and is empty again (its run.json, lock,
    store and unused response cache removed)."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import HashEmbedder

    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    out = tmp_path / "out"
    out.mkdir()
    policy = ["--policy", "frozen"] if command == "run" else ["-P", "frozen,default"]
    res = CliRunner().invoke(cli.app, [command, str(_label_stream(tmp_path / "s.jsonl", 2)), *policy, "--out", str(out),
                                       "--model", f"openai:http://127.0.0.1:{_closed_port()}/v1#x"])
    assert res.exit_code == 2, res.output
    assert out.is_dir() and list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_run_stopped_after_a_recorded_step_keeps_everything(tmp_path, monkeypatch, http_server, command):
    """A server that answers the first request and refuses the next: the step recorded and its
    paid reply stay (the folder is not a failed start), and the same command resumes it."""
    from typer.testing import CliRunner

    from rizz.apps import cli
    from rizz.store.runlog import RunDir

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import HashEmbedder

    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    asked: list[int] = []

    def route(method, path, body):
        if not path.startswith("/v1/chat/completions"):
            return 404, {"error": "no"}, {}
        asked.append(1)
        if len(asked) > 1:
            return 400, {"error": {"code": 400, "message": "no more", "type": "invalid_request_error"}}, {}
        return 200, {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "positive"}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}, {}

    srv = http_server(route)
    out = tmp_path / "out"
    policy = ["--policy", "frozen"] if command == "run" else ["-P", "frozen"]
    res = CliRunner().invoke(cli.app, [command, str(_label_stream(tmp_path / "s.jsonl", 2)), *policy, "--out", str(out),
                                       "--model", f"openai:{srv.url}/v1#x"])
    assert res.exit_code == 2, res.output
    run_dir = out if command == "run" else out / "frozen"
    assert [r["id"] for r in RunDir(run_dir).records() if r.get("kind") == "step"] == ["r0"]
    assert (run_dir / "run.json").is_file() and (out / "responses.sqlite").is_file()


def test_discard_unstarted_keeps_a_folder_whose_cache_holds_a_reply(tmp_path):
    """A paid reply is kept, and with it the folder; without it the unstarted folder goes."""
    from rizz.adapters.models.base import Generation
    from rizz.adapters.models.cache import ResponseCache
    from rizz.engine.run import discard_unstarted

    for held in (True, False):
        root = tmp_path / str(held)
        root.mkdir()
        (root / "run.json").write_text(json.dumps({"policy": "frozen"}))
        (root / "log.jsonl").write_text("")
        cache = ResponseCache(root / "responses.sqlite")
        if held:
            cache.put("k" * 64, Generation(text="yes", prompt_tokens=3, completion_tokens=1, latency_s=0.1, cost_usd=None, model="m", finish_reason="stop"))
        cache.close()
        assert discard_unstarted(root) is (not held)
        assert root.exists() is held
    assert discard_unstarted(tmp_path / "absent") is False
