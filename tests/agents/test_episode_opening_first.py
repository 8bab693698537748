"""A τ-bench element is embedded, labelled, routed and retrieved from what the agent sees.

The element's ``input`` is τ-bench's hidden brief (``el.user``), which only the simulated
customer may see. The customer's opening message is produced first (one customer call,
recorded with the step's calls), and the embedding, the judge's label, the route and the
retrieval all take that message; the agent loop then starts from it (it is not asked for
again). Nothing sent to the agent's model (its prompts, the judge's) holds the brief, and a
replay of the run (no model) gives the live state digest. BFCL elements are unchanged: their
embedded texts, prompts and state digests are pinned to what they were before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rizz.adapters.agents.calls import ToolCall, format_call
from rizz.adapters.models.oracle import OracleModel
from rizz.core import Verdict
from rizz.engine.answering import embedding_text
from rizz.engine.model_agent import GREETING
from rizz.engine.run import replay
from rizz.engine.session import Session
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import read_stream
from tests.agents.conftest import StubModel
from tests.shell.stubs import HashEmbedder

DATA = Path(__file__).resolve().parents[2] / "data"
TAU = read_stream(DATA / "tau-bench-mini" / "test.jsonl").elements
BFCL = read_stream(DATA / "bfcl-mini" / "test.jsonl").elements
OPENING = "Hi, I need help with my order."
CUSTOMER = "You are playing a customer"


class RecordingEmbedder(HashEmbedder):
    """The stub hash embedder, keeping every text it is given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


def _gold(el):
    return [ToolCall(a["name"], a["kwargs"]) for a in json.loads(el.reference)["actions"]]


def _customer_then_gold(el):
    """Customer: OPENING to the greeting, then ###STOP###. Agent: ``el``'s gold calls, then its
    outputs. Anything else (the judge): an empty reply."""
    def fn(prompt: str) -> str:
        if prompt.startswith(CUSTOMER):
            return OPENING if prompt.endswith(GREETING) else "###STOP###"
        if "Tools:" not in prompt:
            return ""
        script = [format_call(c) for c in _gold(el)]
        done = prompt.count("\nTool ")
        return script[done] if done < len(script) else (" ".join(json.loads(el.reference)["outputs"]) or "Done.")
    return StubModel(fn)


def _brief_words(el) -> str:
    """A distinctive stretch of the brief (its first sentence), which only the customer may see."""
    return el.user.split(".")[0]


def test_tau_element_is_embedded_labelled_and_routed_from_the_opening(tmp_path) -> None:
    el = TAU[0]
    assert OPENING not in el.user and el.input == el.user
    emb, model = RecordingEmbedder(), _customer_then_gold(el)
    s = Session.open(tmp_path / "live", policy=load_policy("judge-always"), model=model, embedder=emb)
    p = s.answer(el)
    # the embedder saw the opening after the domain policy's task line, never the brief
    assert emb.texts and emb.texts[0] == f"# Retail agent policy\n\n{OPENING}"
    assert all(_brief_words(el) not in t for t in emb.texts)
    assert p.step_input.text == OPENING
    assert p.step_input.embedding == HashEmbedder().embed([f"# Retail agent policy\n\n{OPENING}"])[0].tobytes()
    # the judge labelled the opening (and the route took that label and that embedding)
    judged = [q for q in model.prompts if not q.startswith(CUSTOMER) and "Tools:" not in q]
    assert judged and all(OPENING in q and _brief_words(el) not in q for q in judged)
    assert p.judge is not None and p.routed.decision is not None
    s.close()


def test_no_prompt_to_the_agents_model_holds_the_brief(tmp_path) -> None:
    first, second = TAU[0], TAU[1]
    model = _customer_then_gold(first)
    s = Session.open(tmp_path / "live", policy=load_policy("judge-always"), model=model, embedder=RecordingEmbedder())
    s.answer(first)
    s.fold(first.id, Verdict(1.0, "tau_db"))
    model.fn = _customer_then_gold(second).fn
    s.answer(second)
    s.fold(second.id, Verdict(1.0, "tau_db"))
    agent_side = [q for q in model.prompts if not q.startswith(CUSTOMER)]
    assert any("Tools:" in q for q in agent_side) and any("Tools:" not in q for q in agent_side)  # the agent's, the judge's
    assert all(_brief_words(el) not in q for q in agent_side for el in (first, second))
    s.close()


