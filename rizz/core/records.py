"""The adaptive state ``S = (B, W, H)`` and its parts (spec §2), as frozen values.

Every record is a frozen attrs class; every collection is a pyrsistent value. A step
replaces only the parts it changes, so a branch the step did not touch is the *same
object* afterwards (``old.bank.branches[b] is new.bank.branches[b]``).

Vectors are float32 ``bytes`` (see :mod:`rizz.core.vec`); each memory store keeps its
records in a ``PVector`` and their embeddings in an aligned :class:`EmbeddingMatrix`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

import attrs
from attrs import Factory, field, frozen
from pyrsistent import PMap, PSet, PVector, pmap, pset, pvector

from rizz.core.episode_index import EpisodeIndex
from rizz.core.vec import EmbeddingMatrix

__all__ = [
    "AdaptiveState",
    "AntiPattern",
    "Branch",
    "BranchStats",
    "ContextItem",
    "History",
    "Episode",
    "Evidence",
    "Label",
    "MemoryStore",
    "QuarantinedItem",
    "ROUTE_SCORE_DECIMALS",
    "RouterState",
    "Rule",
    "RuleCounters",
    "Sketch",
    "StepRecord",
    "Turn",
    "empty_state",
]

class Keyed(Protocol):
    """What a :class:`MemoryStore` holds: records with a ``key``."""

    @property
    def key(self) -> str: ...


T = TypeVar("T", bound=Keyed)


def _str_tuple(xs: Iterable[str]) -> tuple[str, ...]:
    return tuple(xs)


#: A label part as :func:`rizz.core.routing.normalise_label` writes it: lowercase ASCII letters
#: and digits in words joined by single hyphens (``solve-math``).
_LABEL_PART = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _check_label_part(_inst: object, att: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not _LABEL_PART.fullmatch(value):
        raise ValueError(f"Label.{att.name}: {value!r} is not a label part: expected lowercase letters and digits in words "
                         "joined by single hyphens, e.g. 'solve-math' (rizz.core.normalise_label makes one from any text)")


@frozen
class Label:
    """Hierarchical label ``ℓ = (function, application)``, lowercase, hyphen-delimited.

    Each part is lowercase ASCII letters and digits in words joined by single hyphens
    (``Label("solve-math", "arithmetic")``); anything else raises ValueError. Build a label from
    free text (a judge's reply, a caller's task name) with :func:`rizz.core.normalise_label`:
    ``normalise_label("Solve Math", "Arithmetic") == Label("solve-math", "arithmetic")``.
    """

    function: str = field(validator=_check_label_part)
    application: str = field(validator=_check_label_part)

    def __str__(self) -> str:
        return f"{self.function}/{self.application}"


@frozen
class Episode:
    """A verified example ``(φ(x), x, ŷ, r, δ)`` (spec §2); the embedding lives in the store's matrix."""

    key: str  # content key (hash of input and answer), for de-duplication
    input: str
    answer: str
    reward: float
    scope: str | None
    step: int


@frozen
class AntiPattern:
    """A substantive failure: a parsed but wrong answer kept as "do not repeat" (spec §6)."""

    key: str
    input: str
    answer: str
    reward: float
    step: int
    scope: str | None = field(default=None, metadata={"omit_default": True})  # set when write.supersede is on


def check_time_pair(obj: Any, attribute: object, value: int | None) -> None:
    """attrs validator: ``time`` (canonical text) and ``instant_us`` (int µs UTC) come together."""
    if (obj.time is None) != (value is None) or (value is not None and (isinstance(value, bool) or not isinstance(value, int))):
        raise ValueError(f"{type(obj).__name__}: time {obj.time!r} needs its instant_us (int microseconds since "
                         f"1970-01-01 UTC, parsed by the shell: rizz.formats.timekeys.time_fields), got {value!r}")


@frozen
class ContextItem:
    """Stored context for later retrieval, filtered by ``scope`` (spec §4).

    ``time`` is the element's ``metadata.time`` as canonical ISO 8601 text (shown in the
    prompt), ``instant_us`` its instant in integer microseconds since 1970-01-01 UTC (orders
    items); both None or both set. The shell parses both (:mod:`rizz.formats.timekeys`); the
    core only compares and shows them. ``instant_us`` is a function of ``time``, so the digest
    leaves it out (old digests hold) while snapshots keep it (:mod:`rizz.core.serialize`).

    Raises ValueError when only one of ``time`` / ``instant_us`` is given."""

    key: str
    text: str
    scope: str | None
    step: int
    time: str | None = field(default=None, metadata={"omit_default": True})
    instant_us: int | None = field(default=None, validator=check_time_pair, metadata={"omit_default": True, "digest": False})


