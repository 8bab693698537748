"""Stream reader/validator/writer against specs/stream-format.md (table-driven bad lines)."""

from __future__ import annotations

import json

import attrs
import pytest
from typer.testing import CliRunner

from rizz.apps.cli_streams import app as streams_app
from rizz.formats.streams import (
    BadLine,
    StreamElement,
    StreamError,
    element_to_json,
    read_stream,
    write_stream,
)
from rizz.formats.timekeys import TIME_EXPECTED

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
_TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
_CODE = {"tests": _TESTS, "entry_point": "add"}

# (name, line, field, substring of the message after "FILE:LINE: ")
BAD_LINES = [
    ("json", '{"id": "x", "input": }', None, "invalid JSON at column"),
    ("json-unterminated", '{"id": "x", "input": {"text": "x}}', None, "invalid JSON at column 31: unterminated string starting there"),
    ("not-object", "[1, 2]", None, "expected a JSON object, got a list"),
    ("missing-id", _line(id=_DROP), "id", "field 'id': required field missing"),
    ("missing-input", _line(input=_DROP), "input", "field 'input': required field missing"),
    ("id-int", _line(id=7), "id", "field 'id': expected a string, got 7"),
    ("input-null", _line(input=None), "input", "field 'input': expected a string, got null"),
    ("unknown-key", _line(answer="A"), "answer", "field 'answer': unknown field; did you mean `reference`? (expected one of"),
    ("unknown-key-no-hint", _line(gloss="A"), "gloss", "field 'gloss': unknown field (expected one of id, input,"),
    ("misspelt-key", _line(verifer="exact_match"), "verifer",
     "field 'verifer': unknown field; did you mean `verifier`? (expected one of id, input,"),
    ("instruction-list", _line(instruction=["a"]), "instruction",
     "field 'instruction': expected a string or null, got a list"),
    ("metadata-list", _line(metadata=[]), "metadata", "field 'metadata': expected an object or null, got a list"),
    ("shape", _line(metadata={"shape": "letters"}), "metadata.shape",
     "field 'metadata.shape': expected one of letter, number, label, span, text, code, json, got 'letters'; "
     "did you mean `letter`?"),
    ("shape-misspelt-key", _line(metadata={"shap": "letter"}), "metadata.shap",
     "field 'metadata.shap': not a key rizz reads; did you mean `shape`? (refused as a likely typo; metadata keys of your own are kept"),
    ("tenant-cased-key", _line(metadata={"Tenant": "t1"}), "metadata.Tenant",
     "field 'metadata.Tenant': not a key rizz reads; did you mean `tenant`?"),
    ("task-swapped-key", _line(metadata={"taks": "FOMC"}), "metadata.taks",
     "field 'metadata.taks': not a key rizz reads; did you mean `task`?"),
    ("task-int", _line(metadata={"task": 3}), "metadata.task", "field 'metadata.task': expected a string or null, got 3"),
    ("scope-bool", _line(metadata={"scope": True}), "metadata.scope",
     "field 'metadata.scope': expected a string or null, got true"),
    ("time-list", _line(metadata={"time": [1]}), "metadata.time",
     "field 'metadata.time': expected " + TIME_EXPECTED + " or null, got a list"),
    ("verifier", _line(verifier="exact"), "verifier", "field 'verifier': expected one of exact_match, "),
    ("verifier-typo", _line(verifier="exact_mtch"), "verifier", "field 'verifier': expected one of exact_match, "),
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
    # code_exec runs check(entry_point) (verifiers/metrics.py): the entry point is required
    ("code-exec-no-entry-point", _line(verifier="code_exec", metadata={"tests": _TESTS}), "metadata.entry_point",
     "field 'metadata.entry_point': expected a string, got null"),
    ("code-exec-entry-point-int", _line(verifier="code_exec", metadata={"tests": _TESTS, "entry_point": 3}),
     "metadata.entry_point", "field 'metadata.entry_point': expected a string, got 3"),
    ("code-exec-entry-point-empty", _line(verifier="code_exec", metadata={"tests": _TESTS, "entry_point": " "}),
     "metadata.entry_point", "field 'metadata.entry_point': expected a non-empty string, got ''"),
    ("code-exec-entry-point-not-name", _line(verifier="code_exec", metadata={"tests": _TESTS, "entry_point": "add two"}),
     "metadata.entry_point",
     "field 'metadata.entry_point': expected a Python function name (the tests call check(entry_point)), got 'add two'"),
    ("code-exec-prompt-int", _line(verifier="code_exec", metadata={**_CODE, "prompt": 3}), "metadata.prompt",
     "field 'metadata.prompt': expected a string or null, got 3"),
    ("code-exec-timeout-zero", _line(verifier="code_exec", metadata={**_CODE, "timeout_s": 0}), "metadata.timeout_s",
     "field 'metadata.timeout_s': expected a positive finite number of seconds, got 0"),
    ("code-exec-timeout-str", _line(verifier="code_exec", metadata={**_CODE, "timeout_s": "5"}), "metadata.timeout_s",
     "field 'metadata.timeout_s': expected a positive finite number of seconds, got '5'"),
    ("entry-point-int-other-verifier", _line(metadata={"entry_point": 3}), "metadata.entry_point",
     "field 'metadata.entry_point': expected a string or null, got 3"),
    ("token-f1-variant", _line(verifier="token_f1", metadata={"f1_variant": "bleu"}), "metadata.f1_variant",
     "field 'metadata.f1_variant': expected one of hotpotqa, set, stem, got 'bleu'"),
    # a repeated key is refused at any depth (json would keep the last value silently)
    ("repeated-key", '{"id": "b", "id": "c", "input": "x"}', "id",
     "field 'id': repeated key 'id' in one JSON object"),
    ("repeated-key-metadata", '{"id": "b", "input": "x", "metadata": {"task": "A", "scope": null, "task": "B"}}',
     "metadata.task", "field 'metadata.task': repeated key 'task' in one JSON object"),
    ("repeated-key-deep", '{"id": "b", "input": "x", "metadata": {"extra": [1, {"a": 1, "a": 1}]}}',
     "metadata.extra[1].a", "field 'metadata.extra[1].a': repeated key 'a' in one JSON object"),
    # non-finite numbers (json reads NaN, Infinity and 1e999 as floats)
    ("label-not-object", _line(metadata={"label": "classify/x"}), "metadata.label",
     "field 'metadata.label': expected an object {function, application} or null, got 'classify/x'"),
    ("label-extra-key", _line(metadata={"label": {"function": "f", "application": "a", "task": "t"}}), "metadata.label",
     "field 'metadata.label': expected an object {function, application} or null"),
    ("label-empty-function", _line(metadata={"label": {"function": "", "application": "a"}}), "metadata.label.function",
     "field 'metadata.label.function'"),
    ("time-nan", _line(metadata={"time": float("nan")}), "metadata.time",
     "field 'metadata.time': expected " + TIME_EXPECTED + " or null, got NaN"),
    ("time-infinity", _line(metadata={"time": float("inf")}), "metadata.time",
     "field 'metadata.time': expected " + TIME_EXPECTED + " or null, got Infinity"),
    ("time-overflow", _line(metadata={"time": 1}).replace('"time": 1', '"time": -1e999'), "metadata.time",
     "field 'metadata.time': expected " + TIME_EXPECTED + " or null, got -Infinity"),
    ("extra-nan", _line(metadata={"extra": [1, {"w": float("nan")}]}), "metadata.extra[1].w",
     "field 'metadata.extra[1].w': expected a finite number, got NaN"),
    # a lone surrogate decodes from JSON but no UTF-8 text can hold it (it crashed the run's hashing)
    ("lone-surrogate-input", '{"id": "b", "input": "x\\udc80"}', "input",
     "field 'input': a lone UTF-16 surrogate \\udc80 (an unpaired \\u escape); expected valid Unicode text"),
    ("lone-surrogate-deep", '{"id": "b", "input": "x", "metadata": {"extra": ["ok", "\\ud83d"]}}', "metadata.extra[1]",
     "field 'metadata.extra[1]': a lone UTF-16 surrogate \\ud83d"),
    ("lone-surrogate-key", '{"id": "b", "input": "x", "metadata": {"k\\udc80": 1}}', "metadata",
     "field 'metadata': a lone UTF-16 surrogate \\udc80"),
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


def test_a_paired_surrogate_escape_is_one_character_and_fine(tmp_path) -> None:
    path = tmp_path / "emoji.jsonl"
    path.write_text('{"id": "e", "input": "smile \\ud83d\\ude00"}\n', encoding="utf-8")
    assert read_stream(path).elements[0].input == "smile \U0001f600"


def test_a_misspelt_verifier_gets_the_closest_name(tmp_path) -> None:
    path = tmp_path / "v.jsonl"
    path.write_text(_line(verifier="exact_mtch") + "\n")
    with pytest.raises(StreamError, match=r"got 'exact_mtch'; did you mean `exact_match`\?$"):
        read_stream(path)


def test_a_byte_order_mark_at_the_start_is_not_content(tmp_path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + _line(id="a").encode() + b"\n" + _line(id="b").encode() + b"\n")
    assert [e.id for e in read_stream(path).elements] == ["a", "b"]
    path.write_bytes(_line(id="a").encode() + b"\n\xef\xbb\xbf" + _line(id="b").encode() + b"\n")
    with pytest.raises(StreamError, match=r":2: invalid JSON"):  # only at the start of the file
        read_stream(path)


def test_a_directory_is_not_a_stream(tmp_path) -> None:
    with pytest.raises(StreamError, match=r": is a directory; expected a stream file"):
        read_stream(tmp_path)


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
    el = StreamElement(id="a", input="x", verifier="code_exec", metadata={"tests": "assert True", "entry_point": "f"})
    assert element_to_json(el)["metadata"]["tests"] == "assert True"
    with pytest.raises(ValueError, match=r"^invalid stream element 'a': field 'metadata.entry_point': expected a string, got null$"):
        attrs.evolve(el, metadata={"tests": "assert True"})
    with pytest.raises(ValueError, match=r"^invalid stream element 'a': field 'metadata.time': expected an ISO 8601 "
                                         r".* or null, got NaN$"):
        attrs.evolve(el, metadata={**el.metadata, "time": float("nan")})
    with pytest.raises(ValueError, match="field 'metadata.shape'"):
        attrs.evolve(el, metadata={"tests": "t", "shape": "prose"})
    with pytest.raises(ValueError, match="field 'verifier'"):
        StreamElement(id="b", input="x", verifier="bleu")


def test_write_refuses_duplicate_ids(tmp_path) -> None:
    el = StreamElement(id="a", input="x")
    with pytest.raises(ValueError, match="duplicate stream element id 'a'"):
        write_stream(tmp_path / "d.jsonl", [el, el])
    assert not (tmp_path / "d.jsonl").exists()
    with pytest.raises(ValueError, match=r"^no stream elements to write \(read_stream refuses an empty stream file\)$"):
        write_stream(tmp_path / "d.jsonl", [])
    assert not (tmp_path / "d.jsonl").exists()


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n\n"], ids=["empty", "newline", "blank-lines"])
def test_empty_stream_is_refused(tmp_path, text) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(text, encoding="utf-8")
    for skip_bad in (False, True):
        with pytest.raises(StreamError) as err:
            read_stream(path, skip_bad=skip_bad)
        assert str(err.value) == f"{path}: no stream elements (the file is empty or has only blank lines)"
        assert (err.value.line, err.value.field, err.value.bad) == (None, None, ())
    result = CliRunner().invoke(streams_app, ["check", str(path)])
    assert result.exit_code == 1
    assert result.output == f"error: {path}: no stream elements (the file is empty or has only blank lines)\n"


def test_all_bad_lines_with_skip_bad_is_refused_and_lists_them(tmp_path) -> None:
    path = tmp_path / "allbad.jsonl"
    path.write_text(_line(id=7) + "\n\n" + "[1]\n", encoding="utf-8")
    with pytest.raises(StreamError) as err:
        read_stream(path, skip_bad=True)
    assert str(err.value) == f"{path}: no stream elements: all 2 non-blank lines are bad"
    assert err.value.bad == (BadLine(1, "id", "field 'id': expected a string, got 7"),
                             BadLine(3, None, "expected a JSON object, got a list"))
    result = CliRunner().invoke(streams_app, ["check", "--all", str(path)])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"error: {path}:1: field 'id': expected a string, got 7",
        f"error: {path}:3: expected a JSON object, got a list",
        f"error: {path}: no stream elements: all 2 non-blank lines are bad",
    ]


