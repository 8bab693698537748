"""Superseded memories: the newest verified answer to an input wins.

Without this, contradicting memories of one input coexist: after a price change the prompt
showed "Answer: 10", "Answer: 12" and "Wrong answer: 10" for the same question. With
``write.supersede`` on, a verdict about an input retires every stored memory it contradicts,
as :class:`~rizz.core.events.MemoryRetired` events (the record moves to its branch's
quarantine, never retrieved, with the reason):

* a **verified** answer ``y`` (reward ≥ the write threshold): episodes of the same input with
  another answer (superseded), and anti-patterns of the same input with answer ``y`` (that
  answer is right now);
* a **substantive failure** with answer ``y`` (parsed, reward ≤ ``failure_threshold``):
  episodes of the same input with answer ``y`` (that answer is wrong now);
* a **restated context** item (a context-only element whose text and scope equal a stored
  item's): the older item, when the new one is not older by ``metadata.time`` (or, without
  times, always: it came later) — so the item kept carries the newest time and step. Two
  *different* context texts that disagree cannot be told apart without a model; §4's
  time-stamped, time-ordered scoped context shows the reader which is current.

With ``write.supersede_derived`` also on, what was *derived* from a contradicted answer goes
too (the two gaps left by the above):

* **working-memory turns** of the same input (text and scope; ``Turn.scope``) that carry the
  contradicted answer (after a verified ``y``: turns with another answer; after a failure of
  ``y``: turns with ``y``). A substantive failure's own turn is not remembered at all
  (:func:`rizz.core.decide.decide_memory`): its verdict already contradicts it;
* **procedural rules** distilled from a retired episode: a rule records the content keys of its
  distillation batch (``Rule.sources``, :func:`rizz.core.decide.batch_keys`); a rule whose
  batch held a retired episode is retired (out of its branch's rules, into quarantine, its
  counters ``retired`` so no family or global tier shows it). A batch mixes inputs, so a rule
  about another input of the same batch goes too: the cautious side, since the model saw the
  contradicted answer while writing it.

Both are off in a policy recorded before the field existed, so old logs refold unchanged.

"The same input" is the same input text and scope (a scope is one conversation, where the
same words can ask about another person), looked up in every branch of the state (the one
write outside the routed branch besides the lifecycle round: the memory retired is named in
the event). Candidates are the rows with cosine ≥ :data:`SAME_INPUT_COSINE` to ``φ(x)``
(found through a prefix filter that cannot miss one), then compared by text. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rizz.core import events as ev
from rizz.core.episode_index import index_of
from rizz.core.inputs import StepInput, Verdict
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, Episode, MemoryStore, Turn
from rizz.core.vec import as_vector

__all__ = ["SAME_INPUT_COSINE", "decide_supersede"]

#: Rows this close to ``φ(x)`` are compared by text (equal texts embed to equal vectors; the
#: margin absorbs float32 rounding only). Source: rizz.
SAME_INPUT_COSINE = 0.999
# Unit rows with cosine ≥ c differ from q by at most sqrt(2 − 2c) in every component, so
# comparing the first _PREFIX components first loses no candidate and reads one cache line
# per row instead of the whole (n, d) matrix (profiled: the full product doubled a step's cost).
_PREFIX = 16
_PREFIX_TOL = math.sqrt(2.0 * (1.0 - SAME_INPUT_COSINE)) + 1e-6


def _near(m: np.ndarray, q: np.ndarray) -> list[int]:
    """Rows of the (n, d) float32 ``m`` with cosine ≥ SAME_INPUT_COSINE to the (d,) ``q``."""
    if not len(m):
        return []
    d = min(_PREFIX, m.shape[1])
    cand = np.flatnonzero((np.abs(m[:, :d] - q[:d]) <= _PREFIX_TOL).all(axis=1))
    return cand[m[cand] @ q >= SAME_INPUT_COSINE].tolist() if len(cand) else []


def _same_input(store: MemoryStore[Any], q: np.ndarray, text: str, scope: str | None, text_field: str) -> list[object]:
    recs = (store.records[i] for i in _near(store.matrix.rows(), q))
    return [r for r in recs if getattr(r, text_field) == text and getattr(r, "scope", None) == scope]


def _same_input_episodes(state: AdaptiveState, q: np.ndarray, text: str, scope: str | None) -> list[tuple[str, Episode]]:
    """(branch id, episode) of every branch's episodes of the same input: one pass over the
    bank's episodic index instead of one per branch."""
    index = index_of(state)
    nums, local = index.where()
    out = []
    for j in _near(index.matrix.rows(), q):
        bid = f"b{int(nums[j])}"
        e = state.branches[bid].episodes.records[int(local[j])]
        if e.input == text and e.scope == scope:
            out.append((bid, e))
    return out


