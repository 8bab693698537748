"""The whole agent loop through llama.cpp's OpenAI-compatible server with ``tools`` / ``tool_calls``.

``llama_cpp.server`` runs in-process on 127.0.0.1 with the embedded SmolLM2-135M GGUF and
``chat_format="chatml-function-calling"``; rizz's ``openai:`` backend drives BFCL-mini items
through :class:`~rizz.engine.native_agent.NativeToolAgent`. The 135M model mostly fails BFCL
(issue #13), so the test asserts what holds whatever it answers: the server's tool calls are
parsed into the log under the element's own tool names (dotted BFCL names included), the
verifier ran on each episode, and the log replays to the same digest with the server gone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rizz.adapters.agents.env import plain
from rizz.adapters.agents.episode import ToolEpisode
from rizz.adapters.verifiers.episodes import verify_episode
from rizz.engine.run import replay, run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: simple_python x2, multiple (dotted names: math.gcd), parallel: one-reply BFCL items.
IDS = ("bfcl-simple_python_200", "bfcl-simple_python_201", "bfcl-multiple_101", "bfcl-parallel_100")


def test_bfcl_episodes_through_llama_cpp_server_tools_then_replay_without_it(tmp_path, embedder) -> None:
    pytest.importorskip("llama_cpp")
    from rizz.adapters.models.openai_backend import OpenAICompatModel
    from rizz.lab.peers.server import MODEL_ALIAS, LlamaServer

    els = [e for e in read_stream(ROOT / "data" / "bfcl-mini" / "test.jsonl").elements if e.id in IDS]
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, els)
    with LlamaServer(n_ctx=4096, n_threads=1, chat_format="chatml-function-calling") as srv:
        model = OpenAICompatModel(srv.url, MODEL_ALIAS, context_window=4096)
        summary = run_stream(stream, load_policy("default"), "default", out, model, embedder, log=lambda m: None)
    assert summary["steps"] == len(IDS)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == list(IDS)
    assert json.loads((out / "run.json").read_text())["model"] == f"openai:{srv.url}/v1#{MODEL_ALIAS}"
    n_calls = 0
    for el, rec in zip(els, records):
        ep = ToolEpisode.from_json(rec["episode"])
        names = {plain(t)["name"] for t in el.tools}
        # calls came back as tool_calls and were parsed (names mapped back from the API's form)
        assert all(c.name in names for c in ep.calls), (el.id, ep.calls)
        n_calls += len(ep.calls)
        assert ep.model_calls == 1 and ep.stop == "done"  # a BFCL single-turn item ends after one reply
        agent_calls = [c for c in rec["calls"] if c["kind"] == "answer"]
        assert len(agent_calls) == 1 and not agent_calls[0]["usage_estimated"]  # the server's own usage figures
        assert agent_calls[0]["prompt_tokens"] > rec["episode"]["prompt_tokens_max"]  # + system turn + tools
        # the verifier ran on the logged episode: recomputing it gives the logged reward
        assert rec["verdict"]["verifier"] == "bfcl_ast"
        assert rec["verdict"]["reward"] == verify_episode(el, ep).reward
    assert n_calls >= len(IDS) - 1  # the grammar-bound handler makes calls parse; the model chose to call
    # replay refolds from the log alone: the server is stopped, no model or tool is called
    assert replay(out)["state_digest"] == summary["state_digest"]
