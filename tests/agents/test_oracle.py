"""Validation independent of model quality (issue #13): the oracle scores 1.0 on every shipped
item; a do-nothing agent scores 0 wherever the gold actions change the database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rizz.adapters.agents.env import make_environment
from rizz.adapters.agents.loop import run_episode
from rizz.adapters.agents.tools import ToolError
from rizz.adapters.models.oracle import NullAgent, OracleAgent, ScriptedUser
from rizz.adapters.verifiers.episodes import first_wrong_call, gold_digest, verify_episode
from rizz.formats.streams import read_stream

DATA = Path(__file__).resolve().parents[2] / "data"
TAU = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements
BFCL = read_stream(DATA / "bfcl-mini" / "test.jsonl").elements


def _run(el, agent):
    return run_episode(el, agent, make_environment(el.environment), max_steps=100, user=ScriptedUser())


@pytest.mark.parametrize("el", TAU + BFCL, ids=lambda e: e.id)
def test_oracle_scores_one_and_null_scores_zero(el) -> None:
    ok = _run(el, OracleAgent())
    assert verify_episode(el, ok).reward == 1.0
    null = _run(el, NullAgent())
    assert null.calls == ()
    changes = el.verifier != "tau_db" or gold_digest(el) != make_environment(el.environment).state_digest()
    assert changes  # every shipped task's gold changes the database (or is a BFCL item)
    assert verify_episode(el, null).reward == 0.0
    assert first_wrong_call(el, null) == "(no tool call)"


@pytest.mark.parametrize("el", TAU, ids=lambda e: e.id)
def test_every_gold_write_succeeds_on_our_tools(el) -> None:
    env = make_environment(el.environment)
    for action in json.loads(el.reference)["actions"]:
        try:
            env.call(action["name"], action["kwargs"])
        except ToolError as err:
            assert not action["name"].startswith(("cancel", "modify", "return", "exchange", "book", "update")), err


def test_wrong_write_fails_and_names_the_first_wrong_call() -> None:
    from rizz.adapters.agents.episode import Episode, ToolEpisode

    assert Episode is ToolEpisode  # the old name stays importable (users' code)
    el = next(e for e in TAU if e.environment["domain"] == "retail")
    gold = json.loads(el.reference)["actions"]
    env = make_environment(el.environment)
    for a in gold[:-1]:  # everything but the last gold write
        env.call(a["name"], a["kwargs"])
    wrong = ["get_order_details", {"order_id": "#W0000000"}]
    calls = [[a["name"], a["kwargs"]] for a in gold[:1]] + [wrong] + [[a["name"], a["kwargs"]] for a in gold[1:-1]]
    ep = ToolEpisode(({"role": "user", "text": "hi"}, {"role": "assistant", "text": "", "calls": calls}),
                 env.state_digest(), (), 1, 0, 0, "done")
    assert verify_episode(el, ep).reward == 0.0
    assert first_wrong_call(el, ep) == "get_order_details(order_id='#W0000000')"


def test_tau_digest_depends_on_content_not_history() -> None:
    el = next(e for e in TAU if e.environment["domain"] == "retail")
    a, b = make_environment(el.environment), make_environment(el.environment)
    user = el.metadata["user_id"]
    address = dict(a.call("get_user_details", {"user_id": user}) and json.loads(a.call("get_user_details", {"user_id": user}))["address"])
    assert a.state_digest() == b.state_digest()
    a.call("modify_user_address", {"user_id": user, **dict(address, city="Elsewhere")})
    assert a.state_digest() != b.state_digest()
    a.call("modify_user_address", {"user_id": user, **address})
    assert a.state_digest() == b.state_digest()


def test_tool_refusals_are_tool_errors() -> None:
    el = next(e for e in TAU if e.environment["domain"] == "retail")
    env = make_environment(el.environment)
    with pytest.raises(ToolError, match="not found"):
        env.call("get_order_details", {"order_id": "#W0000000"})
    with pytest.raises(ToolError, match="unknown tool"):
        env.call("drop_tables", {})
    with pytest.raises(ToolError, match="unexpected keyword|missing"):
        env.call("get_order_details", {"id": "#W1"})
    assert env.call("calculate", {"expression": "(2 + 3) * 4 / 8"}) == "2.5"
    with pytest.raises(ToolError):
        env.call("calculate", {"expression": "__import__('os')"})


class _TransferAgent:
    """Calls ``transfer_to_human_agents`` (first with a missing argument) on every reply."""

    def __init__(self) -> None:
        self.replies = 0

    def reply(self, el, transcript, env):  # noqa: ANN001, ANN201
        from rizz.adapters.agents.calls import ToolCall
        from rizz.adapters.agents.loop import AgentReply

        self.replies += 1
        args = {} if self.replies == 1 else {"summary": "the customer wants a human"}
        return AgentReply("", (ToolCall("transfer_to_human_agents", args),))


def test_a_successful_transfer_to_a_human_ends_a_tau_episode_as_in_tau_bench() -> None:
    """τ-bench ends an episode once ``transfer_to_human_agents`` runs (its ``terminate_tools``);
    a failed attempt does not (the Qwen 1.5B transferred 11 times in a row until max_steps)."""
    agent = _TransferAgent()
    ep = _run(TAU[0], agent)
    assert agent.replies == 2 and ep.stop == "transfer" and ep.tool_errors == 1
    assert [e["role"] for e in ep.transcript] == ["user", "assistant", "tool", "assistant", "tool"]
    assert ep.transcript[-1]["result"] == "Transfer successful" and not ep.transcript[-1]["error"]


class _LookupLoopAgent:
    """Calls ``find_user_id_by_email`` with one invented address on every reply."""

    def __init__(self) -> None:
        self.replies = 0

    def reply(self, el, transcript, env):  # noqa: ANN001, ANN201
        from rizz.adapters.agents.calls import ToolCall
        from rizz.adapters.agents.loop import AgentReply

        self.replies += 1
        return AgentReply("", (ToolCall("find_user_id_by_email", {"email": "nobody@example.com"}),))


@pytest.mark.parametrize("repeat_stop, replies, stop", [(2, 2, "repeat"), (3, 3, "repeat"), (0, 7, "max_steps")])
def test_the_same_failing_call_repeated_ends_an_episode(repeat_stop, replies, stop) -> None:
    """``repeat_stop``: the same calls all failing with the same results that many times in a
    row end the episode (the 1.5B looked up one invented address 27 times); 0 never does."""
    agent = _LookupLoopAgent()
    ep = run_episode(TAU[0], agent, make_environment(TAU[0].environment), max_steps=7, user=ScriptedUser(),
                     repeat_stop=repeat_stop)
    assert agent.replies == replies and ep.stop == stop and ep.tool_errors == replies
    assert all(e["result"].startswith("Error:") for e in ep.transcript if e["role"] == "tool")


class _SilentAgent:
    """Answers every customer line with an empty message (the 1.5B's reply after two tool errors)."""

    def __init__(self) -> None:
        self.replies = 0

    def reply(self, el, transcript, env):  # noqa: ANN001, ANN201
        from rizz.adapters.agents.loop import AgentReply

        self.replies += 1
        return AgentReply("", ())


class _RepeatingUser:
    """Opens, then says one line again and again; after ``vary`` replies it says something new each time."""

    def __init__(self, vary: int = 10**9) -> None:
        self.said, self.vary = 0, vary

    def reply(self, transcript):  # noqa: ANN001, ANN201
        self.said += 1
        return "I need to confirm the keyboard." if self.said <= self.vary else f"Line {self.said}."


@pytest.mark.parametrize("repeat_stop, vary, replies, stop", [(2, 10**9, 2, "repeat"), (3, 10**9, 3, "repeat"),
                                                              (0, 10**9, 7, "max_steps"), (2, 1, 7, "max_steps")])
def test_a_conversation_stuck_in_one_exchange_ends_the_episode(repeat_stop, vary, replies, stop) -> None:
    """The same message to the simulated user answered the same way ``repeat_stop`` times in a row
    ends the episode (the 1.5B said "" to a τ-bench customer 14 times, each answered by the same
    line: 30 agent and 31 customer calls for nothing); a customer who says something new does not."""
    agent, user = _SilentAgent(), _RepeatingUser(vary)
    ep = run_episode(TAU[0], agent, make_environment(TAU[0].environment), max_steps=7, user=user, repeat_stop=repeat_stop)
    assert (agent.replies, ep.stop) == (replies, stop), (agent.replies, ep.stop)
    assert ep.user_calls == 1 + agent.replies  # the opening line, then one reply to each message
