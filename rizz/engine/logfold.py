"""The fold of a run log: state plus pending answers, advanced one :class:`LogRecord` at a time.

``rizz run``, a live :class:`~rizz.engine.session.Session`, ``rizz replay`` and ``rizz diff`` all
advance the state through :meth:`LogFold.apply`, so a log refolds to the digest the session
had (specs/step-semantics.md, "Live sessions"). The core is :func:`rizz.core.walled`: a record
whose input names a ``tenant`` is folded behind that tenant's wall (every round below):

- ``step`` (v1): ``core.step`` with the distilled rules inside (the semantics of log format 1);
- ``step`` (v2): ``route_round`` then ``feedback_round`` (the same as ``core.step``);
- ``answer``: ``route_round``; the input and the decision wait in :attr:`LogFold.inflight`;
- ``verdict``: ``feedback_round`` with the waiting input and decision (a decision whose branch
  was merged away since is moved to the branch that kept it, when the merge is folded);
- ``expire``: the waiting answer is dropped, the state is unchanged;
- ``distill``: ``distill_round`` for the record's branch.

A tool-using episode folds like any element; only its memory input differs when
its verdict is below the write threshold: the answer folded is the episode's first wrong call
(``episode.wrong_call``, the branch-local anti-pattern) instead of its trajectory
(:func:`memory_input`). The wrong call waits with the pending answer, so a late verdict
folds the same way.

The fold decodes a record's input with :func:`rizz.engine.codec.decode_step` (the inverse of
what the live session wrote), reading embeddings from the RUN_DIR's store; the live session
passes the vectors it already holds (``inp=``, ``routed=``, ``rules=``) so nothing is read back
or routed twice. :class:`LogFoldError` is defined beside the codec and importable here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen
from pyrsistent import PMap, pmap

from rizz.core import AdaptiveState, CandidateRule, Policy, RouteDecision, RouteResult, StepInput, Verdict, events as ev, rizz, walled
from rizz.core.serialize import from_data, to_data
from rizz.core.tenants import decision_tenant, follow_merge
from rizz.engine.codec import LogFoldError, decode_step, decode_verdict
from rizz.formats.logrecord import LogRecord, parse, parse_fast
from rizz.store.runlog import write_json_atomic

__all__ = ["InFlight", "LogFold", "LogFoldError", "load_inflight", "memory_input", "refold", "restore_fold", "save_inflight",
           "snapshot_fold", "views"]


@frozen
class InFlight:
    """An answer waiting for its verdict: the input as answered, its route decision (a
    :class:`~rizz.core.tenants.WalledDecision` once tenants are in play), Unix time;
    ``wrong_call``: an episode's first wrong call (see :func:`memory_input`), else None."""

    step_input: StepInput
    decision: RouteDecision
    time: float | None
    wrong_call: str | None = None


def memory_input(policy: Policy, inp: StepInput, verdict: Verdict | None, wrong_call: str | None) -> StepInput:
    """The input the memory round folds: ``inp``, except that a tool-using episode whose reward is
    below ``policy.write_threshold`` remembers its first wrong call as the answer (the
    branch-local anti-pattern; a verified episode writes its trajectory, ``inp.answer``)."""
    if wrong_call is None or verdict is None or verdict.reward >= policy.write_threshold(verdict.verifier):
        return inp
    return attrs.evolve(inp, answer=wrong_call)


