"""Hypothesis: a live Session driven by random answer / fold / expire / reopen / crash, checked
after every rule against a refold of the log, a resume from the newest snapshot plus the log
tail, and a cattrs-free to_data/from_data round trip of the state; round trips of stream lines,
policies and log records."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import attrs
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from livekit import HashEmbedder, StubModel, element

from rizz import Session, Verdict
from rizz.core import SHAPES, digest, from_data, to_data
from rizz.engine.logfold import restore_fold
from rizz.engine.session import SessionError
from rizz.formats import logrecord as lr
from rizz.formats.policy_file import load_policy, parse_policy, policy_data
from rizz.formats.streams import dumps_element, element_from_json, read_stream, write_stream
from rizz.store.runlog import RunDir

_POLICY = load_policy("default")
_POLICY = attrs.evolve(
    _POLICY,
    rules=attrs.evolve(_POLICY.rules, distill_every=2),
    lifecycle=attrs.evolve(_POLICY.lifecycle, merge_every=3, max_active=3, max_branches=4),
    feedback=attrs.evolve(_POLICY.feedback, max_pending=6),
)


class LiveSessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rizz-live-"))
        self.path = self.tmp / "s"
        self.next = 0
        self.s = self._open()

    def _open(self) -> Session:
        return Session.open(self.path, policy=_POLICY, model=StubModel(), embedder=HashEmbedder(), snapshot_every=4)

    def teardown(self) -> None:
        self.s.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(family=st.integers(0, 5))
    def answer(self, family: int) -> None:
        el = element(self.next * 6 + family)
        self.next += 1
        p = self.s.answer(el)
        assert p.id == el["id"]

    @precondition(lambda self: self.s.pending_ids())
    @rule(pick=st.integers(0, 100), reward=st.sampled_from([0.0, 0.3, 1.0]), as_float=st.booleans())
    def fold(self, pick: int, reward: float, as_float: bool) -> None:
        ids = self.s.pending_ids()
        self.s.fold(ids[pick % len(ids)], reward if as_float else Verdict(reward, "exact_match"))

    @precondition(lambda self: self.s.pending_ids())
    @rule(pick=st.integers(0, 100))
    def expire(self, pick: int) -> None:
        ids = self.s.pending_ids()
        self.s.expire(ids[pick % len(ids)], "gave up")

    @rule(reward=st.sampled_from([1.5, -1.0, math.nan]))
    def refused(self, reward: float) -> None:
        before = self.s.digest()
        target = (self.s.pending_ids() or ["nobody"])[0]
        try:
            self.s.fold(target, reward)
            raise AssertionError("a bad reward was accepted")
        except SessionError:
            pass
        assert self.s.digest() == before

    @rule()
    def close_and_reopen(self) -> None:
        before, pending = self.s.digest(), self.s.pending_ids()
        self.s.close()
        self.s = self._open()
        assert self.s.digest() == before and self.s.pending_ids() == pending

    @rule(partial=st.booleans())
    def crash(self, partial: bool) -> None:
        """Drop the process state (no close, no snapshot); maybe a half-written last line."""
        before = self.s.digest()
        self.s.run_dir.__exit__(None, None, None)  # the OS releases the lock of a dead process
        self.s._open = False
        if partial:
            with open(self.path / "log.jsonl", "ab") as f:
                f.write(b'{"v": 2, "kind": "verdict", "id": "q')
        self.s = self._open()
        assert self.s.digest() == before

    @invariant()
    def agrees_with_refold_resume_and_round_trip(self) -> None:
        d = self.s.digest()
        rd = RunDir(self.path)
        full, _ = restore_fold(rd, _POLICY, use_snapshots=False)
        resumed, _ = restore_fold(rd, _POLICY, use_snapshots=True)
        assert digest(full.state) == d
        assert digest(resumed.state) == d and dict(resumed.inflight) == dict(full.inflight)
        assert set(full.inflight) == set(self.s.pending_ids())
        assert digest(from_data(json.loads(json.dumps(to_data(self.s.state))))) == d


TestLiveSession = LiveSessionMachine.TestCase
TestLiveSession.settings = settings(max_examples=20, stateful_step_count=14, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])


# -- round trips ---------------------------------------------------------------------------
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
_opt = st.none() | _text


@st.composite
def _elements(draw):
    obj = {"id": draw(st.text("abcxyz-_0123456789", min_size=1, max_size=12)), "input": draw(_text)}
    meta = {}
    if draw(st.booleans()):
        meta["shape"] = draw(st.sampled_from(SHAPES))
    if draw(st.booleans()):
        meta["task"] = draw(_text)
    if draw(st.booleans()):
        meta["scope"] = draw(_text)
    obj["metadata"] = meta
    obj["instruction"] = draw(_opt)
    obj["reference"] = draw(st.none() | _text | st.lists(_text, min_size=1, max_size=3))
    obj["evidence"] = draw(st.none() | _text)
    obj["verifier"] = draw(st.sampled_from([None, "exact_match", "token_f1", "rouge_l"])) if obj["reference"] is not None else None
    return element_from_json(obj)


@settings(max_examples=60, deadline=None)
@given(st.lists(_elements(), min_size=1, max_size=4, unique_by=lambda e: e.id))
def test_stream_lines_write_then_read_back_equal(tmp_path_factory, els):
    p = tmp_path_factory.mktemp("s") / "s.jsonl"
    write_stream(p, els)
    assert read_stream(p).elements == tuple(els)
    assert [element_from_json(json.loads(dumps_element(e))) for e in els] == list(els)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_policy_dump_then_load_equal(data):
    pol = _POLICY
    for sub in ("routing", "retrieval", "rules", "feedback"):
        rec = getattr(pol, sub)
        changes = {}
        for a in attrs.fields(type(rec)):
            md = a.metadata
            if "min" in md and data.draw(st.booleans()):
                lo, hi = md["min"], md["max"]
                changes[a.name] = data.draw(st.integers(int(lo), int(min(hi, lo + 50))) if md["integer"] else st.floats(lo, hi, allow_nan=False))
        if sub == "retrieval" and changes.get("rule_m_min", rec.rule_m_min) > changes.get("rule_m_max", rec.rule_m_max):
            changes["rule_m_max"] = changes.get("rule_m_min", rec.rule_m_min)  # a valid policy keeps m_min <= m_max
        pol = attrs.evolve(pol, **{sub: attrs.evolve(rec, **changes)})
    back = parse_policy(json.loads(json.dumps(policy_data(pol))), "<round trip>")
    assert back == pol


_key = st.text("0123456789abcdef", min_size=64, max_size=64)
_calls = st.lists(st.builds(lr.CallPart, st.sampled_from(["judge", "answer", "distill"]), st.integers(0, 9999), st.integers(0, 99),
                            st.floats(0, 10), st.none() | st.floats(0, 1), st.booleans()), max_size=3)
_input = st.builds(lr.InputPart, _text, _key, _opt, _opt, _opt, st.none() | st.sampled_from(SHAPES))
_prompt = st.builds(lr.PromptPart, _key, st.integers(0, 9999), st.integers(1, 9999), st.sampled_from(["raw", "chat"]),
                    st.lists(st.tuples(_text, _text, st.integers(0, 99), _text).map(list), max_size=2),
                    st.lists(_text, max_size=3), st.lists(_text, max_size=3))
_verdict = st.builds(lr.VerdictPart, st.floats(0, 1), _text, st.booleans())
_rules = st.lists(st.tuples(_text, _text, _key).map(list), max_size=3)


@st.composite
def _records(draw):
    kind = draw(st.sampled_from(lr.KINDS))
    base = dict(step=draw(st.integers(0, 10**6)), id=draw(_text), v=2, kind=kind)
    if kind in ("step", "answer"):
        base.update(task=draw(_opt), context_only=draw(st.booleans()), input=draw(_input), calls=draw(_calls),
                    overflow=draw(st.booleans()), wall_s=draw(st.floats(0, 100)),
                    judge=draw(st.none() | st.builds(lr.JudgePart, _text, _text, _opt, st.booleans(), st.booleans(), st.none() | _key)),
                    route=draw(st.none() | st.builds(lr.RoutePart, _text, st.floats(-5, 5), st.booleans())),
                    prompt=draw(st.none() | _prompt), answer=draw(st.none() | st.builds(lr.AnswerPart, _opt, _opt, st.booleans())),
                    verdict=draw(_verdict) if kind == "step" and draw(st.booleans()) else None,
                    time=draw(st.none() | st.floats(0, 2e9)) if kind == "answer" else None)
    elif kind == "verdict":
        base.update(verdict=draw(_verdict))
    elif kind == "expire":
        base.update(reason=draw(_text))
    else:
        base.update(branch=draw(_text), rules=draw(_rules), calls=draw(_calls))
    return lr.LogRecord(**base)


@settings(max_examples=200, deadline=None)
@given(_records())
def test_log_records_build_then_parse_equal(rec):
    line = json.dumps(lr.unstructure(rec), ensure_ascii=False, sort_keys=True)
    assert lr.parse(json.loads(line)) == rec