@frozen
class QuarantinedItem:
    """An interaction held apart (never retrieved), with the reason (spec §6)."""

    key: str
    input: str
    answer: str
    reward: float
    reason: str  # "middling-reward" | "far-from-centroid" | "superseded: ..." (MemoryRetired)
    step: int


@frozen
class MemoryStore(Generic[T]):
    """Records with aligned embeddings: ``records[i]`` ↔ ``matrix.rows()[i]``; ``keys`` for
    de-duplication; ``scopes`` maps a scope key → the rows whose record has that scope (so
    scoped-context retrieval does not scan every record)."""

    records: PVector[T] = field(factory=pvector)
    matrix: EmbeddingMatrix = field(factory=lambda: EmbeddingMatrix(0))
    keys: PSet[str] = field(factory=pset)
    scopes: PMap[str, PVector[int]] = field(factory=pmap)

    def __len__(self) -> int:
        return len(self.records)

    def add(self, record: T, vec: bytes) -> MemoryStore[T]:
        matrix = self.matrix if len(self.matrix) or self.matrix.dim else EmbeddingMatrix(len(vec) // 4)
        scope = getattr(record, "scope", None)
        scopes = self.scopes
        if scope is not None:
            scopes = scopes.set(scope, scopes.get(scope, pvector()).append(len(self.records)))
        return MemoryStore(self.records.append(record), matrix.append(vec), self.keys.add(record.key), scopes)

    def without(self, key: str) -> MemoryStore[T]:
        """This store less the record with ``key`` (rows re-laid out in order); itself when absent."""
        if key not in self.keys:
            return self
        idx = [i for i, r in enumerate(self.records) if r.key != key]
        recs = pvector(self.records[i] for i in idx)
        by_scope: dict[str, list[int]] = {}
        for i, r in enumerate(recs):
            if getattr(r, "scope", None) is not None:
                by_scope.setdefault(r.scope, []).append(i)  # type: ignore[attr-defined]
        matrix = self.matrix.take(idx) if idx else EmbeddingMatrix(self.matrix.dim)
        return MemoryStore(recs, matrix, self.keys.remove(key), pmap({k: pvector(v) for k, v in by_scope.items()}))

    def merged(self, other: MemoryStore[T]) -> MemoryStore[T]:
        """This store followed by the records of ``other`` whose keys are new."""
        idx = [i for i, r in enumerate(other.records) if r.key not in self.keys]
        if not idx:
            return self
        if not len(self):
            return other
        extra = other.matrix.take(idx)
        recs = self.records.extend(other.records[i] for i in idx)
        by_scope: dict[str, list[int]] = {}
        for i, r in enumerate(recs):
            if getattr(r, "scope", None) is not None:
                by_scope.setdefault(r.scope, []).append(i)  # type: ignore[attr-defined]
        scopes = pmap({k: pvector(v) for k, v in by_scope.items()})
        return MemoryStore(recs, self.matrix.concat(extra), cast("PSet[str]", self.keys | pset(r.key for r in recs)), scopes)


@frozen
class Rule:
    """A procedural IF-THEN rule ``(u, α, β)``; its counters ``H, A`` live in the state's rule ledger."""

    id: str
    antecedent: str
    strategy: str
    embedding: bytes  # (d,) float32, L2-normalised
    branch_id: str  # branch it was distilled in
    function: str
    step: int
    # content keys of the episodes it was distilled from (the distillation batch); kept only
    # under write.supersede_derived, so a superseded episode retires its rules (rizz.core.supersede)
    sources: tuple[str, ...] = field(default=(), converter=_str_tuple, metadata={"omit_default": True})

    def text(self) -> str:
        return f"IF {self.antecedent} THEN {self.strategy}"


@frozen
class RuleCounters:
    """Helpful/harmful counters and status of a rule (spec §2, §6)."""

    helpful: int = 0
    harmful: int = 0
    status: str = "candidate"  # "candidate" | "active" | "retired"
    helpful_branches: PSet[str] = field(factory=pset)  # branches whose steps found it helpful
    tier: str = "branch"  # "branch" | "family" | "global"


#: id(helpful_branches) -> (that pset, a frozenset of it): see :func:`credited`. The entry holds
#: the pset, so its id is not reused while the entry is kept.
_CREDITED: dict[int, tuple[PSet[str], frozenset[str]]] = {}


def credited(helpful_branches: PSet[str], branch_id: str) -> bool:
    """``branch_id in helpful_branches``, answered from a frozenset copy kept per pset object: a
    pset's ``in`` is four Python calls, and a helpful step asks it twice per rule in the prompt
    (``decide_rules``, then the fold of ``RuleCountersMoved``) of the same few psets, which a
    rule's counters carry over unchanged while its helpful branches stay the same. A pure cache:
    the answer is the pset's own."""
    hit = _CREDITED.get(id(helpful_branches))
    if hit is None or hit[0] is not helpful_branches:
        if len(_CREDITED) >= 4096:
            _CREDITED.clear()
        hit = _CREDITED[id(helpful_branches)] = (helpful_branches, frozenset(helpful_branches))
    return branch_id in hit[1]


@frozen
class Evidence:
    """Reward evidence for one memory block kind in a branch, or for another branch's memories
    read by a branch (every memory block must earn its place by evidence: rizz.core.evidence).

    Counts are of answered steps of the branch; rewards are sums in [0, shown] / [0, hidden].
    ``helpful`` / ``harmful`` move like a rule's counters (reward ≥ ``rules.helpful_reward`` /
    parsed and ≤ ``rules.harmful_reward``) on the steps that showed it.
    """

    shown: int = 0
    shown_reward: float = 0.0
    hidden: int = 0
    hidden_reward: float = 0.0
    helpful: int = 0
    harmful: int = 0

    @property
    def shown_mean(self) -> float:
        return self.shown_reward / self.shown if self.shown else 0.0

    @property
    def hidden_mean(self) -> float:
        return self.hidden_reward / self.hidden if self.hidden else 0.0


@frozen
class Sketch:
    """A Frequent-Directions sketch of a branch's input embeddings (paper: "branch-specific
    subspace sketches"; Liberty 2013, Frequent Directions).

    ``rows``: (k, d) float32 bytes, k ≤ rank, mutually orthogonal rows (each is σ_i·v_iᵀ of the
    shrunk sketch), so the projection energy of a unit vector x is Σ_i (r_i·x)² / ‖r_i‖².
    ``count``: inputs folded in.
    """

    rows: bytes = b""
    dim: int = 0
    count: int = 0
    rank: int = 0  # directions kept (sketch.rank when it was made)


@frozen
class RouterState:
    """LinUCB statistics of the contextual-bandit router (one shared linear model over the
    candidate features, Li et al. 2010): ``a`` (m, m) float64 bytes = λI + Σ x xᵀ, ``b`` (m,)
    float64 bytes = λθ₀ + Σ r x, ``updates`` the verdicts folded in."""

    a: bytes
    b: bytes
    updates: int = 0


@frozen
class BranchStats:
    """``h_b``: traffic, reward history, last use, output-shape profile (spec §2)."""

    traffic: int = 0
    answered: int = 0
    reward_sum: float = 0.0
    recent_rewards: PVector[float] = field(factory=pvector)  # last 32 rewards
    last_used: int = -1
    created: int = 0
    shapes: PMap[str, int] = field(factory=pmap)  # shape -> count
    successes_since_distill: int = 0
    distill_due: int = field(default=0, metadata={"omit_default": True})  # successes the next distillation waits for (0: rules.distill_every)
    # `answered` at the last distillation (kept only under rules.distill_after_miss)
    distill_answered: int = field(default=0, metadata={"omit_default": True})
    centroid_sum: bytes = b""  # float32 sum of episodic embeddings
    block_evidence: PMap[str, Evidence] = field(factory=pmap, metadata={"omit_default": True})  # block kind -> Evidence

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.answered if self.answered else 0.0


@frozen
class Branch:
    """A zero-interference zone ``b = (ℓ, g, E, P, N, C, h)`` (spec §2)."""

    id: str
    label: Label
    anchor: bytes  # g_b: (d,) float32, the embedding of the input that spawned it
    label_embedding: bytes  # ψ(a_b), b"" when unknown
    shape: str | None  # output shape it serves (None: context branch or unknown)
    episodes: MemoryStore[Episode] = field(factory=MemoryStore)
    rules: PVector[Rule] = field(factory=pvector)
    anti_patterns: MemoryStore[AntiPattern] = field(factory=MemoryStore, metadata={"wire": "failures"})  # N; key "failures" on the wire
    context: MemoryStore[ContextItem] = field(factory=MemoryStore)
    quarantine: PVector[QuarantinedItem] = field(factory=pvector)
    stats: BranchStats = field(factory=BranchStats)
    active: bool = True
    sketch: Sketch | None = field(default=None, metadata={"omit_default": True})  # sketch.enabled only


@frozen
class Turn:
    """A recent interaction in working memory ``W``."""

    step: int
    branch_id: str
    input: str
    answer: str
    reward: float
    scope: str | None = field(default=None, metadata={"omit_default": True})  # kept under write.supersede_derived


#: Decimals of :attr:`StepRecord.route_score` (rizz's choice: float32 dot products agree to
#: ~1e-7 across BLAS kernels; 6 decimals keep the score readable and the digest portable).
ROUTE_SCORE_DECIMALS = 6


@frozen
class StepRecord:
    """One line of history ``H``: the routing decision, reward and token counts.

    ``route_score`` is rounded to :data:`ROUTE_SCORE_DECIMALS` decimals: it comes from a float32
    dot product, whose last bits depend on the BLAS kernel (OpenBLAS picks one per CPU, or by
    ``OPENBLAS_CORETYPE``), and the state's digest must not depend on the machine.
    """

    step: int
    item_id: str
    branch_id: str
    route_score: float
    spawned: bool
    reward: float | None
    prompt_tokens: int
    completion_tokens: int
    dropped: int


@frozen
class History:
    """History ``H`` of ``S = (B, W, H)`` (spec §2): one :class:`StepRecord` per step.
    Serialised under its earlier name ``Diagnostics`` (``WIRE_NAME``), so digests hold."""

    WIRE_NAME: ClassVar[str] = "Diagnostics"
    records: PVector[StepRecord] = field(factory=pvector)


@frozen
class AdaptiveState:
    """``S = (B, W, H)`` plus the rule ledger and tier playbooks.

    ``branches`` maps branch id → :class:`Branch` (insertion order = id order ``b0, b1, …``).
    ``rule_ledger`` maps rule id → :class:`RuleCounters`; ``family_rules`` maps function →
    PVector of rule ids promoted to that family; ``global_rules`` the global playbook.

    ``episode_index`` is derived data: every branch's episode embeddings in one matrix
    (:class:`~rizz.core.episode_index.EpisodeIndex`), kept by :func:`rizz.core.apply.apply`
    and rebuilt from ``branches`` when not given. It takes no part in ``==``, hashing,
    ``repr``, ``to_data`` or the digest (field metadata ``derived``).
    """

    branches: PMap[str, Branch] = field(factory=pmap)
    next_branch: int = 0
    working_memory: PVector[Turn] = field(factory=pvector)  # newest last
    history: History = field(factory=History, metadata={"wire": "diagnostics"})  # H; key "diagnostics" on the wire
    rule_ledger: PMap[str, RuleCounters] = field(factory=pmap)
    family_rules: PMap[str, PVector[str]] = field(factory=pmap)
    global_rules: PVector[str] = field(factory=pvector)
    steps: int = 0
    zone_evidence: PMap[tuple[str, str], Evidence] = field(factory=pmap, metadata={"omit_default": True})  # (source, reader) -> Evidence
    router: RouterState | None = field(default=None, metadata={"omit_default": True})  # routing.router: linucb only
    episode_index: EpisodeIndex = field(
        default=Factory(lambda s: EpisodeIndex.build(s.branches.values()), takes_self=True),
        eq=False,
        repr=False,
        metadata={"derived": True},
    )

    def branch_ids(self) -> list[str]:
        """Branch ids in creation order."""
        return [b.id for b in _in_creation_order(self.branches)]

    def active_branches(self) -> list[Branch]:
        """Active branches in creation order."""
        return [b for b in _in_creation_order(self.branches) if b.active]

    def rule(self, rule_id: str) -> Rule | None:
        """Look a rule up by id (its origin branch is encoded in the record)."""
        for b in self.branches.values():
            for r in b.rules:
                if r.id == rule_id:
                    return r
        return None


def _creation(branch: Branch) -> tuple[int, str]:
    # ids are "b<n>" with n written without leading zeros: (length, id) orders them by n
    return len(branch.id), branch.id


#: the last map ordered, its order, and each id's place in that order (carried with the order)
_ORDER: tuple[PMap[str, Branch] | None, tuple[Branch, ...], dict[str, int]] = (None, (), {})


def _in_creation_order(branches: PMap[str, Branch]) -> tuple[Branch, ...]:
    """The branches of ``branches`` in creation order; the last answer is kept for the same map
    (routing and lifecycle ask several times per step: a replay spent ~7% of its time sorting)."""
    global _ORDER
    last, order, _ = _ORDER
    if last is not branches:
        order = tuple(sorted(branches.values(), key=_creation))
        _ORDER = (branches, order, {b.id: i for i, b in enumerate(order)})
    return order


def carry_creation_order(before: PMap[str, Branch], after: PMap[str, Branch], replaced: dict[str, Branch]) -> None:
    """Note that ``after`` is ``before`` with the branches of ``replaced`` (id -> its new value,
    every id already in ``before``) put in place. When ``before``'s order is the one kept, the
    order of ``after`` is kept instead: the same ids in the same places, those branches swapped
    in, no sort (a fold calls this once per round; the next step's routing asks for the order
    of the map the fold made). Exactly what sorting ``after`` would give; nothing kept
    otherwise."""
    global _ORDER
    last, order, place = _ORDER
    if last is before and len(after) == len(before):
        new = list(order)
        for bid, b in replaced.items():
            i = place.get(bid)
            if i is None:  # not an id of ``before``: nothing kept
                return
            new[i] = b
        _ORDER = (after, tuple(new), place)


def empty_state() -> AdaptiveState:
    """The state before the first step: no branches, empty memory and history."""
    return AdaptiveState()


_ = attrs  # re-exported for type checkers
