"""An episode as one element of the Session/run loop (the glue to the core; specs/step-semantics.md).

* :func:`open_conversation`: τ-bench's simulated customer and its opening message, asked for
  first, so :func:`rizz.engine.answering.answer_element` embeds, labels, routes and retrieves
  from what the agent sees, never from the hidden brief (``el.input``).
* :func:`answer_episode`: after the route round and retrieval
  (:func:`rizz.engine.answering.answer_element`), run the agent loop, from that opening, with the episode's
  retrieved memory in every prompt; the pending answer's ``answer`` is the compact trajectory
  (request → calls → final answer), what a verified episode writes to episodic memory, and
  ``wrong_call`` the first wrong call, what a failed one writes as the branch-local
  anti-pattern (chosen when the verdict is folded: :func:`rizz.engine.logfold.memory_input`).
  The step input's ``text``, the input every memory item of the episode is written with, is
  the request the agent saw, as :func:`~rizz.engine.answering.answer_element` set it (the
  transcript's first user turn): τ-bench's customer's opening message, not the task's hidden
  brief (``el.input``); BFCL's ``el.input``.
* :func:`verify_episode_pending`: the episode verifier's verdict; with ``corrections``, a
  single-turn BFCL or τ-bench verdict below 1.0 carries the gold calls or actions as its
  ``correction`` (:func:`episode_correction`), in the compact trajectory's form (what
  ``write.corrections`` writes as a verified example).

The trajectory, the wrong call and that opening request travel in the log record
(``answer.extracted``, ``episode.wrong_call``, ``input.text``), so replay and resume need
nothing else. The core sees an episode as
one transition, as any element (route round at answer time, feedback round with the verdict,
distill round for rules; spec §6 gates apply unchanged).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from rizz.adapters.agents.calls import format_call
from rizz.adapters.agents.env import make_environment
from rizz.adapters.agents.episode import compact_trajectory, cut_trajectory
from rizz.adapters.agents.loop import run_episode
from rizz.adapters.models.oracle import gold_calls
from rizz.adapters.verifiers.episodes import first_wrong_call, verify_episode
from rizz.core import StepInput, Verdict
from rizz.core.compiler import MEMORY_BLOCKS
from rizz.engine.model_agent import LLMUser, ModelAgent
from rizz.engine.native_agent import NativeToolAgent, native_kind
from rizz.engine.pending import Call, Pending

__all__ = ["answer_episode", "open_conversation", "verify_episode_pending"]


def open_conversation(el: Any, model: Any, policy: Any, user_model: Any = None) -> tuple[Any, str | None]:
    """``el``'s simulated customer and its opening message, asked for before anything else of
    the step; ``(None, None)`` for an element without one (BFCL, a non-episode element).

    τ-bench's agent never sees the brief (``el.input`` = ``el.user``): it sees the customer's
    first message, so :func:`rizz.engine.answering.answer_element` embeds, labels (the judge),
    routes and retrieves from that message, and :func:`answer_episode` starts the loop from it
    (the customer is not asked for it twice). The customer: ``--user-model`` (``user_model``),
    else ``model`` (the oracle's scripted customer when ``model`` is the oracle and no user
    model is given). Its generation stays in the customer's ``generations``, logged with the
    step's calls (kind ``user``); the message itself is logged as the step's ``input.text`` and
    the transcript's first turn, so replay and resume ask no model for it."""
    if el.user is None:
        return None, None
    if getattr(model, "scripted", False) and user_model is None:  # --model oracle
        user = model.user()
    else:
        user = LLMUser(user_model or model, el.user, policy.agents.user_tokens)
    return user, user.reply([])


