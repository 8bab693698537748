"""OpenAI-compatible backend against a real ``python -m llama_cpp.server`` (SmolLM2-135M)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

from rizz.adapters.models import Message, ModelUnavailableError, estimate_tokens, load_model
from rizz.adapters.models.openai_backend import OpenAICompatModel, api_base_url

SERVER_MODEL_ALIAS = "smollm2"
STARTUP_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def llama_server(free_port):
    """A llama_cpp.server on 127.0.0.1:<free port>, stopped after the module's tests."""
    pytest.importorskip("llama_cpp")
    from rizz.adapters.models.embedded import default_gguf_path

    port = free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(default_gguf_path()), "--model_alias", SERVER_MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False",
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{out[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not come up in time")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_api_base_url():
    assert api_base_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert api_base_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/v1"
    assert api_base_url("http://h:11434/v1/") == "http://h:11434/v1"
    assert api_base_url("https://h/api/openai/v1") == "https://h/api/openai/v1"
    with pytest.raises(ValueError):
        api_base_url("127.0.0.1:8000")


def test_no_tokenizer_route_falls_back_to_the_estimate(http_server):
    """A server without tokenize routes (Ollama, LM Studio): estimate, probed once."""

    def route(method, path, body):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "m1", "object": "model",
                                                     "created": 0, "owned_by": "x"}]}, {}
        return 404, {"error": "not found"}, {}

    srv = http_server(route)
    model = OpenAICompatModel(srv.url, max_retries=0)
    assert model.model == "m1" and model.name == f"openai:{srv.url}/v1#m1"
    text = "some words to count"
    assert model.count_tokens(text) == estimate_tokens(text)
    n = len(srv.requests)
    assert model.count_tokens(text) == estimate_tokens(text)
    assert len(srv.requests) == n  # route remembered: no more probes


def test_unreachable_server_without_model_id_is_a_clear_error(free_port):
    with pytest.raises(ModelUnavailableError, match=r"cannot reach the server at http://127\.0\.0\.1:\d+/v1 .*openai:BASE_URL#MODEL"):
        OpenAICompatModel(f"http://127.0.0.1:{free_port()}", max_retries=0, timeout_s=2)


@pytest.mark.model
@pytest.mark.slow
def test_chat_raw_and_token_count_against_llama_cpp_server(llama_server, embedded_model):
    model = load_model(f"openai:{llama_server}#{SERVER_MODEL_ALIAS}")
    assert model.name == f"openai:{llama_server}/v1#{SERVER_MODEL_ALIAS}"
    assert model.context_window == 8192

    chat = model.generate(
        [Message("user", "What is the capital of France? Answer in one word.")], max_tokens=12
    )
    assert "paris" in chat.text.lower()
    assert 10 < chat.prompt_tokens < 80 and 1 <= chat.completion_tokens <= 12
    assert chat.cost_usd is None and chat.model == model.name and chat.cached is False

    prompt = "1, 2, 3, 4, 5,"
    raw = model.generate([Message("user", prompt)], max_tokens=6, stop=[","], rendering="raw")
    assert raw.text.strip() == "6" and raw.finish_reason == "stop"
    # raw = no chat template: the server evaluated exactly the prompt's tokens
    assert raw.prompt_tokens == embedded_model.count_tokens(prompt)

    text = "The Committee decided to raise the target range."
    assert model.count_tokens(text) == embedded_model.count_tokens(text)
    assert model._count_route == "count"  # llama_cpp.server's /extras/tokenize/count


@pytest.mark.model
@pytest.mark.slow
def test_model_id_is_discovered_from_v1_models(llama_server):
    model = load_model(f"openai:{llama_server}")
    assert model.model == SERVER_MODEL_ALIAS


@pytest.mark.model
@pytest.mark.slow
def test_reasoning_allowance_reaches_a_real_server(llama_server):
    """``?reasoning=N`` adds N tokens to what the server may generate (issue #12 §1)."""
    model = load_model(f"openai:{llama_server}#{SERVER_MODEL_ALIAS}?reasoning=16")
    assert model.name.endswith("?reasoning=16") and model.reasoning_tokens == 16
    g = model.generate([Message("user", "1, 2, 3, 4, 5,")], max_tokens=8, rendering="raw")  # counts on
    assert g.finish_reason == "length" and g.completion_tokens == 8 + 16
    assert g.usage_estimated is False  # llama_cpp.server reports usage
