"""How many LoCoMo prompts would show examples from *another* conversation (issue #12 §2).

``retrieval.examples_cross_scope`` decides whether an episode written from a scoped element
(one LoCoMo conversation) may be shown to questions of another scope. The embedded 135M model
verifies almost no LoCoMo answer (results/2026-11-30-locomo-conv41.md), so a real run writes no episode that
could cross. This script measures the *exposure* instead, with a scripted stand-in for the
model: every question is "answered" with its own reference and verified (reward 1), i.e. the
upper bound of what could be written and shown. Real embedder (the bundled MiniLM), real core,
real compiler order; no LLM. The figures are about retrieval, NOT answer quality.

For each setting it prints, over the questions of every conversation after the first:
- prompts with at least one example from another conversation;
- of the examples shown, how many come from another conversation;
- how many examples' answers (all, and the foreign ones) reach token F1 ≥ 0.6 (the write
  threshold) against the current question's reference — an example "carrying the answer".

Run (from the repo root)::

    RIZZ_THREADS=1 python benchmarks/scope_exposure.py STREAM.jsonl
"""

from __future__ import annotations

import sys

import attrs

from rizz.adapters.embedder import Embedder
from rizz.adapters.verifiers.metrics import token_f1
from rizz.core import Label, StepInput, Verdict, rizz, walled
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream

LABEL = Label("answer-question", "conversation-memory")  # stand-in judge label: one kind of work


def measure(path: str, cross_scope: bool, embedder: Embedder) -> dict[str, int]:
    base = load_policy("default")
    policy = attrs.evolve(base, retrieval=attrs.evolve(base.retrieval, examples_cross_scope=cross_scope))
    core = walled(rizz(policy))
    elements = read_stream(path).elements
    texts = [e.input if not e.instruction else f"{e.instruction}\n\n{e.input}" for e in elements]
    vecs = embedder.embed(texts)
    (lab,) = embedder.embed([LABEL.application.replace("-", " ")])
    state = core.init()
    first_scope = elements[0].scope
    out = {"questions": 0, "prompts_with_foreign": 0, "examples": 0, "examples_with_answer": 0, "foreign_examples": 0,
           "foreign_with_answer": 0}
    for t, (el, v) in enumerate(zip(elements, vecs)):
        x = StepInput(t, el.id, el.input, v.tobytes(), instruction=el.instruction, scope=el.scope, shape=el.shape,
                      context_only=el.context_only, time=el.time, instant_us=el.instant_us)
        if el.context_only:
            state = core.step(state, x, None)
            continue
        x = attrs.evolve(x, label=LABEL, label_embedding=lab.tobytes(), answer=el.references[0])
        ex = core.plan(state, x).retrieved.episodes
        if el.scope != first_scope:
            foreign = [s for s in ex if s.item.scope != el.scope]
            out["questions"] += 1
            out["examples"] += len(ex)
            out["examples_with_answer"] += sum(token_f1(s.item.answer, el.references[0]) >= 0.6 for s in ex)
            out["foreign_examples"] += len(foreign)
            out["prompts_with_foreign"] += bool(foreign)
            out["foreign_with_answer"] += sum(token_f1(s.item.answer, el.references[0]) >= 0.6 for s in foreign)
        x = attrs.evolve(x, prompt_episode_keys=tuple(s.item.key for s in ex))
        state = core.step(state, x, Verdict(1.0, "token_f1"))
    return out


def main() -> None:
    emb = Embedder()
    for cross in (True, False):
        print(f"examples_cross_scope={str(cross).lower()}:", measure(sys.argv[1], cross, emb))


if __name__ == "__main__":
    main()
