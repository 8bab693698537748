"""The refold's shortcuts read a log exactly as before: ``load_line`` gives what ``json.loads``
gives (or its error), ``parse_fast`` gives what ``parse`` gives (or None, and ``parse`` then
returns the record or raises its own message), ``decode_step`` decodes a view as the record
(results/2026-12-04-replay-speed.md)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rizz.core import Policy, StepInput
from rizz.engine import codec
from rizz.engine.logfold import LogFold, refold
from rizz.formats import logrecord as lr
from rizz.formats.logrecord import LogRecordError, load_line, parse, parse_fast, unstructure

ROOT = Path(__file__).resolve().parents[2]
KEY = "ab" * 32


def same(a: Any, b: Any) -> bool:
    """``a`` (what parse made) and ``b`` (what parse_fast made) hold the same values of the same
    types, part by part (a view's part is the record part's name + "View")."""
    if attrs.has(type(a)):
        return type(b).__name__ in (type(a).__name__, type(a).__name__ + "View") and all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in attrs.fields(type(a)))
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


def _records() -> list[dict[str, Any]]:
    """One record of each kind and shape a log holds, as its JSON object (unstructure)."""
    call = lr.CallPart("answer", 120, 7, 0.0123, None, False)
    calls = [lr.CallPart("judge", 90, 3, 0.01, 0.0002, True, True), call,
             lr.CallPart("answer", 300, 5, 1.5, 0.001, False, False, 3, 200),
             lr.CallPart("answer", 400, 0, 0.2, None, False, True, refused=True)]
    inp = lr.InputPart("What is 2+2?", KEY, "Answer with a number.", "evidence", "s1", "number", "acme", "2026-01-02T03:04:05Z")
    judge = lr.JudgePart("solve-math", "arithmetic", "solve-math/arithmetic", True, False, KEY)
    prompt = lr.PromptPart(KEY, 310, 2048, "chat", [["examples", "e1", 40, "budget"], ["rules", 3, None, 1.5]], ["r1", "r2"], ["e1"],
                           ["rules", "examples"])
    episode = lr.EpisodePart([{"role": "user", "text": "hi"}, {"role": "assistant", "text": "", "calls": [["get", {"id": None}]]},
                              {"role": "tool", "name": "get", "arguments": {"id": None}, "result": None, "error": "no id"}],
                             "sha256:" + "0" * 64, [[["get(id=None)"]]], 2, 1, 1, "done", 512, "get(id=None)")
    recs = [
        lr.LogRecord(0, "q0", 2, "step", "math", False, inp, lr.RoutePart("b0", 0.5, True), calls, False, 0.25, judge, prompt,
                     lr.AnswerPart("4", "4", True, "thinking"), lr.VerdictPart(1.0, "exact_match", True, "4")),
        lr.LogRecord(1, "q1", 2, "step", None, True, lr.InputPart("context", KEY), None, [], False, 0.0),
        lr.LogRecord(2, "q2", 2, "answer", "t", False, inp, calls=[call], judge=judge, prompt=prompt, answer=lr.AnswerPart(None, None, False),
                     time=1767300000.5, episode=episode, declared_label=lr.LabelPart("f", "a")),
        lr.LogRecord(2, "q2", 2, "verdict", verdict=lr.VerdictPart(0.0, "token_f1", False), calls=[call]),
        lr.LogRecord(3, "q3", 2, "expire", reason="max_age"),
        lr.LogRecord(2, "q2", 2, "distill", branch="b0", rules=[["if asked", "answer", KEY]], calls=[call]),
        lr.LogRecord(4, "q4", 1, "step", None, False, lr.InputPart("x", KEY), None, [call], False, 0.0, judge, prompt,
                     lr.AnswerPart("y", "y", True), lr.VerdictPart(1, "exact_match"), lr.DistillPart(True, [["a", "s", KEY]])),
    ]
    out = [unstructure(r) for r in recs]
    out[3]["verdict"]["reward"] = 0  # an int where a float is read: parse reads it as 0.0
    v1 = [json.loads(ln) for ln in (ROOT / "tests/fixtures/v1-rundir/log.jsonl").read_text(encoding="utf-8").splitlines()]
    return out + v1[:4]


RECORDS = _records()
ODD = [None, "1", "x", "", "false", "1.5", 1, 0, -1, 1.5, -0.0, 2**70, 10**400, True, False, [], {}, ["a"], [1], [["a", "b", "c"]], [["a", "b"]],
       {"a": 1}, float("nan"), float("inf")]


def _paths(data: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, at + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, at + (i,))
    return out


def _mutants(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record one change away: a key dropped or added, a value of another type."""
    out = []
    for path in _paths(data):
        parent = data
        for p in path[:-1]:
            parent = parent[p]
        target = parent[path[-1]] if path else data
        if isinstance(target, dict):
            m = copy.deepcopy(data)
            node = m
            for p in path:
                node = node[p]
            node["unknown_key"] = 1
            out.append(m)
        if not path:
            continue
        if isinstance(parent, dict):
            m = copy.deepcopy(data)
            node = m
            for p in path[:-1]:
                node = node[p]
            del node[path[-1]]
            out.append(m)
        for odd in ODD:
            m = copy.deepcopy(data)
            node = m
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = copy.deepcopy(odd)
            out.append(m)
    return out


