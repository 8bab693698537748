"""A RIZZ session: the effects around the pure core, one stream element at a time.

``Session.answer(element)`` embeds the input, asks the judge when the policy needs a label,
plans (route + retrieve) and compiles the prompt through the core, renders it, calls the
frozen model and extracts the answer. ``Session.fold(pending, verdict)`` then distils rules
when a branch's batch is due and folds the step into the state. ``rizz run`` uses exactly
this path; an application can use it with verdicts that arrive later.

Example (a runnable version is in the README)::

    s = Session(load_policy("default"), load_model("embedded"), Embedder())
    p = s.answer(element)                # p.answer, p.prompt.token_count, p.prompt.dropped
    rec = s.fold(p, s.verify(p))         # or s.fold(p, Verdict(reward, "my_metric"))
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import attrs
import numpy as np
from attrs import frozen

from rizz.core import (
    AdaptiveState,
    CandidateRule,
    CompiledPrompt,
    Policy,
    PromptBudgetError,
    StepInput,
    Verdict,
    compile_prompt,
    distill_batch,
    needs_label,
    normalise_label,
    prompt_blocks,
    rizz,
)
from rizz.core import events as ev
from rizz.core.compiler import MEMORY_BLOCKS
from rizz.shell.distill import distill_rules
from rizz.shell.judge import label_input
from rizz.shell.models.base import Generation, Message, ModelBackend
from rizz.shell.render import TEMPLATE_SLACK, answer_settings, render
from rizz.shell.streams import StreamElement
from rizz.shell.verifiers import extract_answer, verify

__all__ = ["Call", "Pending", "Session", "default_rendering"]


def default_rendering(model: ModelBackend) -> str:
    """``raw`` for local GGUF models (few-shot completion), ``chat`` for API backends."""
    return "raw" if model.name.startswith(("embedded", "gguf")) else "chat"


@frozen
class Call:
    """One model call: ``kind`` is ``judge``, ``answer`` or ``distill``; tokens; seconds; USD."""

    kind: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float | None
    cached: bool

    @classmethod
    def of(cls, kind: str, g: Generation) -> "Call":
        return cls(kind, g.prompt_tokens, g.completion_tokens, g.latency_s, g.cost_usd, g.cached)


@frozen
class Pending:
    """An answered (or context-only) element waiting for its verdict.

    ``step_input`` has every logged value except distilled rules; ``prompt`` is None for
    context-only input and when the input alone overflows the budget (``overflow`` True).
    """

    element: StreamElement
    step_input: StepInput
    prompt: CompiledPrompt | None
    raw_output: str | None
    answer: str | None
    parsed: bool
    judge: dict[str, Any] | None
    calls: tuple[Call, ...]
    overflow: bool
    rendering: str


def _evidence(el: StreamElement) -> str | None:
    items = el.evidence_items
    return "\n\n".join(items) if items else None


class Session:
    """Stateful wrapper around the pure core for one run (not thread-safe).

    Args:
      policy: the RIZZ policy.
      model: the frozen model (any :class:`ModelBackend`).
      embedder: has ``name``, ``dim`` and ``embed(texts) -> (n, d) float32`` L2-normalised.
      state: the state to continue from (default: empty).
      step: index of the next step.
      rendering: ``raw`` / ``chat`` / ``chat-turns`` (default: :func:`default_rendering`).
      budget_cap: optional cap on the prompt budget (tokens), the same for every policy of a bench.
      embed_cache: optional mapping-like store with ``embed(embedder, texts) -> (keys, (n, d))``
        (e.g. :class:`rizz.shell.embed.EmbeddingStore`) so the run log holds embedding keys.
    """

    def __init__(self, policy: Policy, model: ModelBackend, embedder: Any, *, state: AdaptiveState | None = None,
                 step: int = 0, rendering: str | None = None, embed_cache: Any = None, budget_cap: int | None = None) -> None:
        self.policy = policy
        self.core = rizz(policy)
        self.model = model
        self.embedder = embedder
        self.state = state if state is not None else self.core.init()
        self.step_index = step
        self.rendering = rendering or default_rendering(model)
        self.embed_cache = embed_cache
        self.budget_cap = budget_cap
        self.keys: dict[bytes, str] = {}
        self._answered: list[Pending] = []  # what answer() returned in the current step

    # -- effects -----------------------------------------------------------------------
    def _embed(self, texts: Sequence[str]) -> list[bytes]:
        if self.embed_cache is not None:
            keys, vecs = self.embed_cache.embed(self.embedder, list(texts))
        else:
            vecs = self.embedder.embed(list(texts))
            keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        out = []
        for k, v in zip(keys, np.asarray(vecs, dtype=np.float32)):
            b = v.tobytes()
            self.keys[b] = k
            out.append(b)
        return out

    def budget(self, shape: str | None) -> int:
        """Prompt budget in tokens: min(policy budget, ``budget_cap``, window − answer tokens − template slack)."""
        room = self.model.context_window - answer_settings(shape).max_tokens - TEMPLATE_SLACK
        cap = self.budget_cap if self.budget_cap is not None else room
        return max(1, min(self.policy.compiler.token_budget, room, cap))

    def answer(self, el: StreamElement) -> Pending:
        """Route, retrieve, compile, call the model and extract the answer for ``el``.

        The pending answer belongs to the current step: fold it (once) before answering the
        next element; answering another element in the same step makes the unfolded one stale.
        """
        p = self._answer(el)
        self._answered.append(p)
        return p

    def _answer(self, el: StreamElement) -> Pending:
        text = el.input if not el.instruction else f"{el.instruction}\n\n{el.input}"
        (emb,) = self._embed([text])
        base = StepInput(
            step=self.step_index, item_id=el.id, text=el.input, embedding=emb, instruction=el.instruction,
            evidence=_evidence(el), scope=el.scope, shape=el.shape, context_only=el.context_only,
        )
        if el.context_only:
            return Pending(el, base, None, None, None, True, None, (), False, self.rendering)
        calls: list[Call] = []
        judge = None
        declared = el.metadata.get("label") if self.policy.routing.declared_label else None
        if declared is not None:  # a caller-declared route (metadata.label): no judge call
            base = attrs.evolve(base, declared_label=normalise_label(declared["function"], declared["application"]))
        elif needs_label(self.state, self.policy, emb, el.shape):
            jl = label_input(self.model, el.input, instruction=el.instruction, shape=el.shape)
            label = normalise_label(jl.function, jl.application)
            (lemb,) = self._embed([label.application.replace("-", " ")])
            base = attrs.evolve(base, label=label, label_embedding=lemb)
            judge = {"function": label.function, "application": label.application, "raw": jl.raw,
                     "repaired": jl.repaired, "fallback": jl.fallback}
            if jl.generation is not None:
                calls.append(Call.of("judge", jl.generation))
        plan = self.core.plan(self.state, base)
        blocks = prompt_blocks(plan.retrieved, el.input, el.instruction, base.evidence)
        try:
            prompt = compile_prompt(blocks, self.policy.compiler, self.model.count_tokens, self.budget(el.shape))
        except PromptBudgetError:
            return Pending(el, base, None, None, "", False, judge, tuple(calls), True, self.rendering)
        settings = answer_settings(el.shape)
        gen = self.model.generate(render(prompt, el.shape, self.rendering), max_tokens=settings.max_tokens,
                                  stop=settings.stop if self.rendering == "raw" else (), rendering="raw" if self.rendering == "raw" else "chat")
        calls.append(Call.of("answer", gen))
        ext = extract_answer(gen.text, el.shape)
        step_input = attrs.evolve(
            base, answer=ext.answer, prompt_rule_ids=prompt.item_ids("rules"), prompt_episode_keys=prompt.item_ids("examples"),
            prompt_tokens=prompt.token_count, completion_tokens=gen.completion_tokens, dropped=len(prompt.dropped),
            prompt_blocks=tuple(sec.block for sec in prompt.sections if sec.block in MEMORY_BLOCKS),
        )
        return Pending(el, step_input, prompt, gen.text, ext.answer, ext.parsed, judge, tuple(calls), False, self.rendering)

    def verify(self, p: Pending, judge_model: ModelBackend | None = None) -> Verdict | None:
        """Score ``p`` with the element's own verifier (None for context-only input)."""
        el = p.element
        if el.context_only:
            return None
        name = el.verifier or "exact_match"
        if p.overflow:
            return Verdict(0.0, name, parsed=False)
        judge_fn = None
        if name == "llm_judge":
            jm = judge_model or self.model

            def judge_fn(prompt: str) -> str:
                return jm.generate([Message("user", prompt)], max_tokens=8).text

        res = verify(name, p.raw_output or "", el.references or "", shape=el.shape, metadata=dict(el.metadata), judge=judge_fn)
        return Verdict(float(res.reward), name, parsed=res.parsed)

    def fold(self, p: Pending, verdict: Verdict | None) -> tuple[StepInput, tuple[object, ...], tuple[Call, ...]]:
        """Distil rules if a batch is due, then fold the step. Returns (final input, events, calls).

        Raises:
          ValueError: if ``p`` is not a pending answer of this session's current step (already
            folded, from an earlier step, or from another session); nothing is folded.
        """
        if p.step_input.step != self.step_index:
            raise ValueError(
                f"fold: pending {p.element.id!r} was answered at step {p.step_input.step}, but the session is at "
                f"step {self.step_index}; each answer is folded once, in the step it was answered "
                "(call answer() again to fold the element now)")
        if not any(q is p for q in self._answered):
            raise ValueError(f"fold: pending {p.element.id!r} was not answered by this session at step "
                             f"{self.step_index} (fold what this session's answer() returned)")
        inp = p.step_input
        calls = list(p.calls)
        if not inp.context_only and self.policy.rules.enabled and verdict is not None:
            provisional = self.core.step_with_events(self.state, inp, verdict)
            branch_id = next(e.branch_id for e in provisional.events if isinstance(e, ev.Routed))
            batch = distill_batch(provisional.state, self.policy, branch_id)
            if batch:
                label = provisional.state.branches[branch_id].label
                res = distill_rules(self.model, [(e.input, e.answer) for e in batch], function=label.function,
                                    application=label.application)
                if res.generation is not None:
                    calls.append(Call.of("distill", res.generation))
                texts = [f"IF {r.antecedent} THEN {r.strategy}" for r in res.rules]
                embs = self._embed(texts) if texts else []
                cands = tuple(CandidateRule(r.antecedent, r.strategy, e) for r, e in zip(res.rules, embs))
                inp = attrs.evolve(inp, candidate_rules=cands, distilled=True)
        result = self.core.step_with_events(self.state, inp, verdict)
        self.state = result.state
        self.step_index += 1
        self._answered.clear()
        return inp, result.events, tuple(calls)

    def key_of(self, vec: bytes) -> str:
        """The embedding-store key of a vector this session embedded."""
        return self.keys[vec]

