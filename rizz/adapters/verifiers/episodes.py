"""Tool-episode verifiers (docs/agents.md): ``bfcl_ast``, ``bfcl_multi_turn``, ``tau_db``.

Each scores a finished :class:`~rizz.adapters.agents.episode.ToolEpisode` against the element's gold
(``reference``, a JSON string; specs/stream-format.md, "Episode elements"):

* ``bfcl_ast``: BFCL's AST checker (bfcl-eval) on the calls of the episode's reply; the
  category (``metadata.category``) picks simple / multiple / parallel checking and the language
  (Java, JavaScript: the reference's ``function`` docs carry the language types the checker
  converts the string values to). A reference ``{"call": false}`` (BFCL's irrelevance
  categories) scores 1 iff the reply calls nothing, ``{"call": true}`` (live relevance) iff it
  calls something, as BFCL's relevance runner (no argument is checked there).
* ``bfcl_multi_turn``: BFCL's multi-turn checker: after each turn the API objects' state must
  equal the gold's, and the gold's execution results must appear among the model's. The checker
  re-executes calls with ``eval``; only calls whose name is a method of the involved API
  classes reach it, re-written from parsed literals (:func:`~rizz.adapters.agents.calls.format_call`).
* ``tau_db``: τ-bench's reward: 1 iff the final database digest equals the digest after the gold
  actions (``transfer_to_human_agents`` excluded) on a fresh database, and every required output
  appears in something the agent said (case-insensitive, commas removed); else 0.

:func:`first_wrong_call` names the call a failed episode should not repeat (its anti-pattern).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import attrs

from rizz.adapters.agents.bfcl_env import ast_checker, language
from rizz.adapters.agents.calls import ToolCall, format_call
from rizz.adapters.agents.env import make_environment
from rizz.adapters.agents.episode import ToolEpisode
from rizz.formats.streams import StreamElement

__all__ = ["EpisodeVerdict", "first_wrong_call", "verify_episode"]

_COUNTER = itertools.count()


@attrs.frozen
class EpisodeVerdict:
    """``reward`` in [0, 1]; ``parsed`` False when the agent made no call where calls were due;
    ``detail``: the checker's reason for a 0 (empty on success)."""

    reward: float
    parsed: bool
    detail: str = ""


def _bfcl_ast(el: StreamElement, ep: ToolEpisode) -> EpisodeVerdict:
    from bfcl_eval.constants.enums import Language

    calls = ep.calls
    ref = json.loads(el.reference)
    if isinstance(ref, dict) and "call" in ref:  # (ir)relevance: BFCL checks only whether a call was made
        if ref["call"]:
            return EpisodeVerdict(1.0, True) if calls else EpisodeVerdict(0.0, False, "no function call")
        return EpisodeVerdict(0.0, True, f"a function call where none fits: {format_call(calls[0])}") if calls \
            else EpisodeVerdict(1.0, True)
    if not calls:
        return EpisodeVerdict(0.0, False, "no function call")
    category = el.metadata.get("category") or "simple_python"
    if isinstance(ref, dict):  # Java / JavaScript: the docs in the language's own types, for the type conversion
        tools, gold = ref["function"], ref["ground_truth"]
    else:
        tools, gold = [json.loads(json.dumps(dict(t), default=list)) for t in _plain_tools(el)], ref
    res = ast_checker()(tools, [{c.name: c.arguments} for c in calls], gold, Language(language(category)), category, "rizz")
    return EpisodeVerdict(1.0 if res["valid"] else 0.0, True, "" if res["valid"] else "; ".join(map(str, res.get("error", []))))


def _plain_tools(el: StreamElement) -> list[Any]:
    from pyrsistent import thaw

    return [thaw(t) for t in el.tools or ()]


