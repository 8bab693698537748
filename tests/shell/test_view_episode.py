"""rizz view of tool-using episodes: each agent step's prompt shows the examples as the agent was
shown them (agents.examples_offered_tools, agents.example_values), and the memory browser names
the steps whose agent prompts used an example."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rizz.engine.run import run_stream
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import StreamElement, write_stream
from rizz.lab.view.runfold import view_run
from tests.shell.stubs import StubBackend


def _tool(name: str) -> dict:
    return {"name": name, "description": name,
            "parameters": {"type": "dict", "required": ["city"], "properties": {"city": {"type": "string", "description": "city"}}}}


def _el(i: str, text: str, tool: str, city: str) -> StreamElement:
    return StreamElement(id=i, input=text, tools=[_tool(tool)], reference=json.dumps([{tool: {"city": [city]}}]),
                         verifier="bfcl_ast", environment={"name": "bfcl"})


#: Weather in Paris (verified: an example calling get_weather), then weather in Rome (get_weather
#: offered) and time in Rome (get_time only: the example calls a tool it is not offered).
ELEMENTS = [_el("w1", "What is the weather in Paris?", "get_weather", "Paris"),
            _el("w2", "What is the weather in Rome?", "get_weather", "Rome"),
            _el("t3", "What time is it in Rome?", "get_time", "Rome")]


class OneBranchEmbedder:
    """Every text on one axis: every element routes to one branch."""

    name, dim = "stub:one-axis", 8

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        out[:, 0] = 1.0
        return out


class CallModel(StubBackend):
    """The agent: the right call for the request, then no more (single-turn BFCL)."""

    name, context_window = "stub:caller", 8192

    def reply(self, messages) -> str:
        text = "\n\n".join(m.content for m in messages)
        if "Tools:" not in text:
            return ""
        tool = "get_weather" if "weather" in text.rsplit("User:", 1)[1] else "get_time"
        return f"{tool}(city='{'Paris' if 'Paris' in text.rsplit('User:', 1)[1] else 'Rome'}')"


def _run(tmp_path: Path, agents: str) -> tuple[list[dict], dict]:
    pol = tmp_path / "p.yaml"
    pol.write_text(f"extends: default\nname: p\nagents: {{{agents}}}\n")
    write_stream(tmp_path / "s.jsonl", ELEMENTS)
    s = run_stream(tmp_path / "s.jsonl", load_policy(str(pol)), str(pol), tmp_path / "run", CallModel(), OneBranchEmbedder(),
                   log=lambda m: None)
    assert s["mean_reward"] == 1.0
    return [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()], view_run(tmp_path / "run")


def _examples(step: dict, view: dict) -> list[tuple[str, str]]:
    """(item key, text as shown) of the examples block of ``step``'s prompt."""
    assert step["prompt"] is not None and step["prompt"]["episode"]
    return [(view["items"][it["m"]]["key"], it["t"]) for block, items in step["prompt"]["sections"] if block == "examples" for it in items]


@pytest.mark.parametrize("offered", [False, True])
def test_an_agent_steps_prompt_shows_the_examples_the_agent_was_shown(tmp_path, offered) -> None:
    log, view = _run(tmp_path, f"examples_offered_tools: {str(offered).lower()}")
    example = log[0]["answer"]["extracted"]
    assert example.startswith("get_weather(city='Paris')")
    paris = next(i for i, it in enumerate(view["items"]) if it["kind"] == "episode" and it["input"] == ELEMENTS[0].input)
    key = view["items"][paris]["key"]
    assert _examples(view["steps"][0], view) == []
    assert _examples(view["steps"][1], view)[0] == (key, f"Input: {ELEMENTS[0].input}\nAnswer: {example}")  # get_weather offered
    time_step = [k for k, _ in _examples(view["steps"][2], view)]
    assert (key in time_step) == (not offered)  # get_time only: offered_tools leaves the get_weather example out
    assert [k for k, _ in _examples(view["steps"][2], view)] == log[2]["prompt"]["episode_keys"]
    assert view["items"][paris]["uses"] == ([1] if offered else [1, 2])  # the memory browser: the prompts that showed it
    assert "get_time" in view["steps"][2]["prompt"]["text"]  # the logged prompt as sent


def test_placeholders_show_the_examples_calls_with_parameters_not_values(tmp_path) -> None:
    log, view = _run(tmp_path, "example_values: placeholders")
    shown = _examples(view["steps"][1], view)
    assert [k for k, _ in shown] == log[1]["prompt"]["episode_keys"] and shown
    assert shown[0][1] == f"Input: {ELEMENTS[0].input}\nAnswer: get_weather(city={{city}})"
    assert shown[0][1] in view["steps"][1]["prompt"]["text"]  # as the agent's prompt held it
    assert "city='Paris'" not in view["steps"][1]["prompt"]["text"]