def _check(data: Any) -> bool:
    """parse_fast(data) is None or what parse(data) gives; None whenever parse refuses it. Returns
    whether the fast path took it."""
    fast = parse_fast(copy.deepcopy(data))  # never raises
    try:
        rec = parse(copy.deepcopy(data))
    except LogRecordError:
        assert fast is None, data
        return False
    assert fast is None or same(rec, fast), data
    return fast is not None


@pytest.mark.skipif(lr._VIEW is None, reason="msgspec is not installed: parse_fast always says None")
def test_parse_fast_reads_every_record_as_written_as_parse_does() -> None:
    assert all(_check(d) for d in RECORDS)
    for ln in (ROOT / "tests/fixtures/v1-rundir/log.jsonl").read_text(encoding="utf-8").splitlines():
        assert _check(json.loads(ln))


def test_parse_fast_gives_parse_s_record_or_none_for_every_record_one_change_away() -> None:
    taken = refused = 0
    for data in RECORDS:
        for m in _mutants(data):
            took = _check(m)
            taken += took
            refused += not took
    assert taken > 100 and refused > 1000, (taken, refused)
    for odd in ODD + [[RECORDS[0]], "{}", 3]:
        assert parse_fast(odd) is None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_parse_fast_on_random_changes(data: st.DataObject) -> None:
    record = copy.deepcopy(data.draw(st.sampled_from(RECORDS)))
    for _ in range(data.draw(st.integers(1, 4))):
        paths = _paths(record)[1:]
        path = data.draw(st.sampled_from(paths))
        node = record
        for p in path[:-1]:
            node = node[p]
        # a copy: a drawn ODD value is a shared list or dict, which a later change in this record (or
        # a later example) would mutate, making Hypothesis's draws depend on earlier examples
        node[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(ODD) | st.text(max_size=3) | st.integers() | st.floats()))
    _check(record)


def test_decode_step_reads_a_view_as_the_record_and_passes_step_input_s_fields_in_order() -> None:
    assert codec._STEP_FIELDS == tuple(a.name for a in attrs.fields(StepInput))
    vec = np.linspace(-1, 1, 8, dtype=np.float32)

    class Store:
        def get(self, key: str) -> np.ndarray:
            return vec.copy()

    for data in RECORDS:
        rec = parse(data)
        if rec.kind in ("step", "answer"):
            fast = parse_fast(data)
            assert fast is not None or lr._VIEW is None
            assert codec.decode_step(rec, Store()) == codec.decode_step(fast or rec, Store())


