"""Episode elements in the stream format (issue #13): read-time validation with FILE:LINE and field."""

from __future__ import annotations

import json

import pytest

from rizz.formats.streams import StreamElement, StreamError, dumps_element, element_to_json, read_stream

TOOL = {"name": "get_order", "description": "Order details.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}


def _episode(**over):
    obj = {"id": "e1", "input": "Where is my order #1?", "tools": [TOOL], "user": "You are Ann; order #1.",
           "environment": {"name": "tau_bench", "domain": "retail"},
           "reference": json.dumps({"actions": [], "outputs": []}), "verifier": "tau_db"}
    obj.update(over)
    return {k: v for k, v in obj.items() if v is not None}


def _read(tmp_path, *objs):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path, read_stream(path)


def test_episode_round_trip_and_old_lines_unchanged(tmp_path) -> None:
    plain = {"id": "p", "input": "2+2?", "reference": "4", "verifier": "exact_match"}
    _, read = _read(tmp_path, _episode(), plain)
    ep, single = read.elements
    assert ep.is_episode and not single.is_episode
    assert ep.tools[0]["name"] == "get_order" and ep.user == "You are Ann; order #1."
    assert ep.environment["domain"] == "retail" and ep.turns is None
    assert set(element_to_json(single)) == {"id", "input", "instruction", "metadata", "evidence", "reference",
                                             "verifier", "context_only"}
    again = StreamElement(**{k: getattr(ep, k) for k in ("id", "input", "tools", "user", "environment", "reference", "verifier")})
    assert dumps_element(again) == dumps_element(ep)
    assert json.loads(dumps_element(ep))["tools"] == [TOOL]


@pytest.mark.parametrize("over, field, words", [
    ({"tools": []}, "tools", "non-empty list"),
    ({"tools": [{"description": "x"}]}, "tools[0].name", "a string"),
    ({"tools": [TOOL, TOOL]}, "tools[1].name", "repeated tool name"),
    ({"tools": [dict(TOOL, parameters=[1])]}, "tools[0].parameters", "JSON-schema object"),
    ({"turns": ["next"]}, "user", "not both"),
    ({"user": None, "turns": "abc"}, "turns", "a list of strings"),
    ({"user": None, "turns": ["ok", 3], "verifier": "bfcl_multi_turn"}, "turns[1]", "a string"),
    ({"user": ""}, "user", "non-empty"),
    ({"environment": {"domain": "retail"}}, "environment.name", "a string"),
    ({"environment": None}, "environment", "required when 'verifier' is 'tau_db'"),
    ({"tools": None}, "tools", "required when 'verifier' is 'tau_db'"),
    ({"user": None}, "user", "required when 'verifier' is 'tau_db'"),
    ({"verifier": "exact_match"}, "verifier", "an episode verifier"),
    ({"context_only": True}, "context_only", "cannot be context_only"),
    ({"user": None, "verifier": "bfcl_multi_turn"}, "turns", "required when 'verifier' is 'bfcl_multi_turn'"),
])
def test_bad_episode_line_names_file_line_and_field(tmp_path, over, field, words) -> None:
    good = {"id": "ok", "input": "x", "reference": "x", "verifier": "exact_match"}
    with pytest.raises(StreamError) as info:
        _read(tmp_path, good, _episode(**over))
    err = info.value
    assert err.line == 2 and err.field == field
    assert str(err).startswith(f"{tmp_path / 's.jsonl'}:2: field '{field}'") and words in str(err)


def test_tools_without_episode_verifier_field_refused_in_constructor() -> None:
    with pytest.raises(ValueError, match="field 'tools'"):
        StreamElement(id="x", input="y", turns=("a",))