def _newer_or_same(new: int | None, old: int | None) -> bool:
    """Instants in µs UTC (``instant_us``, parsed by the shell); a missing one counts as newer."""
    if new is None or old is None:
        return True
    return new >= old


def decide_supersede(state: AdaptiveState, policy: Policy, inp: StepInput, verdict: Verdict | None) -> list[object]:
    """``MemoryRetired`` events for the memories ``inp`` and its ``verdict`` contradict (see the
    module docstring); ``[]`` when ``write.supersede`` or writes are off."""
    w = policy.write
    if not (w.supersede and w.enabled):
        return []
    q = as_vector(inp.embedding)
    out: list[object] = []
    t = inp.step
    if inp.context_only:
        for b in state.branches.values():
            for it in _same_input(b.context, q, inp.text, inp.scope, "text"):
                if _newer_or_same(inp.instant_us, it.instant_us):  # type: ignore[attr-defined]
                    out.append(ev.MemoryRetired(b.id, "context", it.key, f"superseded: restated at step {t}", t))  # type: ignore[attr-defined]
        return out
    if verdict is None or not verdict.parsed or inp.answer is None:
        return out
    ans = inp.answer
    if verdict.reward >= policy.write_threshold(verdict.verifier):
        why = f"superseded: answer {ans!r} verified at step {t}"
        eps = [(bid, e) for bid, e in _same_input_episodes(state, q, inp.text, inp.scope) if e.answer != ans]
        out += [ev.MemoryRetired(bid, "episodes", e.key, why, t) for bid, e in eps]
        for b in state.branches.values():
            for a in _same_input(b.anti_patterns, q, inp.text, inp.scope, "input"):
                if a.answer == ans:  # type: ignore[attr-defined]
                    out.append(ev.MemoryRetired(b.id, "anti_patterns", a.key, why, t))  # type: ignore[attr-defined]
        wrong = lambda turn: turn.answer != ans  # noqa: E731
    elif verdict.reward <= w.failure_threshold:
        why = f"superseded: answer {ans!r} failed verification at step {t}"
        eps = [(bid, e) for bid, e in _same_input_episodes(state, q, inp.text, inp.scope) if e.answer == ans]
        out += [ev.MemoryRetired(bid, "episodes", e.key, why, t) for bid, e in eps]
        wrong = lambda turn: turn.answer == ans  # noqa: E731
    else:
        return out
    if w.supersede_derived:
        out += _derived(state, inp, {e.key: e.answer for _, e in eps}, wrong, why)
    return out


def _derived(state: AdaptiveState, inp: StepInput, retired: dict[str, str], wrong: Callable[[Turn], bool], why: str) -> list[object]:
    """``write.supersede_derived``: working-memory turns of the same input (text and scope) whose
    answer is now ``wrong``, and procedural rules distilled from a ``retired`` episode (content
    key → answer; ``Rule.sources``), in branch order."""
    t = inp.step
    out: list[object] = [ev.MemoryRetired(turn.branch_id, "working_memory", f"turn-{turn.step}", why, t)
                         for turn in state.working_memory if turn.input == inp.text and turn.scope == inp.scope and wrong(turn)]
    if not retired:
        return out
    ledger = state.rule_ledger
    for b in state.branches.values():
        for rule in b.rules:
            hit = next((k for k in rule.sources if k in retired), None)
            if hit is not None and ledger.get(rule.id) is not None and ledger[rule.id].status != "retired":
                out.append(ev.MemoryRetired(b.id, "rules", rule.id, f"{why}: distilled from the retired answer {retired[hit]!r}", t))
    return out