def test_the_opening_is_asked_for_once_and_starts_the_transcript(tmp_path) -> None:
    el = TAU[0]
    model = _customer_then_gold(el)
    s = Session.open(tmp_path / "live", policy=load_policy("judge-always"), model=model, embedder=RecordingEmbedder())
    p = s.answer(el)
    openings = [q for q in model.prompts if q.startswith(CUSTOMER) and q.endswith(GREETING)]
    assert len(openings) == 1 and model.prompts[0] == openings[0]  # asked for first (before the judge), once
    assert p.episode.transcript[0] == {"role": "user", "text": OPENING}
    customer = [q for q in model.prompts if q.startswith(CUSTOMER)]
    assert p.episode.user_calls == len(customer) == sum(1 for c in p.calls if c.kind == "user")
    s.close()


def test_a_replayed_tau_run_gives_the_live_digest_with_no_model(tmp_path) -> None:
    first, second = TAU[0], TAU[1]
    emb, model = RecordingEmbedder(), _customer_then_gold(first)
    s = Session.open(tmp_path / "live", policy=load_policy("default"), model=model, embedder=emb)
    s.answer(first)
    s.fold(first.id, Verdict(1.0, "tau_db"))
    model.fn = _customer_then_gold(second).fn
    s.answer(second)
    s.fold(second.id, Verdict(0.0, "tau_db"))
    digest = s.digest()
    records = [json.loads(x) for x in (tmp_path / "live" / "log.jsonl").read_text().splitlines()]
    steps = [r for r in records if r.get("input")]
    assert [r["input"]["text"] for r in steps][:2] == [OPENING, OPENING]
    for el, r in zip((first, second), steps):  # the logged embedding (by key) is the opening's, which replay reads back
        assert s.embed_cache.get(r["input"]["embedding"]).tobytes() == HashEmbedder().embed([embedding_text(el.instruction, OPENING)])[0].tobytes()
        assert sum(1 for c in r["calls"] if c["kind"] == "user") == 2  # the opening and the ###STOP###
    s.close()
    n, m = len(model.prompts), len(emb.texts)
    assert replay(tmp_path / "live")["state_digest"] == digest
    assert len(model.prompts) == n and len(emb.texts) == m  # no model, no embedder