def answer_episode(el: Any, base: StepInput, routed: Any, retrieved: Any, judge: Any, calls: list[Any], *, keys: tuple[str, str | None],
                   time: float, model: Any, policy: Any, budget: int, rendering: str, user: Any = None, opening: str | None = None,
                   data_roots: tuple[Any, ...] = ()) -> Any:
    """Run ``el``'s episode and return its :class:`~rizz.engine.pending.Pending`.

    ``routed``: the route round's result; ``retrieved``: the memory read with its decision;
    ``budget``: the prompt budget of every agent call (tokens); ``user`` and ``opening``:
    τ-bench's simulated customer and the first message it already wrote
    (:func:`open_conversation`), the transcript's first turn (None, None: no customer).
    """
    env = make_environment(el.environment, data_roots=data_roots)
    if getattr(model, "scripted", False):  # --model oracle; with --user-model a model plays its customer
        agent = model.agent()
    else:
        kind = native_kind(model)  # anthropic: tool_use blocks; openai: tools / tool_calls; template: <tool_call>
        if kind is not None:
            agent = NativeToolAgent(model, policy, retrieved, budget)
            rendering = "chat" if kind == "template" else rendering  # the GGUF's chat template, whatever --rendering
        else:  # SmolLM2, a gguf:PATH without a tool template, any text backend: Python call syntax, parsed with ast
            agent = ModelAgent(model, policy, retrieved, budget, rendering)
    ep = run_episode(el, agent, env, max_steps=policy.agents.max_steps, user=user, repeat_stop=policy.agents.repeat_stop,
                     opening=opening)
    gens = list(getattr(agent, "generations", ()))
    calls = list(calls) + [Call.of("answer", g) for g in gens]
    # a request the server refused as too long (the episode's last): one of its model_calls, so one of its calls
    calls += [Call.of("answer", g, refused=True) for g in getattr(agent, "refusals", ())]
    calls += [Call.of("user", g) for g in getattr(user, "generations", ())]
    prompts = getattr(agent, "prompts", [])
    prompt = max(prompts, key=lambda p: p.token_count) if prompts else None
    first = prompts[0] if prompts else None
    answer = compact_trajectory(ep)
    step_input = attrs.evolve(
        base, answer=answer,
        prompt_rule_ids=first.item_ids("rules") if first else (), prompt_episode_keys=first.item_ids("examples") if first else (),
        prompt_blocks=tuple(sec.block for sec in first.sections if sec.block in MEMORY_BLOCKS) if first else (),
        prompt_tokens=prompt.token_count if prompt else 0,
        completion_tokens=sum(c.completion_tokens for c in calls if c.kind == "answer"),
        dropped=len(prompt.dropped) if prompt else 0)
    reasoning = "\n\n".join(g.reasoning for g in gens if getattr(g, "reasoning", ""))
    return Pending(element=el, step_input=step_input, prompt=prompt, raw_output=ep.final, answer=answer,
                   parsed=bool(ep.calls) or bool(ep.final), judge=judge, calls=tuple(calls), overflow=ep.stop == "overflow",
                   rendering=rendering, routed=routed, keys=keys, time=time, reasoning=reasoning, episode=ep,
                   wrong_call=first_wrong_call(el, ep))


def episode_correction(el: Any) -> str | None:
    """The right trajectory of a failed episode in the form a verified episode writes
    (:func:`~rizz.adapters.agents.episode.compact_trajectory`), or None for multi-turn BFCL
    (its gold is a sequence of user turns, not one trajectory).

    Single-turn BFCL: the gold reply, ``call; call`` (``(no tool call)`` for an irrelevance
    item). τ-bench: its gold database actions in order, then ``-> `` and the outputs the agent
    must say when the task has any (the reference's ``actions`` and ``outputs``), cut to the
    same 1,200 characters as a verified trajectory.
    """
    if el.verifier == "tau_db":
        gold = json.loads(el.reference)
        text = "; ".join(format_call(c) for (c,) in gold_calls(el, None)) or "(no tool call)"
        if gold.get("outputs"):
            text += " -> " + "; ".join(str(o) for o in gold["outputs"])
        return cut_trajectory(text)
    if el.verifier != "bfcl_ast":
        return None
    replies = gold_calls(el, None)
    return "; ".join(format_call(c) for c in replies[0]) if replies else "(no tool call)"


def verify_episode_pending(p: Any, data_roots: tuple[Any, ...] = (), corrections: bool = False) -> Verdict:
    """The element's episode verifier on ``p.episode`` (0 for an overflowing episode); with
    ``corrections``, a reward below 1.0 carries :func:`episode_correction`."""
    el = p.element
    if p.overflow or p.episode is None:
        v_reward, parsed = 0.0, False
    else:
        v = verify_episode(el, p.episode, data_roots=data_roots)
        v_reward, parsed = v.reward, v.parsed
    fix = episode_correction(el) if corrections and v_reward < 1.0 else None
    return Verdict(v_reward, el.verifier, parsed=parsed, correction=fix)
