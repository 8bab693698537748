"""The effects of answering one element: embed, judge (when needed), route, retrieve, compile,
render, call the model, extract the answer: a :class:`~rizz.engine.pending.Pending` (its log
record: :func:`rizz.engine.codec.encode_step`).

:func:`answer_element` routes once: the core's ``route_round`` decides (and folds a spawn into a
new state value that the caller commits only after the record is on disk); retrieval reads that
state with that decision. :class:`~rizz.engine.session.Session` calls it under its lock.

A tool-using episode element (specs/stream-format.md, "Episode elements") takes the same route and retrieval, then runs the agent
loop (:func:`rizz.engine.agent_step.answer_episode`) instead of one model call; its record
carries the whole episode (``episode``), so a refold calls no model and no tool. One with a
simulated customer (τ-bench) asks the customer for its opening message first
(:func:`rizz.engine.agent_step.open_conversation`) and is embedded, labelled, routed and
retrieved from that message, never from the hidden brief (``el.input``); its loop starts from it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from rizz.adapters.models.base import Message, ModelBackend, sent_tokens
from rizz.adapters.verifiers import correction_of, extract_answer, verify
from rizz.core import (
    AdaptiveState,
    CompiledPrompt,
    Label,
    Policy,
    PromptBudgetError,
    Rizz,
    StepInput,
    Verdict,
    compile_prompt,
    needs_label,
    normalise_label,
    prompt_blocks,
    retrieve,
    sub_state,
    unwall,
)
from rizz.core.compiler import MEMORY_BLOCKS
from rizz.engine.agent_step import answer_episode, open_conversation, verify_episode_pending
from rizz.engine.judge import JudgeLabel, label_input, read_label
from rizz.engine.pending import Call, Embedded, Pending
from rizz.engine.render import TEMPLATE_SLACK, answer_settings, render
from rizz.formats.streams import StreamElement

__all__ = ["answer_element", "budget", "compile_sent", "default_rendering", "embed_texts", "embedding_text", "evidence_text", "label_text",
           "step_label", "verify_pending"]


def default_rendering(model: ModelBackend) -> str:
    """The backend's own ``default_rendering`` where it has one (the shipped Qwen instruct
    models: ``chat``; SmolLM2-135M: ``raw``), else ``raw`` for local GGUF models (few-shot
    completion) and ``chat`` for API backends."""
    own = getattr(model, "default_rendering", None) or getattr(getattr(model, "backend", None), "default_rendering", None)
    if own in ("raw", "chat", "chat-turns"):
        return str(own)
    return "raw" if model.name.startswith(("embedded", "gguf")) else "chat"


def embed_texts(embedder: Any, store: Any, texts: Sequence[str]) -> list[Embedded]:
    """Embed ``texts`` (through ``store.embed`` when there is a store, so the log holds keys).

    New vectors are put with ``defer=True`` when the store can (``EmbeddingStore``): fsynced in
    the background; the Session flushes the store before it writes a record naming them."""
    if store is not None:
        keys, vecs = store.embed(embedder, list(texts), **({"defer": True} if hasattr(store, "flush") else {}))
    else:
        vecs = embedder.embed(list(texts))
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    return [Embedded(v.tobytes(), k) for k, v in zip(keys, np.asarray(vecs, dtype=np.float32))]


def budget(policy: Policy, model: ModelBackend, shape: str | None, cap: int | None, reply_tokens: int | None = None) -> int:
    """Prompt budget in tokens: min(policy budget, ``cap``, window − answer tokens − thinking
    allowance (``?reasoning=N``) − template slack). Answer tokens: ``reply_tokens`` when given
    (an agent step reserves the policy's ``agents.reply_tokens``), else the shape's."""
    thinking = int(getattr(model, "reasoning_tokens", 0))
    answer = answer_settings(shape).max_tokens if reply_tokens is None else int(reply_tokens)
    room = model.context_window - answer - thinking - TEMPLATE_SLACK
    return max(1, min(policy.compiler.token_budget, room, cap if cap is not None else room))


def compile_sent(blocks: Any, policy: Policy, model: ModelBackend, shape: str | None, rendering: str,
                 limit: int) -> tuple[CompiledPrompt, list[Message]]:
    """The compiled prompt and its rendered messages, the messages **as sent** at most ``limit``
    tokens: the answer-format line, the rendering's frame and the chat template (its default
    system prompt included) count against the budget, not only the compiled text.

    Compiles under ``limit``, counts the messages as the backend sends them
    (:func:`~rizz.adapters.models.base.sent_tokens`: exact for the embedded models, an estimate
    elsewhere) and, while they are over, compiles again under a limit lowered by the excess (at
    most three times; the template's tokens do not depend on the content, so the second compile
    fits but for a token merged at a block's edge). The prompt's ``budget`` is ``limit``.
    Raises PromptBudgetError when the
    instruction and the input alone do not fit (the step is an overflow, scored 0)."""
    inner = limit
    for _ in range(3):
        prompt = compile_prompt(blocks, policy.compiler, model.count_tokens, inner)
        messages = render(prompt, shape, rendering)
        over = sent_tokens(model, messages, rendering) - limit
        if over <= 0:
            # the step's budget is ``limit`` (what the log's prompt.budget, summary.json's
            # budget_exceeded and rizz diff's budget source read), not the lowered compile limit
            return attrs.evolve(prompt, budget=limit), messages
        inner -= over
        if inner < 1:
            break
    raise PromptBudgetError(limit + over, limit)


def step_label(el: StreamElement, seen: str, policy: Policy, model: ModelBackend | None) -> tuple[Label, JudgeLabel]:
    """The label of a step whose route is in doubt, and the judge's reading it came from.

    ``seen``: the text the model is shown (:func:`embedding_text`'s ``seen``). The model judge
    (:func:`~rizz.engine.judge.label_input`, one call) labels it, or with ``routing.judge:
    local`` or ``model=None`` the judge's deterministic fallback
    (:func:`~rizz.engine.judge.read_label`, no call). An episode's function is what its agent
    does, ``use-tools``; its application is the judge's."""
    fa = policy.routing.fallback_application
    if model is None or policy.routing.judge == "local":
        jl = read_label("", seen, instruction=el.instruction, shape=el.shape, fallback_application=fa)
    else:
        jl = label_input(model, seen, instruction=el.instruction, shape=el.shape, fallback_application=fa)
    return normalise_label("use-tools" if el.is_episode else jl.function, jl.application), jl


def label_text(label: Label) -> str:
    """The text a label is embedded from (its ``label_embedding``): the application's words,
    ``"monetary-policy-stance"`` → ``"monetary policy stance"``."""
    return label.application.replace("-", " ")


def embedding_text(instruction: str | None, seen: str) -> str:
    """The text a step is embedded from (its route, retrieval and anchor): the input the model
    sees, after the instruction's task line.

    A one-line instruction (every shipped stream's but τ-bench's) is kept whole, so the text is
    ``f"{instruction}\n\n{seen}"``; of an instruction of several lines only its first non-blank
    line is kept. The shipped embedder reads at most 256 word pieces (all-MiniLM-L6-v2's
    ``max_seq_length``), so τ-bench's 6,000-character agent policy filled it: every episode of
    a domain had one vector (cosine 1.00 between a keyboard exchange and a t-shirt count),
    retail and airline 0.58 apart, and all 10 shipped τ-bench tasks shared one branch
    (``runs/tau10c``; results/2026-12-05-tau-embedding-text.md). With the task line
    ("# Retail agent policy") the same openings are 0.24-0.56 apart.
    """
    if not instruction:
        return seen
    lines = [line for line in instruction.splitlines() if line.strip()]
    head = instruction if len(lines) <= 1 else lines[0]
    return f"{head}\n\n{seen}"


def evidence_text(el: StreamElement) -> str | None:
    """The element's evidence items as the one text a step input carries (None without any)."""
    items = el.evidence_items
    return "\n\n".join(items) if items else None


def answer_element(core: Rizz, state: AdaptiveState, el: StreamElement, step: int, *, model: ModelBackend, embedder: Any,
                   store: Any, rendering: str, budget_cap: int | None, user_model: ModelBackend | None = None,
                   data_roots: tuple[Any, ...] = ()) -> Pending:
    """Answer ``el`` as step ``step`` against ``state`` (nothing is committed: see module docstring).

    ``user_model``: τ-bench's simulated customer (default ``model``); ``data_roots``: where an
    episode's environment data (τ-bench databases) is looked up first."""
    policy = core.policy
    # τ-bench: the customer speaks first; the agent's side sees its message, never the brief (el.input)
    user, opening = open_conversation(el, model, policy, user_model) if el.is_episode and not el.context_only else (None, None)
    seen = el.input if opening is None else opening
    (emb,) = embed_texts(embedder, store, [embedding_text(el.instruction, seen)])
    base = StepInput(step=step, item_id=el.id, text=seen, embedding=emb.vec, instruction=el.instruction,
                     evidence=evidence_text(el), scope=el.scope, shape=el.shape, context_only=el.context_only,
                     tenant=el.tenant, time=el.time, instant_us=el.instant_us)
    now = time.time()
    if el.context_only:
        return Pending(element=el, step_input=base, prompt=None, raw_output=None, answer=None, parsed=True, judge=None, calls=(),
                       overflow=False, rendering=rendering, routed=core.route_round(state, base), keys=(emb.key, None), time=now)
    calls: list[Call] = []
    judge, lkey = None, None
    declared = el.metadata.get("label") if policy.routing.declared_label else None
    if declared is not None:  # a caller-declared route (metadata.label, routing.declared_label): no judge call
        base = attrs.evolve(base, declared_label=normalise_label(declared["function"], declared["application"]))
    elif needs_label(sub_state(state, el.tenant), policy, emb.vec, el.shape):  # behind the tenant's wall
        label, jl = step_label(el, seen, policy, model)
        (lemb,) = embed_texts(embedder, store, [label_text(label)])
        base, lkey = attrs.evolve(base, label=label, label_embedding=lemb.vec), lemb.key
        judge = {"function": label.function, "application": label.application, "raw": jl.raw,
                 "repaired": jl.repaired, "fallback": jl.fallback}
        if jl.generation is not None:
            calls.append(Call.of("judge", jl.generation))
    routed = core.route_round(state, base)
    own, local, inner = unwall(routed.state, base, routed.decision)  # the tenant's sub-state and step (rizz.core.tenants)
    retrieved = retrieve(own, policy, local, inner)
    blocks = prompt_blocks(retrieved, seen, el.instruction, base.evidence)
    keys = (emb.key, lkey)
    if el.is_episode:  # a tool-using episode: the agent loop, one transition of the core
        return answer_episode(el, base, routed, retrieved, judge, calls, keys=keys, time=now, model=model, policy=policy,
                              budget=budget(policy, model, None, budget_cap, policy.agents.reply_tokens), rendering=rendering, user=user,
                              opening=opening, data_roots=data_roots)
    try:
        prompt, messages = compile_sent(blocks, policy, model, el.shape, rendering, budget(policy, model, el.shape, budget_cap))
    except PromptBudgetError:
        return Pending(element=el, step_input=base, prompt=None, raw_output=None, answer="", parsed=False, judge=judge, calls=tuple(calls),
                       overflow=True, rendering=rendering, routed=routed, keys=keys, time=now)
    settings = answer_settings(el.shape)
    raw = rendering == "raw"
    gen = model.generate(messages, max_tokens=settings.max_tokens,
                         stop=settings.stop if raw else (), rendering="raw" if raw else "chat")
    calls.append(Call.of("answer", gen))
    ext = extract_answer(gen.text, el.shape)
    step_input = attrs.evolve(
        base, answer=ext.answer, prompt_rule_ids=prompt.item_ids("rules"), prompt_episode_keys=prompt.item_ids("examples"),
        prompt_tokens=prompt.token_count, completion_tokens=gen.completion_tokens, dropped=len(prompt.dropped),
        prompt_blocks=tuple(sec.block for sec in prompt.sections if sec.block in MEMORY_BLOCKS),
    )
    return Pending(element=el, step_input=step_input, prompt=prompt, raw_output=gen.reply, answer=ext.answer, parsed=ext.parsed, judge=judge,
                   calls=tuple(calls), overflow=False, rendering=rendering, routed=routed, keys=keys, time=now, reasoning=gen.reasoning)


def verify_pending(p: Pending, model: ModelBackend, judge_model: ModelBackend | None = None,
                   calls: list[Call] | None = None, data_roots: tuple[Any, ...] = (), corrections: bool = False) -> Verdict | None:
    """Score ``p`` with the element's own verifier (None for context-only input).

    ``corrections``: a verdict below 1.0 carries the reference as its ``correction``
    (:func:`~rizz.adapters.verifiers.correction_of`), as a user who corrects the answer would
    (the ``write.corrections`` policy setting; results/2026-12-02-qwen05-heldout.md).

    ``calls``: where an ``llm_judge`` verifier's model calls are appended (kind ``verify``).
    An episode is scored by its episode verifier (``bfcl_ast``, ``bfcl_multi_turn``, ``tau_db``)
    on what it did (its correction, for single-turn BFCL and τ-bench: the gold calls or actions
    written as a compact trajectory, :func:`~rizz.engine.agent_step.episode_correction`); ``data_roots``: where τ-bench databases are looked up first.
    """
    el = p.element
    if el.context_only:
        return None
    name = el.verifier or "exact_match"
    if el.is_episode:
        return verify_episode_pending(p, data_roots, corrections)
    if p.overflow:
        return Verdict(0.0, name, parsed=False)
    judge_fn = None
    if name == "llm_judge":
        jm = judge_model or model

        def judge_fn(prompt: str) -> str:
            g = jm.generate([Message("user", prompt)], max_tokens=8)
            if calls is not None:
                calls.append(Call.of("verify", g))
            return g.text

    res = verify(name, p.raw_output or "", el.references or "", shape=el.shape, metadata=dict(el.metadata), judge=judge_fn)
    fix = correction_of(el.references or "", el.shape) if corrections and res.reward < 1.0 else None
    return Verdict(float(res.reward), name, parsed=res.parsed, correction=fix)