JSON_LINES = [b'{"a": 1}', b'{"a": "x\x01y"}', b'{"a": 123456789012345678901234567890}', b'{"a": -9223372036854775809}',
              b'{"a": 18446744073709551616}', b'{"a": NaN}', b'{"a": Infinity}', b'{"a": -Infinity}', b'{"a": 1e400}', b'{"a": -0}',
              b'{"a": -0.0}', b'{"a": 1, "a": 2}', b'{"a": "\\ud800"}', b'{"a": "\\ud83d\\ude00"}', b'{"a": "\xff"}',
              b'{"a": "\xed\xa0\x80"}', b"[" * 3000 + b"]" * 3000, b'{"a": 1} x', b' {"a": 1} \n', b'\xef\xbb\xbf{"a": 1}', b'{"a": 01}',
              b'{"a": 1.}', b'{"a": .5}', b'{"a": 0.1e-400}', b'{"a": 2.2250738585072011e-308}', b'{"a": "\\u0000"}', b'{"a": 1E5}',
              b'{"a": tru}', b"", b"\n", b'{"a":1,}', b'{"a":[1,]}', b'{"a":"\t"}', b'{"a":"\x7f"}', b'{"a": 9007199254740993.0}',
              b'{"\xc3\xa9": "\xe2\x82\xac"}', b'{"a":"\\/"}', b'"just a string"', b"null", b"[1, 2.5, true]", b"{'a': 1}"]


def _same_decode(line: bytes | str) -> None:
    try:
        want: Any = json.loads(line)
    except Exception as e:  # noqa: BLE001 - the same error, type and words
        with pytest.raises(type(e)) as got:
            load_line(line)
        assert str(got.value) == str(e)
        return
    assert same(want, load_line(line)), line


def test_a_call_says_refused_only_when_it_was() -> None:
    """A call the server refused writes ``"refused": true``; any other writes no key, as before
    the field existed, and a call without it reads as not refused (both parsers)."""
    rec = RECORDS[0]
    assert [c.get("refused") for c in rec["calls"]] == [None, None, None, True]
    for read in (parse, parse_fast):
        calls = read(rec).calls
        assert [c.refused for c in calls] == [False, False, False, True]
    assert unstructure(parse(rec)) == rec


def test_load_line_gives_json_loads_objects_or_its_error() -> None:
    for line in JSON_LINES:
        _same_decode(line)
        _same_decode(line.decode("utf-8", "surrogateescape") if b"\xff" not in line and b"\xed" not in line else line)
    for ln in (ROOT / "tests/fixtures/v1-rundir/log.jsonl").read_bytes().splitlines(keepends=True):
        _same_decode(ln)
    rng = random.Random(7)
    floats = [rng.uniform(-1, 1) * 10 ** rng.randint(-320, 308) for _ in range(3000)] + [rng.random() for _ in range(3000)]
    text = b"[" + b",".join(repr(f).encode() for f in floats) + b"]"
    _same_decode(text)
    digits = b"[" + b",".join(f"{rng.randint(0, 10**25)}.{rng.randint(0, 10**25)}e{rng.randint(-330, 310)}".encode() for _ in range(3000)) + b"]"
    _same_decode(digits)
    line = json.dumps(RECORDS[0]).encode()
    for _ in range(2000):  # a byte dropped, repeated or changed
        i = rng.randrange(len(line))
        _same_decode(rng.choice([line[:i] + line[i + 1:], line[:i] + line[i:i + 1] * 2 + line[i + 1:],
                                 line[:i] + bytes([rng.randrange(256)]) + line[i + 1:]]))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_load_line_on_random_json(value: Any) -> None:
    _same_decode(json.dumps(value))
    _same_decode(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _refold_error(records: list[dict[str, Any]]) -> str:
    class Store:
        def get(self, key: str) -> np.ndarray:
            return np.ones(8, dtype=np.float32) / np.sqrt(8)

    with pytest.raises(ValueError) as e:
        refold(LogFold(Policy(), Store()), records, where="log.jsonl")
    return str(e.value)


def test_a_refold_stops_at_a_bad_record_with_parse_s_words() -> None:
    good = copy.deepcopy(RECORDS[0])
    for bad in _mutants(good)[::7]:
        try:
            parse(copy.deepcopy(bad))
        except LogRecordError:
            pass
        else:
            continue
        with pytest.raises(LogRecordError) as want:
            parse(copy.deepcopy(bad), "log.jsonl:2")
        assert _refold_error([copy.deepcopy(good), bad]) == str(want.value)


def test_without_msgspec_the_refold_reads_through_json_and_cattrs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lr, "_VIEW", None)
    monkeypatch.setattr(lr, "_JSON", None)
    assert all(parse_fast(d) is None for d in RECORDS)
    for line in JSON_LINES[:12]:
        _same_decode(line)
