"""Episodes shown to a person: ``rizz diff`` and ``rizz inspect --episodes`` print request → calls
→ results → final answer, one line an event, long texts and long transcripts cut."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rizz.adapters.models.spec import load_model
from rizz.apps.cli import app
from rizz.engine.run import run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream, write_stream
from rizz.lab.episode_view import HEAD, MAX_EVENTS, TAIL, WIDTH, episode_lines, episodes_text

DATA = Path(__file__).resolve().parents[2] / "data"


def _oracle_run(tmp_path, els, embedder) -> Path:
    stream, out = tmp_path / "s.jsonl", tmp_path / "run"
    write_stream(stream, els)
    run_stream(stream, load_policy("frozen"), "frozen", out, load_model("oracle"), embedder, log=lambda m: None)
    return out


def test_inspect_episodes_reads_request_calls_results_final_answer(tmp_path, embedder) -> None:
    tau = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements[0]
    par = next(e for e in read_stream(DATA / "bfcl-mini" / "test.jsonl").elements if e.task == "parallel")
    out = _oracle_run(tmp_path, [tau, par], embedder)
    gold = json.loads(tau.reference)
    text = episodes_text(out)
    lines = text.splitlines()
    assert lines[0] == f"step 0 [{tau.id}] task {tau.task}: reward 1.000 (tau_db)"
    n_agent = len(gold["actions"]) + 1
    assert lines[1] == f"  episode: {n_agent} agent calls, 0 tool errors, 2 user turns, stop user_stop"
    assert lines[2] == "    user: Hi, I need help."
    first = gold["actions"][0]
    call = f"{first['name']}({', '.join(f'{k}={v!r}' for k, v in first['kwargs'].items())})"
    assert lines[3] == "    agent: " + (call if len(call) <= WIDTH else call[: WIDTH - 1] + "…")
    assert lines[4].startswith(f"    tool {first['name']}: ")
    final = " ".join(" ".join(gold["outputs"]).split()) or "Done."
    assert f"    final answer: {final[:WIDTH - 1]}" in text
    # a parallel BFCL reply: one agent line per call, then no tool results (single-turn), final (none)
    i = lines.index(f"step 1 [{par.id}] task parallel: reward 1.000 (bfcl_ast)")
    n_par = len(json.loads(par.reference))
    assert lines[i + 1] == "  episode: 1 agent call, 0 tool errors, 1 user turn, stop done"
    assert [ln.startswith("    agent: ") for ln in lines[i + 3: i + 3 + n_par]] == [True] * n_par
    assert lines[i + 3 + n_par] == "    final answer: (none)"
    # the CLI prints the same text; --json gives the rows
    res = CliRunner().invoke(app, ["inspect", str(out), "--episodes"])
    assert res.exit_code == 0 and res.output.strip() == text
    res = CliRunner().invoke(app, ["inspect", str(out), "--episodes", "--json"])
    rows = json.loads(res.output)
    assert [(r["id"], r["reward"], r["verifier"]) for r in rows] == [(tau.id, 1.0, "tau_db"), (par.id, 1.0, "bfcl_ast")]


def test_long_transcripts_and_texts_are_cut() -> None:
    events = [{"role": "user", "text": "start " + "x" * 500}]
    for k in range(20):
        events.append({"role": "assistant", "text": "", "calls": [["get", {"k": k}]]})
        events.append({"role": "tool", "name": "get", "arguments": {"k": k}, "result": f"r{k}", "error": k == 3})
    events.append({"role": "assistant", "text": "all done", "calls": []})
    ep = {"transcript": events, "model_calls": 21, "tool_errors": 1, "stop": "done"}
    lines = episode_lines(ep)
    assert len(events) > MAX_EVENTS
    assert lines[1] == "    user: start " + "x" * (WIDTH - 1 - len("start ")) + "…"
    hidden = len(events) - HEAD - TAIL
    assert lines[1 + HEAD] == f"    … {hidden} events not shown (--full shows them)"
    assert lines[-2] == "    agent: all done" and lines[-1] == "    final answer: all done"
    full = episode_lines(ep, full=True)
    assert len(full) == 1 + len(events) + 1 and "    tool error get: r3" in full


def test_inspect_episodes_of_a_missing_run_fails_clearly(tmp_path) -> None:
    res = CliRunner().invoke(app, ["inspect", str(tmp_path / "nope"), "--episodes"])
    assert res.exit_code != 0 and f"{tmp_path / 'nope'}: no such directory" in res.output


def test_the_first_wrong_call_is_said_only_where_a_failed_verdict_writes_it() -> None:
    """A newcomer read "first wrong call" under a verified episode in `rizz diff`."""
    ep = {"transcript": [{"role": "assistant", "text": "", "calls": [["get", {"k": 1}]]}], "model_calls": 1, "tool_errors": 0,
          "stop": "done", "wrong_call": "get(k=1)"}
    assert episode_lines(ep)[-1] == "    first wrong call (the anti-pattern if the verdict fails): get(k=1)"
    assert episode_lines(ep, reward=0.0)[-1] == "    first wrong call (written as the anti-pattern): get(k=1)"
    assert not any("wrong call" in line for line in episode_lines(ep, reward=1.0))
