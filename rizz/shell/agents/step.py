"""An episode as one step of a :class:`~rizz.shell.session.Session` (the glue to the core).

* :func:`answer_episode`: after routing and retrieval, run the agent loop with the episode's
  retrieved memory in every prompt; the pending answer's ``answer`` is the compact trajectory
  (request → calls → final answer), what a verified episode writes to episodic memory.
* :func:`verify_pending`: the episode verifier's verdict.
* :func:`memory_answer`: for a failed episode, the first wrong call instead (the branch-local
  anti-pattern, issue #13); the step input folded and logged carries it, so replay needs nothing else.

The core sees an episode as one transition, as any element (spec §6 gates apply unchanged).
"""

from __future__ import annotations

from typing import Any

import attrs

from rizz.core import StepInput, Verdict
from rizz.shell.agents.env import make_environment
from rizz.shell.agents.episode import Episode, compact_trajectory
from rizz.shell.agents.loop import run_episode
from rizz.shell.agents.model_agent import LLMUser, ModelAgent
from rizz.shell.verifiers.episodes import first_wrong_call, verify_episode

__all__ = ["answer_episode", "memory_answer", "verify_pending"]


def answer_episode(session: Any, el: Any, base: StepInput, plan: Any, judge: Any, calls: list[Any]) -> Any:
    """Run ``el``'s episode for ``session`` and return its :class:`~rizz.shell.session.Pending`."""
    from rizz.shell.session import Call, Pending

    roots = tuple(getattr(session, "data_roots", ()) or ())
    env = make_environment(el.environment, data_roots=roots)
    model = session.model
    if getattr(model, "scripted", False):
        agent, user = model.agent(), model.user()
    else:
        from rizz.shell.agents.native import NativeToolAgent, native_kind

        if native_kind(model) is not None:  # anthropic: tool_use blocks; openai: tools / tool_calls
            agent = NativeToolAgent(model, session.policy, plan.retrieved, session.budget(None))
        else:  # the embedded model (and any text backend): Python call syntax, parsed with ast
            agent = ModelAgent(model, session.policy, plan.retrieved, session.budget(None), session.rendering)
        umodel = getattr(session, "user_model", None) or model
        user = LLMUser(umodel, el.user, session.policy.agents.user_tokens) if el.user is not None else None
    ep = run_episode(el, agent, env, max_steps=session.policy.agents.max_steps, user=user)
    calls = list(calls) + [Call.of("answer", g) for g in getattr(agent, "generations", ())]
    calls += [Call.of("user", g) for g in getattr(user, "generations", ())]
    prompts = getattr(agent, "prompts", [])
    prompt = max(prompts, key=lambda p: p.token_count) if prompts else None
    first = prompts[0] if prompts else None
    answer = compact_trajectory(ep)
    step_input = attrs.evolve(
        base, answer=answer,
        prompt_rule_ids=first.item_ids("rules") if first else (), prompt_episode_keys=first.item_ids("examples") if first else (),
        prompt_tokens=prompt.token_count if prompt else 0,
        completion_tokens=sum(c.completion_tokens for c in calls if c.kind == "answer"),
        dropped=len(prompt.dropped) if prompt else 0)
    return Pending(el, step_input, prompt, ep.final, answer, bool(ep.calls) or bool(ep.final), judge, tuple(calls),
                   ep.stop == "overflow", session.rendering, episode=ep)


def verify_pending(p: Any, data_roots: tuple[Any, ...] = ()) -> Verdict:
    """The element's episode verifier on ``p.episode`` (0 for an overflowing episode)."""
    el = p.element
    if p.overflow or p.episode is None:
        return Verdict(0.0, el.verifier, parsed=False)
    v = verify_episode(el, p.episode, data_roots=data_roots)
    return Verdict(v.reward, el.verifier, parsed=v.parsed)


def memory_answer(p: Any, inp: StepInput, verdict: Verdict | None, threshold: float) -> StepInput:
    """``inp`` with the failed episode's first wrong call as its answer (verified: unchanged)."""
    ep: Episode | None = getattr(p, "episode", None)
    if ep is None or verdict is None or verdict.reward >= threshold:
        return inp
    return attrs.evolve(inp, answer=first_wrong_call(p.element, ep))
