"""``rizz serve``'s per-tenant ``run.json`` (and any ``Session.open``'s) records what ``rizz run``'s does about the model."""

from __future__ import annotations

import json

from stubs import HashEmbedder

from rizz.adapters.models.anthropic_backend import AnthropicModel
from rizz.apps.serve.run import live_opener
from rizz.apps.serve.tenants import FairModel
from rizz.engine.session import Session


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


def test_reading_a_tenant_that_has_no_folder_creates_nothing(tmp_path):
    """GET state/branches/pending of a new tenant: the fresh state's view, and no folder made
    (a newcomer's report: a read used to open, and so create, the tenant's session)."""
    from stubs import ArithmeticModel

    from rizz.apps.serve.run import build

    data = tmp_path / "data"
    _, tenants, fair = build(data, "default", ArithmeticModel(), embedder=HashEmbedder())
    try:
        fresh = tenants.state("newbie")
        assert tenants.branches("newbie") == [] and tenants.pending("newbie") == []
        assert not (data / "newbie").exists() and tenants.open_tenants() == []
        assert fresh["steps"] == 0 and fresh["branches"] == 0 and fresh["pending"] == 0
        opened = live_opener("default", fair, HashEmbedder())(tmp_path / "elsewhere")
        try:  # the digest a fresh durable session starts from
            assert fresh["digest"] == opened.digest()
        finally:
            opened.close()
        tenants.answer("newbie", {"id": "q1", "input": "What is 2+2?"})  # a write creates the tenant
        after = tenants.state("newbie")
        assert (data / "newbie" / "log.jsonl").is_file() and tenants.open_tenants() == ["newbie"]
        assert after["steps"] == 1 and after["pending"] == 1
        assert tenants.state("other")["steps"] == 0 and not (data / "other").exists()
    finally:
        tenants.close()