def _bfcl_multi_turn(el: StreamElement, ep: ToolEpisode) -> EpisodeVerdict:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
    from pyrsistent import thaw

    env = thaw(el.environment)
    gold = json.loads(el.reference)
    api = make_environment(el.environment)
    methods = set(getattr(api, "methods", {}))
    safe = [[[c for c in step if c.split("(", 1)[0] in methods] for step in turn] for turn in ep.turn_calls]
    safe += [[] for _ in range(len(gold) - len(safe))]
    model_name = f"rizz_{next(_COUNTER)}"
    # the checker reads the category off the id: ``long_context`` in it loads the padded
    # scenario, which must be the one the episode ran on (``environment.long_context``)
    entry_id = str(el.metadata.get("bfcl_id") or f"{el.metadata.get('category') or 'multi_turn_base'}_x")
    if bool(env.get("long_context")) != ("long_context" in entry_id):
        entry_id = "multi_turn_long_context_x" if env.get("long_context") else "multi_turn_base_x"
    entry = {"id": entry_id, "initial_config": env.get("initial_config", {}), "involved_classes": env["involved_classes"]}
    try:
        res = multi_turn_checker(safe, gold, entry, "multi_turn_base", model_name)
    finally:  # the checker keeps API objects in its module globals, keyed by model name
        for key in [k for k in vars(multi_turn_utils) if k.startswith(model_name)]:
            delattr(multi_turn_utils, key)
    return EpisodeVerdict(1.0 if res["valid"] else 0.0, bool(ep.calls), "" if res["valid"] else str(res.get("error_message", "")))


def _norm(text: str) -> str:
    return text.lower().replace(",", "")


def gold_digest(el: StreamElement, data_roots: tuple[Any, ...] = ()) -> str:
    """The τ-bench database digest after the element's gold actions on a fresh database."""
    env = make_environment(el.environment, data_roots=data_roots)
    for action in json.loads(el.reference)["actions"]:
        if action["name"] == "transfer_to_human_agents":
            continue
        try:
            env.call(action["name"], action["kwargs"])
        except Exception:  # noqa: BLE001 - a gold action the policy refuses changes nothing
            pass
    return env.state_digest()


def _tau_db(el: StreamElement, ep: ToolEpisode, data_roots: tuple[Any, ...] = ()) -> EpisodeVerdict:
    gold = json.loads(el.reference)
    if ep.env_digest != gold_digest(el, data_roots):
        return EpisodeVerdict(0.0, bool(ep.calls), "the final database differs from the gold one")
    said = [_norm(m) for m in ep.messages]
    missing = [o for o in gold.get("outputs", []) if not any(_norm(o) in s for s in said)]
    if missing:
        return EpisodeVerdict(0.0, True, f"required output not said: {missing[0]!r}")
    return EpisodeVerdict(1.0, True)


def verify_episode(el: StreamElement, ep: ToolEpisode, *, data_roots: tuple[Any, ...] = ()) -> EpisodeVerdict:
    """Score ``ep`` with ``el.verifier`` (one of the episode verifiers). Raises ValueError otherwise."""
    if el.verifier == "bfcl_ast":
        return _bfcl_ast(el, ep)
    if el.verifier == "bfcl_multi_turn":
        return _bfcl_multi_turn(el, ep)
    if el.verifier == "tau_db":
        return _tau_db(el, ep, data_roots)
    raise ValueError(f"{el.id}: {el.verifier!r} is not an episode verifier")


_SPACE = re.compile(r"\s+")


def first_wrong_call(el: StreamElement, ep: ToolEpisode) -> str:
    """The call a failed episode should not repeat: the first agent call that is not the gold
    call at its position (τ-bench gold actions; BFCL gold calls), else the last failing call,
    else the last call; ``(no tool call)`` when the agent called nothing."""
    calls = list(ep.calls)
    if not calls:
        return "(no tool call)"
    gold: list[ToolCall] = []
    try:
        ref = json.loads(el.reference) if isinstance(el.reference, str) else None
        if el.verifier == "tau_db":
            gold = [ToolCall(a["name"], a["kwargs"]) for a in ref["actions"]]
        elif el.verifier == "bfcl_ast":
            if isinstance(ref, dict) and ref.get("call") is False:
                return _SPACE.sub(" ", format_call(calls[0]))[:600]  # irrelevance: any call is the wrong one
            gold = [ToolCall(next(iter(i)), {}) for i in (ref["ground_truth"] if isinstance(ref, dict) else ref)]
    except (ValueError, TypeError, KeyError):
        gold = []
    if gold:
        for i, call in enumerate(calls):
            want = gold[i] if i < len(gold) else None
            same = want is not None and (call == want if el.verifier == "tau_db" else call.name == want.name)
            if not same:  # the wrong call only: the gold itself never goes into memory
                return _SPACE.sub(" ", format_call(call))[:600]
    failed = [e for e in ep.transcript if e["role"] == "tool" and e["error"]]
    if failed:
        e = failed[-1]
        return _SPACE.sub(" ", f"{format_call(ToolCall(e['name'], e['arguments']))} -> {e['result']}")[:600]
    return format_call(calls[-1])[:600]