class LogFold:
    """State, pending answers, answers issued and records folded; advanced by :meth:`apply`.

    Args:
      policy: the run's policy.
      store: the embedding store (``get(key) -> (d,) float32``) the records' keys point into.
      state / inflight / answers / folded: where to start (default: empty, as at record 0).
    """

    def __init__(self, policy: Policy, store: Any, state: AdaptiveState | None = None, inflight: PMap | None = None,
                 answers: int = 0, folded: int = 0) -> None:
        self.core = walled(rizz(policy))  # one sub-state per metadata.tenant (rizz.core.tenants)
        self.store = store
        self.state = state if state is not None else self.core.init()
        self.inflight: PMap = inflight if inflight is not None else pmap()  # item id -> InFlight
        self.answers = answers  # step index of the next answer
        self.folded = folded  # records folded so far

    def apply(self, rec: LogRecord, *, inp: StepInput | None = None, routed: RouteResult | None = None,
              rules: tuple[CandidateRule, ...] | None = None) -> tuple[object, ...]:
        """Fold one record; returns the events it produced. Raises LogFoldError (state unchanged)."""
        self._tenant: str | None = None  # the tenant whose sub-state the record folded
        events = self._apply(rec, inp, routed, rules)
        self.folded += 1
        merged = {e.absorbed: e.kept for e in events if isinstance(e, ev.BranchesMerged)}
        if merged and self.inflight:
            self._follow(merged)
        return events

    def _follow(self, merged: dict[str, str]) -> None:
        """Pending answers routed to a branch merged away now write into the branch that kept it
        (only answers of the tenant whose sub-state merged: branch ids are per sub-state)."""
        for k, w in self.inflight.items():
            d = follow_merge(w.decision, w.step_input, self._tenant, merged)
            if d is not w.decision:
                self.inflight = self.inflight.set(k, attrs.evolve(w, decision=d))

    def _apply(self, rec: LogRecord, inp: StepInput | None, routed: RouteResult | None,
               rules: tuple[CandidateRule, ...] | None) -> tuple[object, ...]:
        core = self.core
        if rec.kind in ("step", "answer"):
            if inp is None:
                inp, verdict = decode_step(rec, self.store)
            else:
                verdict = decode_verdict(rec.verdict)
            if rec.kind == "answer" and rec.id in self.inflight:
                raise LogFoldError(f"answer {rec.id!r} at step {rec.step}: an answer with this id is already pending")
            self.answers = max(self.answers, rec.step + 1)
            self._tenant = inp.tenant
            wrong = rec.episode.wrong_call if rec.episode is not None else None
            if rec.kind == "step" and rec.v == 1:
                self.state, events = core.step_with_events(self.state, inp, verdict)
                return events
            rr = routed if routed is not None else core.route_round(self.state, inp)
            if rec.kind == "answer":
                self.state = rr.state
                self.inflight = self.inflight.set(rec.id, InFlight(inp, rr.decision, rec.time, wrong))
                return rr.events
            self.state, rest = core.feedback_round(rr.state, memory_input(core.policy, inp, verdict, wrong), verdict, rr.decision)
            return rr.events + rest
        if rec.kind in ("verdict", "expire"):
            w = self.inflight.get(rec.id)
            if w is None or w.step_input.step != rec.step:
                raise LogFoldError(f"{rec.kind} for {rec.id!r} (step {rec.step}): no such answer is pending")
            self.inflight = self.inflight.remove(rec.id)
            if rec.kind == "expire":
                return ()
            self._tenant = decision_tenant(w.decision, w.step_input)
            verdict = decode_verdict(rec.verdict)
            inp = memory_input(core.policy, w.step_input, verdict, w.wrong_call)
            self.state, events = core.feedback_round(self.state, inp, verdict, w.decision)
            return events
        if rec.kind == "distill":
            if rules is None:
                rules = tuple(CandidateRule(a, s, self.store.get(k).astype("float32").tobytes()) for a, s, k in rec.rules or ())
            assert rec.branch is not None
            self.state, events = core.distill_round(self.state, rec.branch, rec.step, rules)
            return events
        raise LogFoldError(f"unknown record kind {rec.kind!r}")


# -- pending answers beside a state snapshot (small functions: snapshots are shared code) --
def save_inflight(path: Path, fold: LogFold) -> None:
    """Write ``{answers, inflight}`` next to a snapshot (JSON, atomic)."""
    data = {"answers": fold.answers,  # an episode's wrong call, when there is one, is a 5th item
            "inflight": [[k, to_data(w.step_input), to_data(w.decision), w.time] + ([w.wrong_call] if w.wrong_call is not None else [])
                         for k, w in sorted(fold.inflight.items())]}
    write_json_atomic(path, data)


def load_inflight(path: Path) -> tuple[int, PMap] | None:
    """``(answers, inflight)`` written by :func:`save_inflight`, or None when there is no file."""
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["answers"], pmap({row[0]: InFlight(from_data(row[1]), from_data(row[2]), row[3], row[4] if len(row) > 4 else None)
                                  for row in data["inflight"]})


def snapshot_fold(rd: Any, policy: Policy, at_most: int) -> tuple[LogFold, int, set[int]]:
    """A fold of RUN_DIR ``rd``'s log that starts from its newest sound snapshot taken after
    ≤ ``at_most`` records (:meth:`~rizz.store.runlog.RunDir.latest_snapshot`), with the answers
    in flight then; a fresh fold without one. Returns ``(fold, records it holds, stale)``: fold
    the log's records from that count on. ``stale``: the snapshot whose pending answers this
    version cannot build (the fold then starts at record 0); with ``rd.ignored_snapshots``,
    the snapshots a writer rebuilds from the log. Reads only."""
    snap = rd.latest_snapshot(at_most)
    if snap is None:
        return LogFold(policy, rd.embeddings), 0, set()
    n, state = snap
    try:
        side = load_inflight(rd.snap_dir / f"{n:08d}.inflight.json")
    except (TypeError, ValueError):  # pending answers this version cannot build: refold all
        return LogFold(policy, rd.embeddings), 0, {n}
    answers, inflight = side if side is not None else (n, pmap())  # format 1: one record per step, none pending
    return LogFold(policy, rd.embeddings, state=state, inflight=inflight, answers=answers, folded=n), n, set()


