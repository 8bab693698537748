"""How an agent's prompt shows solved examples (agents.example_values, agents.examples_offered_tools):
the calls' values as {parameter}, examples calling tools the item is not offered left out, memory unchanged."""

from __future__ import annotations

import attrs
import pytest

from rizz.adapters.agents.calls import ToolCall
from rizz.core.policy import AgentPolicy, CompilerPolicy
from rizz.core.records import Episode
from rizz.core.retrieval import Retrieved, Scored
from rizz.engine.agent_prompt import fit_episode, placeholder_calls, trajectory_calls
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import StreamElement

TOOLS = [{"name": "Events_3_FindEvents", "description": "Find events", "parameters": {"type": "dict", "properties": {}}},
         {"name": "requests.get", "description": "GET", "parameters": {"type": "dict", "properties": {}}}]


def _episode(key: str, inp: str, answer: str) -> Scored:
    return Scored(Episode(key=key, input=inp, answer=answer, reward=1.0, scope=None, step=0), 0.9, "b0")


RETRIEVED = Retrieved(episodes=(
    _episode("k-events", "Music in San Diego, CA on 05/05/2023?", "Events_3_FindEvents(city='San Diego, CA', date='05/05/2023', event_type='Music')"),
    _episode("k-alarm", "My alarms, user 123?", "Alarm_1_GetAlarms(user_id='user123')"),
    _episode("k-get", "nodes of fab-ed", "requests_get(url='https://x/nodes?fabricName=fab-ed')"),
    _episode("k-none", "hello", "(no tool call) -> Hi, how can I help?"),
))
EL = StreamElement(id="e1", input="Find any Music events happening in Los Angeles on 04/07/2023?", tools=TOOLS)
TRANSCRIPT = [{"role": "user", "text": EL.input}]


def _prompt(agents: AgentPolicy | None):
    return fit_episode(RETRIEVED, EL, TRANSCRIPT, CompilerPolicy(), lambda t: len(t.split()), 4096, agents=agents)[0]


def test_trajectory_calls_reads_calls_and_final() -> None:
    calls, rest = trajectory_calls("get_user(user_id='u1'); exchange(note='a -> b', ids=['1', '2']) -> Done -> ok")  # type: ignore[misc]
    assert calls == (ToolCall("get_user", {"user_id": "u1"}), ToolCall("exchange", {"note": "a -> b", "ids": ["1", "2"]}))
    assert rest == " -> Done -> ok"
    assert trajectory_calls("(no tool call) -> Hi") is None
    assert trajectory_calls("get_user(user_id='u1'); exch...") is None  # cut inside its calls
    assert placeholder_calls(calls) == "get_user(user_id={user_id}); exchange(note={note}, ids={ids})"


def test_default_agents_policy_shows_examples_as_stored() -> None:
    assert AgentPolicy().example_values == "shown" and not AgentPolicy().examples_offered_tools
    p = _prompt(AgentPolicy())
    assert p.item_ids("examples") == ("k-events", "k-alarm", "k-get", "k-none")
    assert "city='San Diego, CA'" in p.text and "Alarm_1_GetAlarms(user_id='user123')" in p.text
    assert p.text == _prompt(None).text


def test_placeholders_hide_values_keep_calls_and_final() -> None:
    p = _prompt(AgentPolicy(example_values="placeholders"))
    assert p.item_ids("examples") == ("k-events", "k-alarm", "k-get", "k-none")
    assert "Events_3_FindEvents(city={city}, date={date}, event_type={event_type})" in p.text
    assert "San Diego, CA'" not in p.text.split("Input:")[1].split("\n")[1]  # the answer line holds no value
    assert "Alarm_1_GetAlarms(user_id={user_id})" in p.text and "user123" not in p.text
    assert "(no tool call) -> Hi, how can I help?" in p.text  # unreadable calls: as stored
    assert "Input: Music in San Diego, CA on 05/05/2023?" in p.text  # the request itself is kept


def test_offered_tools_leave_out_examples_of_other_tools() -> None:
    p = _prompt(AgentPolicy(examples_offered_tools=True))
    # requests.get is offered as requests_get too (a backend's sanitised name); the alarm tool is not offered
    assert p.item_ids("examples") == ("k-events", "k-get", "k-none")
    assert "Alarm_1_GetAlarms" not in p.text
    no_tools = attrs.evolve(EL, tools=None)
    assert fit_episode(RETRIEVED, no_tools, TRANSCRIPT, CompilerPolicy(), lambda t: len(t.split()), 4096,
                       agents=AgentPolicy(examples_offered_tools=True))[0].item_ids("examples") == ("k-events", "k-alarm", "k-get", "k-none")


def test_policy_fields_load_and_leave_default_digest(tmp_path) -> None:
    from rizz.core.serialize import canonical_json, digest

    f = tmp_path / "p.yaml"
    f.write_text("extends: default\nname: procedure\nagents:\n  example_values: placeholders\n  examples_offered_tools: true\n")
    pol = load_policy(str(f))
    assert pol.agents.example_values == "placeholders" and pol.agents.examples_offered_tools
    assert digest(attrs.evolve(pol, agents=AgentPolicy(), name="default")) == digest(load_policy("default"))
    assert "example_values" not in canonical_json(load_policy("default"))  # a default value is left out: old digests hold
    with pytest.raises(ValueError, match="example_values"):
        AgentPolicy(example_values="masked")
