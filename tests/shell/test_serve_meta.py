"""``rizz serve``'s per-tenant ``run.json`` (and any ``Session.open``'s) records what ``rizz run``'s does about the model."""

from __future__ import annotations

import json

from stubs import HashEmbedder

from rizz.shell.models.anthropic_backend import AnthropicModel
from rizz.shell.serve.run import live_opener
from rizz.shell.serve.tenants import FairModel
from rizz.shell.session import Session


def _backend(model_id: str = "claude-haiku-4-5", **kw) -> AnthropicModel:
    return AnthropicModel(model_id, api_key="k", base_url="http://127.0.0.1:9", **kw)  # never called here


def test_tenant_run_json_records_request_options_like_rizz_run(tmp_path):
    backend = _backend(reasoning_tokens=2048)
    assert backend.request_options["send"]  # the table adds fields for this model
    open_ = live_opener("default", FairModel(backend), HashEmbedder())
    session = open_(tmp_path / "alice")
    try:
        meta = json.loads((tmp_path / "alice" / "run.json").read_text())
        assert meta["request_options"] == backend.request_options
        assert meta["model"] == backend.name and meta["kind"] == "session"  # the rest is kept
    finally:
        session.close()
    again = open_(tmp_path / "alice")  # a resumed tenant keeps its record, byte for byte
    again.close()
    assert json.loads((tmp_path / "alice" / "run.json").read_text()) == meta


def test_fair_model_passes_the_thinking_allowance_and_request_options_through():
    backend = _backend(reasoning_tokens=2048)
    fair = FairModel(backend)
    assert fair.reasoning_tokens == 2048 and fair.request_options == backend.request_options
    plain = FairModel(type("M", (), {"name": "m", "context_window": 8})())
    assert plain.reasoning_tokens == 0 and plain.request_options is None


def test_a_library_session_records_the_thinking_allowance_and_request_options(tmp_path):
    backend = _backend("claude-sonnet-4-5", reasoning_tokens=1024)
    Session.open(tmp_path / "app", policy="default", model=backend, embedder=HashEmbedder()).close()
    meta = json.loads((tmp_path / "app" / "run.json").read_text())
    assert meta["reasoning_tokens"] == 1024 and meta["request_options"] == backend.request_options
    Session.open(tmp_path / "plain", policy="default", model=FairModel(type("M", (), {"name": "m", "context_window": 8})()),
                 embedder=HashEmbedder()).close()
    meta = json.loads((tmp_path / "plain" / "run.json").read_text())
    assert meta["reasoning_tokens"] == 0 and "request_options" not in meta
