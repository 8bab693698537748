"""Policy records: every threshold, gate, quarantine rule, cap, k, budget and compiler order.

A policy is data. It is loaded from YAML by :mod:`rizz.formats.policy_file` (which validates
it against the JSON Schema generated from these records, see :func:`policy_schema`) into
the frozen records below. Each numeric field carries its range and the source of its
default in ``metadata`` (``src``): a paper section, a benchmark, or ``rizz`` where the
paper gives no number and this project chose one (documented in ``specs/constants.md``).

Validators run on construction and on every ``attrs.evolve``, so an out-of-range policy
cannot exist in memory either.
"""

from __future__ import annotations

import typing
from typing import Any

import attrs
from attrs import field, frozen

__all__ = [
    "AgentPolicy",
    "BLOCKS",
    "PROTECTED_BLOCKS",
    "SHAPES",
    "BanditPolicy",
    "CompilerPolicy",
    "EvidencePolicy",
    "FeedbackPolicy",
    "LifecyclePolicy",
    "Policy",
    "QuarantinePolicy",
    "RetrievalPolicy",
    "RoutingPolicy",
    "RulePolicy",
    "SketchPolicy",
    "WritePolicy",
    "policy_schema",
]

#: Prompt blocks in the paper's layout order (spec §5).
BLOCKS = (
    "scoped_context",
    "preamble",
    "instruction",
    "evidence",
    "rules",
    "examples",
    "mistakes",
    "working_memory",
    "input",
)
#: Blocks the compiler never drops (spec §5).
PROTECTED_BLOCKS = ("instruction", "input")
#: Expected output shapes (``metadata.shape``, specs/stream-format.md).
SHAPES = ("letter", "number", "label", "span", "text", "code", "json")


def _num(default: float, lo: float, hi: float, src: str, doc: str, *, integer: bool = False) -> Any:
    kind = int if integer else float

    def check(inst: Any, att: attrs.Attribute[Any], value: Any) -> None:
        ok = _is_number(value) and (not integer or float(value).is_integer())
        if not ok or not (lo <= value <= hi):
            want = "an integer" if integer else "a number"
            raise ValueError(f"{att.name}: expected {want} in [{_fmt(lo)}, {_fmt(hi)}], got {value!r}")

    return field(
        default=kind(default),
        validator=check,
        converter=_to_int if integer else _to_float,
        metadata={"min": lo, "max": hi, "integer": integer, "src": src, "doc": doc},
    )


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _to_int(v: Any) -> Any:
    return int(v) if _is_number(v) and float(v).is_integer() else v


def _to_float(v: Any) -> Any:
    return float(v) if _is_number(v) else v


def _flag(default: bool, src: str, doc: str) -> Any:
    return field(default=default, validator=attrs.validators.instance_of(bool), metadata={"src": src, "doc": doc})


def _choice(default: str, choices: tuple[str, ...], src: str, doc: str) -> Any:
    return field(default=default, validator=attrs.validators.in_(choices), metadata={"enum": choices, "src": src, "doc": doc})


def _optional(f: Any) -> Any:
    """Mark a field added after runs were recorded: left out of the policy's and the state's
    serialised form (and so of their digests) while it holds its default (AREAS.md, constraint 1)."""
    f.metadata["omit_default"] = True
    return f


