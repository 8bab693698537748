"""Stream reader/validator/writer against specs/stream-format.md (table-driven bad lines)."""

from __future__ import annotations

import json

import attrs
import pytest

from rizz.shell.streams import (
    BadLine, StreamElement, StreamError, element_to_json, read_stream, write_stream,
)

GOOD = {"id": "fomc-0007", "input": "What is the stance?", "instruction": None,
        "metadata": {"task": "FOMC", "scope": None, "shape": "letter", "time": None},
        "evidence": None, "reference": "A", "verifier": "exact_match", "context_only": False}


def _line(**changes) -> str:
    obj = dict(GOOD)
    for key, value in changes.items():
        if value is _DROP:
            obj.pop(key, None)
        else:
            obj[key] = value
    return json.dumps(obj, ensure_ascii=False)


_DROP = object()

# (name, line, field, substring of the message after "FILE:LINE: ")
BAD_LINES = [
    ("json", '{"id": "x", "input": }', None, "invalid JSON at column"),
    ("not-object", "[1, 2]", None, "expected a JSON object, got a list"),
    ("missing-id", _line(id=_DROP), "id", "field 'id': required field missing"),
    ("missing-input", _line(input=_DROP), "input", "field 'input': required field missing"),
    ("id-int", _line(id=7), "id", "field 'id': expected a string, got 7"),
    ("input-null", _line(input=None), "input", "field 'input': expected a string, got null"),
    ("unknown-key", _line(answer="A"), "answer", "field 'answer': unknown field"),
    ("instruction-list", _line(instruction=["a"]), "instruction",
     "field 'instruction': expected a string or null, got a list"),
    ("metadata-list", _line(metadata=[]), "metadata", "field 'metadata': expected an object or null, got a list"),
    ("shape", _line(metadata={"shape": "letters"}), "metadata.shape",
     "field 'metadata.shape': expected one of letter, number, label, span, text, code, json, got 'letters'"),
    ("task-int", _line(metadata={"task": 3}), "metadata.task", "field 'metadata.task': expected a string or null, got 3"),
    ("scope-bool", _line(metadata={"scope": True}), "metadata.scope",
     "field 'metadata.scope': expected a string or null, got true"),
    ("time-list", _line(metadata={"time": [1]}), "metadata.time",
     "field 'metadata.time': expected a string, a number or null, got a list"),
    ("verifier", _line(verifier="exact"), "verifier", "field 'verifier': expected one of exact_match, "),
    ("code-exec-no-tests", _line(verifier="code_exec"), "metadata.tests",
     "field 'metadata.tests': expected a string, got null"),
    ("sari-no-source", _line(verifier="sari", metadata={"task": "20Minuten"}), "metadata.source",
     "field 'metadata.source': expected a string, got null"),
    ("reference-int", _line(reference=1), "reference",
     "field 'reference': expected a string, a list of strings or null, got 1"),
    ("reference-list-int", _line(reference=["A", 2]), "reference[1]", "field 'reference[1]': expected a string, got 2"),
    ("reference-empty-list", _line(reference=[]), "reference", "field 'reference': expected a string, a list of strings or null, got an empty list"),
    ("evidence-object", _line(evidence={"a": 1}), "evidence",
     "field 'evidence': expected a string, a list of strings or null, got an object"),
    ("context-only-int", _line(context_only=1), "context_only", "field 'context_only': expected true or false, got 1"),
]


@pytest.mark.parametrize("name,line,field,message", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_bad_line_names_file_line_field(tmp_path, name, line, field, message) -> None:
    path = tmp_path / "x.jsonl"
    good2 = _line(id="ok-2")
    path.write_text(_line(id="ok-1") + "\n\n" + line + "\n" + good2 + "\n", encoding="utf-8")
    with pytest.raises(StreamError) as err:
        read_stream(path)
    assert str(err.value).startswith(f"{path}:3: {message}")
    assert (err.value.line, err.value.field) == (3, field)
    # skip_bad collects the bad line and keeps both good ones
    read = read_stream(path, skip_bad=True)
    assert [e.id for e in read.elements] == ["ok-1", "ok-2"]
    assert len(read.bad) == 1 and read.bad[0].line == 3 and read.bad[0].field == field
    assert read.bad[0].message.startswith(message)


def test_duplicate_id_names_both_lines(tmp_path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join([_line(id="a"), _line(id="b"), _line(id="a")]) + "\n")
    with pytest.raises(StreamError) as err:
        read_stream(path)
    assert str(err.value) == f"{path}:3: field 'id': duplicate id 'a', first used at line 1"
    read = read_stream(path, skip_bad=True)
    assert [e.id for e in read.elements] == ["a", "b"]
    assert read.bad == (BadLine(3, "id", "field 'id': duplicate id 'a', first used at line 1"),)


def test_defaults_and_types(tmp_path) -> None:
    path = tmp_path / "min.jsonl"
    path.write_text('{"id": "q1", "input": "hi"}\n'
                    '{"id": "q2", "input": "hi", "reference": ["x", "y"], "evidence": ["p1", "p2"],'
                    ' "metadata": {"scope": "conv-1", "extra": [1, 2]}, "context_only": true}\n')
    a, b = read_stream(path).elements
    assert a == StreamElement(id="q1", input="hi")
    assert dict(a.metadata) == {"task": None, "scope": None, "shape": None, "time": None}
    assert (a.instruction, a.evidence, a.reference, a.verifier, a.context_only) == (None, None, None, None, False)
    assert b.reference == ("x", "y") and b.references == ("x", "y")
    assert b.evidence_items == ("p1", "p2") and a.evidence_items == ()
    assert b.scope == "conv-1" and b.context_only is True
    assert list(b.metadata["extra"]) == [1, 2]
    hash(b)  # deep-frozen metadata keeps elements hashable


def test_write_is_canonical_and_round_trips(tmp_path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"verifier": "sari", "input": "Paragraph: Grüezi", "id": "m-1",
                               "metadata": {"source": "Grüezi", "task": "20Minuten", "shape": "text"},
                               "reference": "Hallo"}, ensure_ascii=False) + "\n")
    elements = read_stream(src).elements
    out = tmp_path / "out.jsonl"
    assert write_stream(out, elements) == 1
    text = out.read_text(encoding="utf-8")
    assert text == ('{"id": "m-1", "input": "Paragraph: Grüezi", "instruction": null, "metadata": '
                    '{"task": "20Minuten", "scope": null, "shape": "text", "time": null, "source": "Grüezi"}, '
                    '"evidence": null, "reference": "Hallo", "verifier": "sari", "context_only": false}\n')
    assert read_stream(out).elements == elements
    write_stream(tmp_path / "again.jsonl", read_stream(out).elements)
    assert (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()


def test_element_validates_on_construct_and_evolve() -> None:
    el = StreamElement(id="a", input="x", verifier="code_exec", metadata={"tests": "assert True"})
    assert element_to_json(el)["metadata"]["tests"] == "assert True"
    with pytest.raises(ValueError, match="field 'metadata.shape'"):
        attrs.evolve(el, metadata={"tests": "t", "shape": "prose"})
    with pytest.raises(ValueError, match="field 'verifier'"):
        StreamElement(id="b", input="x", verifier="bleu")


def test_write_refuses_duplicate_ids(tmp_path) -> None:
    el = StreamElement(id="a", input="x")
    with pytest.raises(ValueError, match="duplicate stream element id 'a'"):
        write_stream(tmp_path / "d.jsonl", [el, el])
    assert not (tmp_path / "d.jsonl").exists()
