"""What an episode writes to memory as its input is what the agent saw.

A τ-bench agent never sees the task's brief (``el.input`` = ``el.user``, the simulated
customer's hidden instruction): it sees the customer's opening message. A verified example, a
correction and an anti-pattern of a τ-bench episode take that opening message, read from the
recorded transcript (so replay needs no model call), and the examples block a later agent is
shown holds it, not the brief. A BFCL episode's input stays the element's ``input`` (its first
user turn is that text).
"""

from __future__ import annotations

import json
from pathlib import Path

from rizz.adapters.agents.calls import ToolCall, format_call
from rizz.adapters.models.spec import load_model
from rizz.core import Verdict
from rizz.engine.agent_step import verify_episode_pending
from rizz.engine.model_agent import GREETING
from rizz.engine.run import replay
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream
from tests.agents.conftest import StubModel

DATA = Path(__file__).resolve().parents[2] / "data"
TAU = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements
BFCL = read_stream(DATA / "bfcl-mini" / "test.jsonl").elements
OPENING = "Hi, I need help with my order."


def _gold(el):
    return [ToolCall(a["name"], a["kwargs"]) for a in json.loads(el.reference)["actions"]]


def _customer_then_gold(el):
    """Customer: OPENING, then ###STOP###. Agent: ``el``'s gold calls, one a step, then its outputs."""
    def fn(prompt: str) -> str:
        if prompt.startswith("You are playing a customer"):
            return OPENING if prompt.endswith(GREETING) else "###STOP###"
        if "Tools:" not in prompt:
            return ""  # the judge, distillation
        script = [format_call(c) for c in _gold(el)]
        done = prompt.count("\nTool ")
        return script[done] if done < len(script) else (" ".join(json.loads(el.reference)["outputs"]) or "Done.")
    return StubModel(fn)


def _customer_then_wrong_call():
    return StubModel(lambda p: (OPENING if p.endswith(GREETING) else "###STOP###") if p.startswith("You are playing a customer")
                     else "think(thought='hmm')" if "Tools:" in p else "")


def _memory(state, store: str) -> list:
    return [r for b in state.branches.values() for r in getattr(b, store).records]


def test_tau_verified_example_input_is_the_customers_opening_not_the_brief(tmp_path, embedder) -> None:
    el = TAU[0]
    assert OPENING not in el.user and el.input == el.user
    s = Session.open(tmp_path / "live", policy=load_policy("default"), model=_customer_then_gold(el), embedder=embedder)
    p = s.answer(el)
    assert p.episode.transcript[0] == {"role": "user", "text": OPENING}
    assert p.step_input.text == OPENING
    s.fold(el.id, Verdict(1.0, "tau_db"))
    (example,) = _memory(s.state, "episodes")
    assert example.input == OPENING and el.user not in example.input
    assert example.answer.startswith(format_call(_gold(el)[0]))
    digest = s.digest()
    s.close()
    rec = json.loads((tmp_path / "live" / "log.jsonl").read_text().splitlines()[0])
    assert rec["input"]["text"] == OPENING  # logged: replay reads it back, no model call
    assert replay(tmp_path / "live")["state_digest"] == digest


def test_tau_anti_pattern_input_is_the_customers_opening(tmp_path, embedder) -> None:
    el = TAU[0]
    s = Session.open(tmp_path / "live", policy=load_policy("default"), model=_customer_then_wrong_call(), embedder=embedder)
    s.answer(el)
    s.fold(el.id, Verdict(0.0, "tau_db"))
    (anti,) = _memory(s.state, "anti_patterns")
    assert anti.input == OPENING and anti.answer == "think(thought='hmm')"
    assert not _memory(s.state, "episodes")
    s.close()


def test_tau_correction_input_is_the_customers_opening(tmp_path, embedder) -> None:
    el = TAU[0]
    model = _customer_then_wrong_call()
    s = Session.open(tmp_path / "live", policy=load_policy("corrections"), model=model, embedder=embedder)
    p = s.answer(el)
    verdict = verify_episode_pending(p, corrections=True)  # what `rizz run -P corrections` folds
    assert verdict.reward == 0.0 and verdict.correction is not None
    s.fold(el.id, verdict)
    (fixed,) = _memory(s.state, "episodes")
    assert fixed.input == OPENING and el.user not in fixed.input
    assert fixed.answer == verdict.correction and fixed.reward == 1.0
    digest = s.digest()
    s.close()
    n = len(model.prompts)
    assert replay(tmp_path / "live")["state_digest"] == digest and len(model.prompts) == n


def test_a_later_agent_is_shown_the_opening_not_the_brief(tmp_path, embedder) -> None:
    first, second = TAU[0], TAU[1]
    model = _customer_then_gold(first)
    s = Session.open(tmp_path / "live", policy=load_policy("default"), model=model, embedder=embedder)
    s.answer(first)
    s.fold(first.id, Verdict(1.0, "tau_db"))
    (example,) = _memory(s.state, "episodes")
    model.prompts.clear()
    p = s.answer(second)
    assert example.key in p.step_input.prompt_episode_keys  # the example was retrieved into the agent's prompt
    agent = [q for q in model.prompts if "Tools:" in q]
    assert agent and all(OPENING in q and first.user not in q for q in agent)
    s.close()


def test_bfcl_episode_input_stays_the_users_question(tmp_path, embedder) -> None:
    els = [next(e for e in BFCL if e.task == "simple_python"), next(e for e in BFCL if e.task == "multi_turn_base")]
    s = Session.open(tmp_path / "live", policy=load_policy("default"), model=load_model("oracle"), embedder=embedder)
    for el in els:
        p = s.answer(el)
        assert p.episode.transcript[0] == {"role": "user", "text": el.input} and p.step_input.text == el.input
        s.fold(el.id, Verdict(1.0, el.verifier))
    assert sorted(e.input for e in _memory(s.state, "episodes")) == sorted(el.input for el in els)
    s.close()