@pytest.mark.parametrize("command", ["run", "bench"])
def test_run_and_bench_refuse_an_empty_stream_and_write_nothing(tmp_path, command) -> None:
    from rizz.apps.cli import app

    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    out = tmp_path / "out"
    args = [command, str(path), "--out", str(out)] + (["-P", "default,frozen"] if command == "bench" else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{path}: no stream elements (the file is empty or has only blank lines)" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_check_counts_singular_and_tasks_without_a_name(tmp_path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(_line(id="a", input="abc") + "\n", encoding="utf-8")
    result = CliRunner().invoke(streams_app, ["check", str(one)])
    assert result.exit_code == 0, result.output
    assert result.output == f"{one}: 1 element ok, 0 bad; FOMC 1; longest 3 chars\n"
    untasked = tmp_path / "untasked.jsonl"
    untasked.write_text("\n".join(_line(id=f"q{i}", metadata=None) for i in range(3)) + "\n"
                        + _line(id="f", metadata={"task": "FOMC"}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(streams_app, ["check", str(untasked)])
    assert result.exit_code == 0, result.output
    assert result.output == f"{untasked}: 4 elements ok, 0 bad; - 3, FOMC 1; longest 19 chars\n"


def test_build_refuses_an_empty_result_and_counts_untasked_as_dash(tmp_path, monkeypatch) -> None:
    import rizz.apps.cli_streams as cli_streams
    from rizz.lab.builders import BuildResult

    built: list[StreamElement] = []
    monkeypatch.setattr(cli_streams, "resolve_data_root", lambda option: tmp_path)
    monkeypatch.setattr(cli_streams, "build", lambda bench, root, opts: BuildResult(tuple(built)))
    out = tmp_path / "s.jsonl"
    result = CliRunner().invoke(streams_app, ["build", "trace", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output == (f"error: no elements to write to {out} (an empty stream file is refused by `rizz streams "
                             "check` and `rizz run`); check --tasks, --per-task and --max-input-chars\n")
    assert not out.exists()
    built.append(StreamElement(id="a", input="x"))
    result = CliRunner().invoke(streams_app, ["build", "trace", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote 1 element to {out} (- 1)\n"


def test_check_reports_every_bad_line_unless_first(tmp_path) -> None:
    path = tmp_path / "two-bad.jsonl"
    path.write_text("\n".join([_line(id="a"), _line(id=7), _line(id="c"), '{"id": "d", "input": "x", "x": 1}']) + "\n",
                    encoding="utf-8")
    every = CliRunner().invoke(streams_app, ["check", str(path)])
    assert every.exit_code == 1
    assert every.output.splitlines()[:2] == [
        f"error: {path}:2: field 'id': expected a string, got 7",
        f"error: {path}:4: field 'x': unknown field (expected one of id, input, instruction, metadata, evidence, "
        "reference, verifier, context_only, tools, turns, user, environment)",
    ]
    first = CliRunner().invoke(streams_app, ["check", "--first", str(path)])
    assert first.exit_code == 1 and first.output.splitlines() == [f"error: {path}:2: field 'id': expected a string, got 7"]


def test_check_takes_several_files_and_reports_each(tmp_path) -> None:
    """`rizz streams check a.jsonl b.jsonl` said "Got unexpected extra argument(s)" (`rizz policy
    check` takes several): each file is reported, exit 1 when any is bad."""
    good, other, bad = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "bad.jsonl"
    good.write_text(_line(id="a", input="abc") + "\n", encoding="utf-8")
    other.write_text(_line(id="b", input="abcd") + "\n", encoding="utf-8")
    bad.write_text(_line(id="c") + "\n" + _line(id=7) + "\n", encoding="utf-8")
    both = CliRunner().invoke(streams_app, ["check", str(good), str(other)])
    assert both.exit_code == 0, both.output
    assert both.output == (f"{good}: 1 element ok, 0 bad; FOMC 1; longest 3 chars\n"
                           f"{other}: 1 element ok, 0 bad; FOMC 1; longest 4 chars\n")
    mixed = CliRunner().invoke(streams_app, ["check", str(bad), str(good), str(tmp_path / "missing.jsonl")])
    assert mixed.exit_code == 1
    assert mixed.stdout.splitlines()[1] == f"{good}: 1 element ok, 0 bad; FOMC 1; longest 3 chars"
    assert f"error: {bad}:2: field 'id': expected a string, got 7" in mixed.stderr
    assert f"error: {tmp_path / 'missing.jsonl'}: No such file or directory" in mixed.stderr


def _pretty_array(n: int) -> str:
    return json.dumps([json.loads(_line(id=f"q{i}")) for i in range(n)], indent=2)


@pytest.mark.parametrize("skip_bad", [False, True])
def test_a_pretty_printed_json_array_is_one_error_naming_json_lines_and_jq(tmp_path, skip_bad) -> None:
    """A newcomer's stream written with json.dump(items, f, indent=2) gave an error per line
    (47 of them from `rizz streams check`): one error for the file, with the command that converts it."""
    path = tmp_path / "items.json"
    path.write_text(_pretty_array(3) + "\n", encoding="utf-8")
    with pytest.raises(StreamError) as err:
        read_stream(path, skip_bad=skip_bad)
    assert str(err.value) == (f"{path}: a JSON array of 3 items, not JSON Lines: a stream file holds one element, a whole JSON "
                              f"object, per line (specs/stream-format.md); convert it with: jq -c '.[]' {path} > {tmp_path / 'items.jsonl'}")
    assert (err.value.line, err.value.bad) == (None, ())
    result = CliRunner().invoke(streams_app, ["check", str(path)])
    assert result.exit_code == 1 and result.output == f"error: {err.value}\n", result.output
    one_line = tmp_path / "one-line.jsonl"  # an array on one line; the converted file may not overwrite the stream
    one_line.write_text(json.dumps([json.loads(_line(id="a"))]) + "\n", encoding="utf-8")
    with pytest.raises(StreamError, match=r": a JSON array of 1 item, not JSON Lines: .* jq -c '\.\[\]' \S+one-line\.jsonl > \S+one-line\.lines\.jsonl$"):
        read_stream(one_line, skip_bad=skip_bad)
    broken = tmp_path / "broken.json"  # a comma too many: still an array, not lines (jq says where it breaks)
    broken.write_text(_pretty_array(2).replace("}\n]", "},\n]"), encoding="utf-8")
    with pytest.raises(StreamError, match=r": a JSON array \(its first non-blank character is '\['\), not JSON Lines"):
        read_stream(broken, skip_bad=skip_bad)


def test_pretty_printed_objects_are_one_error_naming_jq(tmp_path) -> None:
    one = tmp_path / "one.json"
    one.write_text("\n" + json.dumps(GOOD, indent=2) + "\n", encoding="utf-8")
    n_lines = len(json.dumps(GOOD, indent=2).splitlines())
    with pytest.raises(StreamError) as err:
        read_stream(one, skip_bad=True)
    assert str(err.value) == (f"{one}: one JSON object spread over {n_lines} lines, not JSON Lines: a stream file holds one element, "
                              f"a whole JSON object, per line (specs/stream-format.md); convert it with: jq -c . {one} > {tmp_path / 'one.jsonl'}")
    several = tmp_path / "several.jsonl"  # jq's own default output: objects one after another, pretty-printed
    several.write_text(json.dumps(GOOD, indent=2) + "\n" + json.dumps(dict(GOOD, id="b"), indent=2) + "\n", encoding="utf-8")
    with pytest.raises(StreamError, match=rf": 2 JSON values spread over {2 * n_lines} lines \(pretty-printed\), not JSON Lines: .*jq -c \. "):
        read_stream(several)


def test_lines_of_json_whose_first_is_bad_are_still_read_line_by_line(tmp_path) -> None:
    """Only a file that is JSON as a whole (and not one value a line) is refused at once."""
    path = tmp_path / "x.jsonl"
    path.write_text("[1, 2]\n" + _line(id="a") + "\n" + '{"id": "b", "input": \n', encoding="utf-8")
    read = read_stream(path, skip_bad=True)
    assert [e.id for e in read.elements] == ["a"] and [(b.line, b.message) for b in read.bad] == [
        (1, "expected a JSON object, got a list"), (3, "invalid JSON at column 22: Expecting value")]
    path.write_text('{"id": "a", "input": \n' + _line(id="b") + "\n", encoding="utf-8")
    with pytest.raises(StreamError, match=r":1: invalid JSON at column"):
        read_stream(path)


def test_check_reports_every_error_of_a_line_and_counts_lines_and_errors(tmp_path) -> None:
    """`rizz streams check` said only the first problem of a line: the user fixed `id`, ran it
    again and met `metadata.shape`. Every field error of a line is said, one line each."""
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([_line(id="a"), _line(id=7, metadata={"task": "FOMC", "shape": "letters"}),
                               "not json", _line(id="c", context_only="no", answer="A")]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(streams_app, ["check", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {path}:2: field 'id': expected a string, got 7",
        f"error: {path}:2: field 'metadata.shape': expected one of letter, number, label, span, text, code, json, "
        "got 'letters'; did you mean `letter`?",
        f"error: {path}:3: invalid JSON at column 1: Expecting value",
        f"error: {path}:4: field 'answer': unknown field; did you mean `reference`? (expected one of id, input, instruction, "
        "metadata, evidence, reference, verifier, context_only, tools, turns, user, environment)",
        f"error: {path}:4: field 'context_only': expected true or false, got 'no'",
    ]
    assert result.stdout == f"{path}: 1 element ok, 3 bad (5 errors); FOMC 1; longest 19 chars\n"
    # --first: each error of the first bad line, then stop
    first = CliRunner().invoke(streams_app, ["check", "--first", str(path)])
    assert first.exit_code == 1 and first.stdout == ""
    assert first.stderr.splitlines() == result.stderr.splitlines()[:2]
    # a file that is all good still passes; one error a line keeps the old summary
    good = tmp_path / "good.jsonl"
    good.write_text(_line(id="a") + "\n" + _line(id="b") + "\n", encoding="utf-8")
    ok = CliRunner().invoke(streams_app, ["check", str(good)])
    assert ok.exit_code == 0 and ok.output == f"{good}: 2 elements ok, 0 bad; FOMC 2; longest 19 chars\n"
    one_each = tmp_path / "one-each.jsonl"
    one_each.write_text(_line(id="a") + "\n" + _line(id=7) + "\n", encoding="utf-8")
    assert CliRunner().invoke(streams_app, ["check", str(one_each)]).stdout.startswith(f"{one_each}: 1 element ok, 1 bad; ")


def test_read_stream_stops_at_the_first_error_of_a_line_unless_every_error(tmp_path) -> None:
    """Only `rizz streams check` collects: `rizz run` (read_stream) fails fast, one BadLine a line."""
    path = tmp_path / "s.jsonl"
    path.write_text(_line(id="a") + "\n" + _line(id="a", input=None, reference=3) + "\n"
                    + '{"id": "d", "id": "e", "input": 1}\n', encoding="utf-8")
    with pytest.raises(StreamError) as err:
        read_stream(path)
    assert (str(err.value), err.value.bad) == (f"{path}:2: field 'input': expected a string, got null", ())
    assert [(b.line, b.field) for b in read_stream(path, skip_bad=True).bad] == [(2, "input"), (3, "id")]
    every = read_stream(path, skip_bad=True, every_error=True)
    assert [(b.line, b.field) for b in every.bad] == [(2, "input"), (2, "reference"), (2, "id"), (3, "id"), (3, "input")]
    assert every.bad[2].message == "field 'id': duplicate id 'a', first used at line 1"
    assert every.bad_lines == 2 and [e.id for e in every.elements] == ["a"]
    with pytest.raises(StreamError) as first:
        read_stream(path, every_error=True)
    assert str(first.value) == f"{path}:2: field 'input': expected a string, got null"
    assert [b.field for b in first.value.bad] == ["input", "reference", "id"]


def test_a_line_with_several_bad_nested_fields_names_each_path() -> None:
    from rizz.formats.stream_checks import field_errors, pairs_hook, repeated_keys

    obj = {"id": "t", "input": "x", "verifier": "bfcl_ast", "reference": "r",
           "tools": [{"name": "f"}, {"name": "f", "parameters": []}, 3], "environment": {"name": ""},
           "metadata": {"tests": 1, "timeout_s": float("nan"), "shape": "nums"}}
    assert [e.field for e in field_errors(obj)] == [
        "metadata.shape", "metadata.tests", "metadata.timeout_s", "tools[1].name", "tools[1].parameters", "tools[2]",
        "environment.name"]
    assert field_errors(GOOD) == []
    nested = json.loads('{"a": 1, "a": 2, "m": {"b": 1, "b": 2}}', object_pairs_hook=pairs_hook)
    assert [e.field for e in repeated_keys(nested)] == ["a", "m.b"]