class RecordingOracle(OracleModel):
    """The oracle model, keeping the text of every model call (the judge's)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, messages, **kw):
        self.prompts.append("\n\n".join(m.content for m in messages))
        return super().generate(messages, **kw)


def _bfcl_elements():
    tasks = ("simple_python", "multiple", "multi_turn_base", "irrelevance")
    return [next(e for e in BFCL if e.task == t) for t in tasks if any(e.task == t for e in BFCL)]


def _sha(texts) -> str:
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()


def test_bfcl_oracle_run_is_unchanged(tmp_path) -> None:
    """Pinned before the opening-first change: the same embedded texts, model prompts and state."""
    els = _bfcl_elements()
    emb, oracle = RecordingEmbedder(), RecordingOracle()
    s = Session.open(tmp_path / "oracle", policy=load_policy("default"), model=oracle, embedder=emb)
    for el in els:
        p = s.answer(el)
        assert p.episode.transcript[0] == {"role": "user", "text": el.input} and p.step_input.text == el.input
        s.fold(el.id, Verdict(1.0, el.verifier))
    pinned = (_sha(emb.texts), _sha(oracle.prompts), s.digest())
    s.close()
    stub = StubModel(lambda q: "think(thought='x')" if "Tools:" in q else "")
    emb2 = RecordingEmbedder()
    s = Session.open(tmp_path / "stub", policy=load_policy("default"), model=stub, embedder=emb2)
    for el in els:
        s.answer(el)
        s.fold(el.id, Verdict(0.0, el.verifier))
    pinned += (_sha(emb2.texts), _sha(stub.prompts), s.digest())
    s.close()
    assert pinned == PINNED


PINNED = ('41f46ddd4fc9bb2465f46f54a39c2f48c4e1aa7677e510a5edf50365f0fb5480',
          'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
          'sha256:f5f18b14a0262ad0855799350cb6970b6eb8803db5bc348de3846f85affb9a79',
          '41f46ddd4fc9bb2465f46f54a39c2f48c4e1aa7677e510a5edf50365f0fb5480',
          '0be5de07344d56b0da416d3b35b348cd1a3d5105a64fbb8d707d145caa16b7c1',
          'sha256:8d580aac5c506607a992733463fa7e975191a76b0bafcd60eba2f4499cee99e8')


def test_the_embedded_text_keeps_a_one_line_instruction_whole_and_a_long_ones_task_line() -> None:
    assert embedding_text(None, "q") == "q" and embedding_text("", "q") == "q"
    assert embedding_text("Answer with a letter.", "q") == "Answer with a letter.\n\nq"  # as before: texts of every other stream
    assert embedding_text("\nAnswer with a letter.\n", "q") == "\nAnswer with a letter.\n\n\nq"  # one line, kept byte for byte
    assert embedding_text(TAU[0].instruction, "q") == "# Retail agent policy\n\nq"
    assert embedding_text(TAU[-1].instruction, "q") == "# Airline Agent Policy\n\nq"


def test_two_requests_of_one_tau_domain_get_two_vectors_from_the_shipped_embedder() -> None:
    """With the whole 6,000-character policy in front, the shipped MiniLM (256 word pieces) read
    the policy alone: a keyboard exchange and a t-shirt count had cosine 1.00, so all 10 shipped
    τ-bench tasks routed to one branch."""
    import numpy as np

    from rizz.adapters.embedder import Embedder

    exchange, count = "I need to exchange my mechanical keyboard.", "How many t-shirt options are in the store?"
    booking = "I need to book a flight from New York to Seattle on May 20."
    texts = [embedding_text(TAU[0].instruction, exchange), embedding_text(TAU[0].instruction, count),
             embedding_text(TAU[-1].instruction, booking)]
    v = np.asarray(Embedder().embed(texts), dtype=np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    cos = v @ v.T
    assert cos[0, 1] < 0.9 and cos[0, 2] < 0.5 and cos[1, 2] < 0.5, cos


def test_step_label_is_the_judges_fallback_without_a_model_and_reads_the_whole_policy() -> None:
    """τ-bench's labels come from the whole agent policy's words, not its first line: the first
    lines ("# Retail agent policy", "# Airline agent policy") would give labels that snap the
    airline episodes into the retail branch (benchmarks/tau_routes.py)."""
    from rizz.engine.answering import label_text, step_label

    policy = load_policy("default")
    retail, airline = TAU[0], next(e for e in TAU if e.id.startswith("tau-airline"))
    (lr, jr), (la, _) = step_label(retail, OPENING, policy, None), step_label(airline, OPENING, policy, None)
    assert (lr.function, lr.application) == ("use-tools", "user-order-status")
    assert (la.function, la.application) == ("use-tools", "user-agent-flight")
    assert jr.fallback and jr.generation is None
    assert label_text(lr) == "user order status"


def test_step_label_asks_the_model_judge_unless_the_policy_judges_locally() -> None:
    from rizz.engine.answering import step_label

    el = BFCL[0]
    stub = StubModel(lambda q: '{"function": "classify", "application": "weather lookup"}')
    label, jl = step_label(el, el.input, load_policy("default"), stub)  # routing.judge: local
    assert stub.prompts == [] and jl.fallback
    label, jl = step_label(el, el.input, load_policy("judge-uncertain"), stub)
    assert len(stub.prompts) == 1 and not jl.fallback
    assert (label.function, label.application) == ("use-tools", "weather-lookup")