def restore_fold(rd: Any, policy: Policy, *, use_snapshots: bool = True,
                 records: list[dict[str, Any]] | None = None,
                 on_folded: Callable[[LogFold, int], None] | None = None) -> tuple[LogFold, list[dict[str, Any]]]:
    """The fold of RUN_DIR ``rd``'s whole log: from the newest snapshot (with its answers in
    flight) plus the records after it, or from record 0. Returns ``(fold, records as JSON)``.

    ``on_folded(fold, n)``: called with the fold and the records folded so far, once before
    the first record is applied (``n``: 0, or the snapshot's count) and after each record
    (``rizz replay`` reads the digest where ``summary.json`` ends).

    Raises LogRecordError / LogFoldError naming ``log.jsonl:<line>`` for a bad record.
    """
    records = list(rd.records()) if records is None else records
    if use_snapshots:
        fold, start, stale = snapshot_fold(rd, policy, len(records))
    else:
        fold, start, stale = LogFold(policy, rd.embeddings), 0, set()
    # snapshots that failed their checksum (rizz.store.durable) or cannot be built are rewritten from the log
    rebuild = ({n for n, _ in getattr(rd, "ignored_snapshots", ())} | stale) if use_snapshots else set()

    def rebuilt(i: int) -> None:
        if i in rebuild:
            save_inflight(rd.inflight_path(i), fold)  # the side file first, as Session does
            rd.save_snapshot(i, fold.state)
        if on_folded is not None:
            on_folded(fold, i)

    if on_folded is not None:
        on_folded(fold, start)
    refold(fold, records, start, where=str(rd.log_path), after=rebuilt if rebuild or on_folded is not None else None)
    return fold, records


_PREFETCH = 512  # records whose vectors a refold reads ahead in one go (RunStore.prefetch)


def refold(fold: LogFold, records: list[dict[str, Any]], start: int = 0, *, where: str = "log.jsonl",
           after: Callable[[int], None] | None = None) -> None:
    """Fold ``records[start:]`` (log records as JSON objects) into ``fold``, in order: each
    parsed (:func:`~rizz.formats.logrecord.parse_fast`, else
    :func:`~rizz.formats.logrecord.parse`) and applied, the vectors of the next
    :data:`_PREFETCH` records read ahead in a few batched queries when the store can
    (:meth:`~rizz.store.runstore.RunStore.prefetch`). ``after(i)``: called once record ``i``
    (1-based) is folded. What ``rizz replay`` and a resume run.

    Raises LogRecordError / LogFoldError naming ``<where>:<line>``."""
    prefetch = getattr(fold.store, "prefetch", None)
    for i, data in enumerate(records[start:], start + 1):
        if prefetch is not None and (i - start - 1) % _PREFETCH == 0:  # the next records' vectors, a few queries
            prefetch([k for d in records[i - 1:i - 1 + _PREFETCH] for k in _record_keys(d)])
        rec = parse_fast(data)  # a record as written reads in one call; anything else goes through parse
        if rec is None:
            rec = parse(data, f"{where}:{i}")
        try:
            fold.apply(rec)
        except LogFoldError as e:
            raise LogFoldError(f"{where}:{i}: {e}") from None
        if after is not None:
            after(i)


def _record_keys(data: dict[str, Any]) -> list[str]:
    """The embedding keys a record (as JSON) names: its input's, its judge label's, its rules'."""
    keys = [(data.get("input") or {}).get("embedding"), (data.get("judge") or {}).get("label_embedding")]
    keys += [r[2] for r in data.get("rules") or () if len(r) > 2]
    keys += [r[2] for r in (data.get("distill") or {}).get("rules") or () if len(r) > 2]
    return [k for k in keys if isinstance(k, str) and k]


def views(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One version-1-shaped dict per answered element, in answer order, for reports and summaries.

    A live ``answer`` record is joined with its ``verdict`` (``verdict`` key) or ``expire``
    (``expired`` key: the reason); a ``distill`` record's calls are added to the element whose
    verdict made the batch due. Version-1 and ``step`` records pass through.
    """
    out: list[dict[str, Any]] = []
    open_: dict[tuple[str, int], dict[str, Any]] = {}
    by_step: dict[int, dict[str, Any]] = {}
    for r in records:
        kind = r.get("kind", "step")
        if kind in ("step", "answer"):
            v = dict(r)
            out.append(v)
            by_step[r["step"]] = v
            if kind == "answer":
                open_[(r["id"], r["step"])] = v
        elif kind in ("verdict", "expire"):
            v = open_.pop((r["id"], r["step"]), None)
            if v is not None:
                if kind == "verdict":
                    v["verdict"] = r["verdict"]
                else:
                    v["expired"] = r["reason"]
                v["calls"] = list(v.get("calls", [])) + list(r.get("calls", []))
        elif kind == "distill" and r["step"] in by_step:
            v = by_step[r["step"]]
            v["calls"] = list(v.get("calls", [])) + list(r.get("calls", []))
            v["distill"] = {"asked": True, "rules": r["rules"]}
    return out