def _order(default: tuple[str, ...], doc: str) -> Any:
    def check(inst: Any, att: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
        bad = [b for b in value if b not in BLOCKS]
        if bad or len(set(value)) != len(value):
            raise ValueError(f"{att.name}: expected distinct blocks from {BLOCKS}, got {value!r}")

    return field(default=default, converter=tuple, validator=check, metadata={"blocks": True, "src": "paper §3/§5", "doc": doc})


@frozen
class RoutingPolicy:
    """Routing, snap and spawn (spec §3). Score of a shape-compatible branch b for label (f, a):
    ``w_function·[f = f_b] + w_application·[a = a_b] + w_anchor·cos(φ(x), g_b) − score_offset``."""

    mode: str = _choice("branches", ("branches", "single"), "rizz", "'single' routes every input to one global branch (interference ablation)")
    judge: str = _choice("when_uncertain", ("always", "when_uncertain", "local"), "rizz (paper §3: always)",
                         "ask the LLM judge for every input, or only when the anchor route is in doubt; 'local': when in doubt, label the input "
                         "without a model call (the judge's deterministic fallback label: keyword rules and the output shape for the function, "
                         "content words for the application, both read as routing.fallback_application says)")
    confident_similarity: float = _num(0.30, 0.0, 1.0, "rizz (tuned on TRACE train: within-task MiniLM cosine medians 0.30–0.81, across ≤ 0.29)", "judge skipped when the nearest compatible anchor has at least this cosine ...")
    confident_margin: float = _num(0.05, 0.0, 2.0, "rizz", "... and leads the nearest anchor of another function by at least this much")
    snap_enabled: bool = _flag(True, "paper §3", "snap a proposed application to an existing one")
    snap_threshold: float = _num(0.92, 0.0, 1.0, "paper §3 (τ_snap)", "label-embedding cosine needed to snap")
    jaccard_enabled: bool = _flag(True, "paper §3", "same-function sibling snap by hyphen-token Jaccard")
    jaccard_threshold: float = _num(0.40, 0.0, 1.0, "paper §3 (τ_J)", "Jaccard overlap needed to snap to a sibling")
    shape_guard: bool = _flag(True, "paper §3", "only branches with a compatible output shape compete")
    w_function: float = _num(0.5, 0.0, 10.0, "rizz", "routing-score weight of a function match")
    w_application: float = _num(1.0, 0.0, 10.0, "rizz", "routing-score weight of an application match")
    w_anchor: float = _num(2.0, 0.0, 10.0, "rizz (tuned on TRACE train)", "routing-score weight of the anchor cosine")
    score_offset: float = _num(1.2, 0.0, 10.0, "rizz", "subtracted from the score; a branch competes only when its score is positive")
    context_spawn_similarity: float = _num(0.30, -1.0, 1.0, "rizz", "a context-only input spawns a context branch below this nearest-anchor cosine")
    router: str = _optional(_choice("fixed", ("fixed", "linucb"), "paper §3 (fixed score); 'contextual-bandit routing' (paper §3, LinUCB: Li et al. 2010)", "'fixed': the routing score above; 'linucb': a contextual bandit over the compatible branches and spawn (bandit.*)"))
    declared_label: bool = _optional(_flag(False, "rizz (off in every benchmark comparison: the paper routes without task ids)", "use a stream element's metadata.label {function, application} as its label instead of asking the judge"))
    fallback_application: str = _optional(_choice("content_words", ("content_words", "first_line"), "rizz; measured on TRACE train, results/2026-12-01-label-quality-train.md", "when the judge gives no application, build one from the top content words of the instruction and the whole input ('content_words': the question's topic), or of the instruction, else the input's first line ('first_line': TRACE and StreamBench-style elements state their task there; the function's keyword rules then read that line too)"))


@frozen
class LifecyclePolicy:
    """Merge, prune and caps (spec §3.7)."""

    max_branches: int = _num(48, 1, 100_000, "paper §3 (TRACE: 48 in all)", "cap on total branches", integer=True)
    max_active: int = _num(31, 1, 100_000, "paper §3 (TRACE: 31 active)", "cap on active branches", integer=True)
    merge_enabled: bool = _flag(True, "paper §3", "merge redundant branches")
    merge_every: int = _num(25, 1, 1_000_000, "rizz", "steps between lifecycle passes", integer=True)
    merge_anchor_similarity: float = _num(0.90, 0.0, 1.0, "rizz", "anchor cosine at which two same-function branches are redundant")
    merge_label_jaccard: float = _num(0.50, 0.0, 1.0, "rizz", "application-token Jaccard at which two same-function branches are redundant")
    stale_after: int = _num(400, 1, 10_000_000, "rizz", "steps without traffic after which a branch may be deactivated", integer=True)
    prune_min_reward: float = _num(0.2, 0.0, 1.0, "rizz", "a stale branch whose mean reward is below this is pruned (else deactivated)")


@frozen
class RetrievalPolicy:
    """Read locality (spec §4). Rule score ``cos(u, φ(x))·clip(1 + α(H − A), m_min, m_max)``."""

    examples_k: int = _num(4, 0, 1000, "rizz", "episodic examples retrieved (top-k by cosine)", integer=True)
    examples_cross_branch: bool = _flag(True, "paper §4", "examples may come from any active, shape-compatible branch")
    examples_min_similarity: float = _num(0.0, -1.0, 1.0, "rizz", "examples from other branches need at least this cosine")
    rules_k: int = _num(4, 0, 1000, "rizz", "procedural rules retrieved", integer=True)
    rules_cross_branch: bool = _flag(True, "paper §4", "active rules may come from any branch")
    rule_alpha: float = _num(0.30, 0.0, 10.0, "paper §4 (α)", "counter weight in the rule score")
    rule_m_min: float = _num(0.30, 0.0, 10.0, "paper §4 (m_min)", "lower clip of the rule multiplier")
    rule_m_max: float = _num(3.00, 0.0, 100.0, "paper §4 (m_max)", "upper clip of the rule multiplier")
    failures_k: int = _num(2, 0, 1000, "rizz", "anti-patterns retrieved from the selected branch only", integer=True)
    failures_min_similarity: float = _optional(_num(-1.0, -1.0, 1.0, "rizz (results/2026-12-02-qwen15-heldout.md: a short answer's failure read as a vote on another input)",
                                          "an anti-pattern is shown only for an input at least this cosine-similar to the one it failed on (-1: any)"))
    context_k: int = _num(6, 0, 1000, "rizz", "scoped-context items retrieved", integer=True)
    context_w_similarity: float = _num(0.7, 0.0, 1.0, "rizz", "weight of semantic similarity in the context score")
    context_w_recency: float = _num(0.3, 0.0, 1.0, "rizz", "weight of recency in the context score")
    context_half_life: float = _num(200.0, 1e-6, 1e9, "rizz", "recency half-life, in steps")
    working_memory_k: int = _num(0, 0, 100, "rizz", "recent same-branch turns shown (working memory)", integer=True)
    examples_cross_scope: bool = _flag(
        True,
        "rizz (measured on LoCoMo, results/2026-12-01-locomo-cross-scope.md)",
        "an episode written from a scoped element (metadata.scope) may be shown to inputs of another scope; false: only to its own scope (unscoped episodes stay readable everywhere)",
    )
    zone: str = _optional(_choice("global", ("global", "family", "own_first"), "paper §4 (global); rizz (family, own_first; results/2026-12-01-interference-prefix.md)", "cross-branch examples and rules: from any branch ('global'), only branches of the routed branch's function ('family'), or the routed branch's own first, the rest filled from any branch ('own_first')"))
    zone_gate: bool = _optional(_flag(False, "rizz", "another branch's examples and rules are admitted to a branch's prompt only while their evidence for that (source, reader) pair holds (zone_trials)"))
    zone_trials: int = _optional(_num(3, 0, 1_000_000, "rizz", "a (source, reader) pair is admitted for this many answered steps; then only while its shown mean reward ≥ the reader's mean reward", integer=True))
    examples_min_distinct: int = _optional(_num(
        1, 1, 1000, "rizz (results/2026-12-02-qwen05-heldout.md, policy no-votes)",
        "the examples block is shown only when its examples carry at least this many distinct answers: one answer alone reads as a vote "
        "(the Qwen 0.5B copied a lone NumGLUE example's '10' into two other problems, and its letter examples were all 'A')",
        integer=True))
    examples_per_answer: int = _optional(_num(
        0, 0, 1000, "rizz (Qwen2.5-Coder-1.5B: four nearest C-STANCE examples all 'B' and the answer copied, results/2026-12-02-qwen15-heldout131.md; "
        "majority-label bias of in-context examples, Zhao et al. 2021)",
        "at most this many examples of one answer (stripped text) in the examples block: the nearest examples are taken in score order, "
        "skipping an example whose answer already fills its places, until examples_k (0: no cap, the nearest examples_k)",
        integer=True))
    examples_own_min_similarity: float = _optional(_num(
        -1.0, -1.0, 1.0, "rizz (TRACE train: a NumGLUE-cm input's nearest NumGLUE-ds item, in its branch by the shared task line, is at cosine >= 0.6 "
        "for 3% of inputs, its nearest NumGLUE-cm item for 80%; results/2026-12-04-neighbour-labels-train.md)",
        "examples from the input's own branch need at least this cosine too (-1: every own example is eligible; examples_min_similarity is the floor for other branches')"))
    mistakes_min_distinct: int = _optional(_num(
        1, 1, 1000, "rizz (results/2026-12-02-qwen05-heldout.md, policy no-votes)",
        "the mistakes block is shown only when its anti-patterns carry at least this many distinct wrong answers", integer=True))


@frozen
class WritePolicy:
    """Verifier-gated writes (spec §6). ``thresholds`` maps verifier name → write threshold."""

    enabled: bool = _flag(True, "paper §6", "write durable memory at all (false: the frozen baseline)")
    default_threshold: float = _num(1.0, 0.0, 1.0, "paper §6", "write threshold for verifiers not listed in thresholds")
    thresholds: dict[str, float] = field(
        factory=lambda: {"rouge_l": 0.35, "sari": 0.40, "fuzzy_ratio": 0.80, "token_f1": 0.60},
        converter=dict,
        metadata={"map_min": 0.0, "map_max": 1.0, "src": "rizz (per-verifier; paper §6 gives none)", "doc": "verifier → reward needed to write"},
    )
    failure_threshold: float = _num(0.10, 0.0, 1.0, "rizz", "a parsed answer at or below this reward is a substantive failure (anti-pattern)")
    dedupe: bool = _flag(True, "paper §3 (anti-fragmentation)", "writing the same content twice stores one record")
    working_memory_size: int = _num(8, 0, 10_000, "rizz", "bounded working memory W (recent turns)", integer=True)
    supersede: bool = _flag(
        False,
        "rizz",
        "a verdict retires the stored memories of the same input (text and scope) it contradicts: the newest verified answer wins (rizz/core/supersede.py)",
    )
    supersede_derived: bool = _optional(_flag(
        False,
        "rizz",
        "with supersede: also retire what was derived from a contradicted answer: working-memory turns of the same input "
        "that carry it (a substantive failure's own turn is not remembered) and procedural rules distilled from a "
        "superseded episode (rizz/core/supersede.py)",
    ))
    corrections: bool = _optional(_flag(
        False,
        "rizz (results/2026-12-02-qwen05-heldout.md)",
        "a failed answer whose verdict carries a correction (Verdict.correction: the user's right answer) is written as a "
        "verified example of the corrected answer instead of an anti-pattern (a separately reported setting, not the paper's)",
    ))


@frozen
class QuarantinePolicy:
    """Quarantine (spec §6): middling reward, or an input far from the branch centroid."""

    enabled: bool = _flag(True, "paper §6", "hold doubtful interactions apart instead of writing them")
    middling_min: float = _num(0.10, 0.0, 1.0, "rizz", "rewards in (failure_threshold, write threshold) are middling; below this they are not held")
    centroid_min_similarity: float = _num(0.20, -1.0, 1.0, "rizz", "a verified input whose cosine to the branch centroid is below this is quarantined")
    centroid_min_size: int = _num(5, 1, 1_000_000, "rizz", "the centroid test applies once the branch holds this many examples", integer=True)


@frozen
class RulePolicy:
    """Procedural rules and tiers (spec §6)."""

    enabled: bool = _flag(True, "paper §6", "procedural memory on/off (no-procedural ablation)")
    distill_every: int = _num(4, 1, 1_000_000, "rizz", "verified successes in a branch between distillation requests", integer=True)
    distill_growth: float = _optional(_num(1.0, 1.0, 16.0, "rizz (calls per answered step)",
                                 "after each distillation of a branch, the successes its next one waits for are multiplied by this (1: every distill_every)"))
    distill_max_every: int = _optional(_num(64, 1, 1_000_000, "rizz", "the successes a branch's distillation waits for never exceed this (with distill_growth > 1)", integer=True))
    distill_after_miss: bool = _optional(_flag(False, "rizz (calls per answered step: results/2026-12-02-calls-always-right.md)",
                                        "a branch distils only once, since its last distillation, it has also answered below helpful_reward at least once: rules are learnt where the model still misses, and a branch it always gets right costs no distillation calls"))
    activation_helpful: int = _num(2, 0, 1_000_000, "paper §6 ('repeated verified usefulness')", "helpful uses before a candidate rule becomes active", integer=True)
    retire_harmful_margin: int = _num(3, 1, 1_000_000, "rizz", "a rule with A − H ≥ this is retired", integer=True)
    helpful_reward: float = _num(1.0, 0.0, 1.0, "rizz", "reward at or above which a rule in the prompt counts as helpful")
    harmful_reward: float = _num(0.0, 0.0, 1.0, "rizz", "reward at or below which a rule in the prompt counts as harmful")
    family_min_branches: int = _num(2, 1, 1000, "paper §6 ('several branches')", "branches with helpful evidence needed for the family tier", integer=True)
    global_min_branches: int = _num(3, 1, 1000, "paper §6", "branches needed for the global tier", integer=True)
    global_min_functions: int = _num(2, 1, 1000, "rizz", "distinct functions needed for the global tier", integer=True)
    max_per_branch: int = _num(32, 0, 100_000, "rizz", "candidate + active rules kept per branch", integer=True)


@frozen
class CompilerPolicy:
    """Prompt compiler (spec §5)."""

    token_budget: int = _num(65_536, 16, 10_000_000, "paper §5 (64K)", "hard prompt budget in tokens (the shell lowers it to the model's window)", integer=True)
    layout: tuple[str, ...] = _order(BLOCKS, "blocks in prompt order; a block not listed is never shown")
    drop_order: tuple[str, ...] = _order(
        ("working_memory", "mistakes", "rules", "examples", "scoped_context", "evidence", "preamble"),
        "blocks dropped first under budget pressure (lowest-scored items first inside a block)",
    )
    item_max_tokens: int = _num(2048, 1, 10_000_000, "rizz", "a memory item longer than this is not shown", integer=True)
    nearest_last: bool = _flag(
        False,
        "rizz",
        "inside the examples, rules and mistakes blocks, write the highest-scored item last, next to the input (small models copy the nearest example)",
    )
    item_order: str = _optional(_choice(
        "score", ("score", "stored"), "rizz (results/2026-12-03-stored-order.md: evaluated prompt tokens with a prompt cache)",
        "inside the examples, rules and mistakes blocks, write the items by score ('score', see nearest_last) or in the order they were "
        "stored, oldest first ('stored'): the same items then give the same text whatever the input, so a backend's prompt cache reuses "
        "it (which items are kept under the budget still follows their scores; nearest_last has no effect with 'stored')"))


@frozen
class FeedbackPolicy:
    """Late verdicts in a live session (specs/step-semantics.md, "Live sessions"). 0 = no limit."""

    max_pending: int = _num(0, 0, 1_000_000_000, "rizz", "later answers a pending answer may wait for; it expires when one more is issued (0: never)", integer=True)
    max_pending_seconds: float = _num(0.0, 0.0, 1e9, "rizz", "a pending answer expires this many seconds after it was answered (0: never)")


@frozen
class AgentPolicy:
    """Tool-using episodes (specs/stream-format.md, "Episode elements"): the bounds of the agent loop."""

    max_steps: int = _num(30, 1, 1000, "rizz", "agent model calls per episode at most (the loop stops there)", integer=True)
    reply_tokens: int = _num(256, 16, 8192, "rizz", "new tokens per agent reply at most", integer=True)
    user_tokens: int = _num(128, 16, 8192, "rizz", "new tokens per simulated-user message at most", integer=True)
    repeat_stop: int = _optional(_num(2, 0, 1000, "rizz (Qwen2.5-Coder-1.5B, greedy: one malformed BFCL call written 30 times, 10 min per item; one failing τ-bench lookup 27 times; "
                                      "one BFCL order placed 30 times)",
                                      "an episode stops (stop `repeat`) once the agent has written the same failing reply this many times in a row: the same malformed text, "
                                      "or the same calls all failing with the same results; the same calls run successfully one time more than this in a row end the turn "
                                      "(0: never)", integer=True))
    example_values: str = _optional(_choice("shown", ("shown", "placeholders"),
                                            "rizz; placeholders as Agent Workflow Memory abstracts a workflow's example-specific values (Wang et al. 2024, "
                                            "arXiv:2409.07429); the Qwen2.5-Coder-1.5B copied stored calls' values and forms into other items "
                                            "(results/2026-12-05-bfcl-qwen15-default-now.md, results/2026-12-05-tau-routed-qwen15.md)",
                                            "how a solved example's tool calls are written in an agent's prompt: 'shown' as they were called; "
                                            "'placeholders' with each argument's value written {parameter} (the calls made and the parameters filled, "
                                            "not another request's values); memory itself keeps the calls as made"))
    examples_offered_tools: bool = _optional(_flag(False, "rizz (BFCL 3 × 20 test with the 1.5B under default: 17 of the 67 examples shown, on 10 of 60 steps, called a function "
                                                   "the item was not offered, another item's in the same branch; results/2026-12-05-bfcl-qwen15-default-now.md)",
                                                   "show a solved example in an agent's prompt only when every tool its calls name is offered to this episode "
                                                   "(an example whose calls cannot be read is shown)"))


@frozen
class EvidencePolicy:
    """Evidence per memory block kind in a branch (:mod:`rizz.core.evidence`): a block kind (failures included)
    whose presence has not helped the branch is left out of its prompts."""

    enabled: bool = _flag(False, "rizz", "gate the listed blocks of each branch by their evidence")
    blocks: tuple[str, ...] = field(
        default=("examples", "rules", "mistakes"),
        converter=tuple,
        validator=lambda inst, att, v: _check_memory_blocks(att.name, v),
        metadata={"memory_blocks": True, "src": "rizz", "doc": "memory blocks gated by evidence"},
    )
    min_shown: int = _num(3, 0, 1_000_000, "rizz", "steps a block is shown in a branch before its evidence can withhold it", integer=True)
    margin: int = _num(2, 1, 1_000_000, "rizz (rules.retire_harmful_margin is 3)", "a block is withheld once harmful − helpful ≥ this and its mean reward when shown is not above its mean when hidden", integer=True)
    mistakes_need_examples: bool = _flag(False, "rizz (NumGLUE-ds: anti-patterns without a verified example were copied as answers)", "show a branch's mistakes only when the branch holds at least one verified example")
    explore_every: int = _optional(_num(0, 0, 1_000_000, "rizz (Qwen2.5-Coder-1.5B: examples moved FOMC the right way and C-STANCE the wrong way, results/2026-12-02-qwen15-corrections131.md)",
                                        "every k-th answered step of a branch does the opposite of the gate's choice for its gated blocks, and the gate compares mean rewards shown and hidden instead of counts (0: no exploration)", integer=True))
    min_hidden: int = _optional(_num(2, 1, 1_000_000, "rizz", "with explore_every: hidden steps of a block in a branch before its evidence can withhold it", integer=True))


#: The compiler's memory blocks (rizz.core.compiler.MEMORY_BLOCKS): what block evidence can gate.
# attrs.Factory's class: attrs's stubs type attrs.Factory as a function, which isinstance() does not take
_FACTORY: Any = type(attrs.Factory(list))

_MEMORY_BLOCKS = ("scoped_context", "rules", "examples", "mistakes", "working_memory")


def _check_memory_blocks(name: str, value: tuple[str, ...]) -> None:
    bad = [b for b in value if b not in _MEMORY_BLOCKS]
    if bad or len(set(value)) != len(value):
        raise ValueError(f"{name}: expected distinct memory blocks from {_MEMORY_BLOCKS}, got {value!r}")


@frozen
class SketchPolicy:
    """Per-branch subspace sketches (paper §3, "branch-specific subspace sketches"): Frequent
    Directions over the branch's input embeddings."""

    enabled: bool = _flag(False, "paper §3", "keep a sketch per branch (in the state and its digest)")
    rank: int = _num(4, 1, 64, "rizz", "directions kept per branch", integer=True)
    decay: float = _num(1.0, 0.5, 1.0, "rizz", "the sketch is multiplied by sqrt(decay) before each new input (1: no forgetting)")
    w_energy: float = _num(0.0, 0.0, 10.0, "rizz", "fixed router: weight of the projection energy in the routing score")
    spawn_max_energy: float = _num(0.0, 0.0, 1.0, "rizz", "spawn instead of joining when the best branch's projection energy is below this (0: off)")
    merge_overlap: float = _num(1.0, 0.0, 1.0, "rizz", "two same-function, same-shape branches whose sketches overlap at least this much are merge candidates (1: off)")


@frozen
class BanditPolicy:
    """Contextual-bandit routing (``routing.router: linucb``): one linear model over candidate
    features [bias, label score, sketch energy, anchor cosine, shape match, branch mean reward,
    spawn], prior θ₀ = the fixed routing score (so with no verdicts it routes as ``fixed``)."""

    alpha: float = _num(0.25, 0.0, 10.0, "rizz (LinUCB exploration width)", "upper-confidence width")
    prior_strength: float = _num(4.0, 1e-3, 1e6, "rizz", "λ: weight of the fixed-score prior θ₀, in pseudo-verdicts")


def _wrap(cls: type) -> Any:
    return field(factory=cls, metadata={"doc": (cls.__doc__ or "").split("\n")[0]})


@frozen
class Policy:
    """A complete RIZZ policy; ``name`` is reported in run summaries."""

    name: str = field(default="default", validator=attrs.validators.instance_of(str), metadata={"doc": "policy name"})
    routing: RoutingPolicy = _wrap(RoutingPolicy)
    lifecycle: LifecyclePolicy = _wrap(LifecyclePolicy)
    retrieval: RetrievalPolicy = _wrap(RetrievalPolicy)
    write: WritePolicy = _wrap(WritePolicy)
    quarantine: QuarantinePolicy = _wrap(QuarantinePolicy)
    rules: RulePolicy = _wrap(RulePolicy)
    compiler: CompilerPolicy = _wrap(CompilerPolicy)
    feedback: FeedbackPolicy = _wrap(FeedbackPolicy)
    agents: AgentPolicy = _wrap(AgentPolicy)
    evidence: EvidencePolicy = _optional(_wrap(EvidencePolicy))
    sketch: SketchPolicy = _optional(_wrap(SketchPolicy))
    bandit: BanditPolicy = _optional(_wrap(BanditPolicy))

    def write_threshold(self, verifier: str | None) -> float:
        """Reward needed to write an episode scored by ``verifier`` (spec §6)."""
        return self.write.thresholds.get(verifier or "", self.write.default_threshold)


def policy_schema(cls: type = Policy) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a policy record, generated from the field metadata.

    ``specs/policy.schema.json`` is this function's output; a test keeps them equal.
    """
    props: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for att in attrs.fields(cls):
        md = att.metadata
        typ = hints[att.name]
        if attrs.has(typ):
            sub = policy_schema(typ)
        elif "enum" in md:
            sub = {"type": "string", "enum": list(md["enum"])}
        elif md.get("blocks"):
            sub = {"type": "array", "items": {"type": "string", "enum": list(BLOCKS)}, "uniqueItems": True}
        elif md.get("memory_blocks"):
            sub = {"type": "array", "items": {"type": "string", "enum": list(_MEMORY_BLOCKS)}, "uniqueItems": True}
        elif "map_min" in md:
            sub = {"type": "object", "additionalProperties": {"type": "number", "minimum": md["map_min"], "maximum": md["map_max"]}}
        elif typ is bool:
            sub = {"type": "boolean"}
        elif typ is str:
            sub = {"type": "string"}
        else:
            sub = {"type": "integer" if md.get("integer") else "number", "minimum": md["min"], "maximum": md["max"]}
        if "doc" in md and "description" not in sub:
            sub["description"] = md["doc"] + (f" [{md['src']}]" if "src" in md else "")
        if not attrs.has(typ):
            default = att.default.factory() if isinstance(att.default, _FACTORY) else att.default
            sub["default"] = list(default) if isinstance(default, tuple) else default
        props[att.name] = sub
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if cls is Policy:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "rizz policy", **schema}
        schema["properties"]["extends"] = {"type": "string", "description": "path of a policy this one overrides (resolved relative to this file)"}
    else:
        schema["description"] = (cls.__doc__ or "").split("\n")[0]
    return schema
