"""The OpenAI-compatible backend turns a server's HTTP 4xx refusal into ``ModelRequestError``.

Every request goes through the ``openai`` SDK's real client to a scripted server on loopback;
the shapes of the error bodies are those llama.cpp, vLLM, Ollama and FastAPI servers send.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import openai
import pytest

from rizz.adapters.models import Message, ModelRequestError
from rizz.adapters.models.openai_backend import OpenAICompatModel

MSGS = [Message("user", "Sentiment of: a wonderful film?")]


def _completion(body: dict, text: str = "positive") -> dict:
    choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
              if "messages" in body else {"index": 0, "text": text, "finish_reason": "stop"})
    return {"id": "c1", "object": "chat.completion" if "messages" in body else "text_completion",
            "created": 0, "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}


def _server(http_server, status: int, payload, headers=None):
    def route(method, path, body):
        if path.startswith("/v1/chat/completions") or path.startswith("/v1/completions"):
            return status, payload, headers or {}
        return 404, {"error": "not found"}, {}

    return http_server(route)


@pytest.mark.parametrize(("status", "payload", "kind", "message"), [
    (400, {"error": {"code": 400, "type": "invalid_request_error",  # llama.cpp llama-server
                     "message": "the request exceeds the available context size,\n try increasing it"}},
     "invalid_request_error", "the request exceeds the available context size, try increasing it"),
    (404, {"error": {"message": 'model "qwen9" not found, try pulling it first', "type": "api_error",
                     "param": None, "code": None}},  # Ollama
     "api_error", 'model "qwen9" not found, try pulling it first'),
    (400, {"object": "error", "message": "The model `m9` does not exist.", "type": "NotFoundError",
           "param": None, "code": 404},  # vLLM (flat body)
     "NotFoundError", "The model `m9` does not exist."),
    (422, {"detail": "seed: Input should be a valid integer"},  # FastAPI validation (llama_cpp.server)
     "UnprocessableEntityError", "seed: Input should be a valid integer"),
])
def test_a_4xx_is_one_line_naming_model_status_and_message(http_server, status, payload, kind, message):
    srv = _server(http_server, status, payload)
    m = OpenAICompatModel(srv.url, "m9", max_retries=2)
    with pytest.raises(ModelRequestError) as info:
        m.generate(MSGS, max_tokens=8)
    assert str(info.value) == (f"openai:{srv.url}/v1#m9: the server refused the request"
                               f" (HTTP {status} {kind}: {message})")
    assert isinstance(info.value.__cause__, openai.APIStatusError)  # the SDK's error is kept
    assert len(srv.requests) == 1  # a refusal is not retried


def test_raw_rendering_refusal_is_the_same_error(http_server):
    srv = _server(http_server, 400, {"error": {"type": "invalid_request_error", "message": "no raw"}})
    with pytest.raises(ModelRequestError, match=r"#m9: the server refused the request \(HTTP 400 invalid_request_error: no raw\)$"):
        OpenAICompatModel(srv.url, "m9", max_retries=0).generate(MSGS, max_tokens=8, rendering="raw")
    assert srv.requests[0]["path"] == "/v1/completions"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_429_and_5xx_are_retried_then_raised_as_the_sdk_error(http_server, status):
    srv = _server(http_server, status, {"error": {"type": "server_error", "message": "busy"}},
                  {"retry-after-ms": "1"})
    with pytest.raises(openai.APIStatusError) as info:
        OpenAICompatModel(srv.url, "m9", max_retries=2).generate(MSGS, max_tokens=8)
    assert not isinstance(info.value, ModelRequestError) and info.value.status_code == status
    assert len(srv.requests) == 3  # first try + 2 retries


def test_cli_run_stops_on_a_400_with_one_line_and_exit_2(tmp_path, http_server, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import run_refused_second

    def route(method, path, body):
        if not path.startswith(("/v1/chat/completions", "/v1/completions")):
            return 404, {"error": "not found"}, {}  # no tokenizer route: the estimate counts
        if "Review 0" not in json.dumps(body):  # the second element's calls are refused
            return 400, {"error": {"type": "invalid_request_error", "message": "unsupported parameter: seed"}}, {}
        return 200, _completion(body), {}

    srv = http_server(route)
    code, err, steps = run_refused_second(tmp_path, monkeypatch, f"openai:{srv.url}#m9")
    assert code == 2, err
    first = f"openai:{srv.url}/v1#m9: the server refused the request (HTTP 400 invalid_request_error: unsupported parameter: seed)"
    assert first in err.splitlines()  # the whole message on one line of its own
    assert "run the same command again to resume" in err and "Traceback" not in err
    assert [s.get("id") for s in steps if s.get("kind", "step") == "step"][:1] == ["r0"]
