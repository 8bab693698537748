"""Past-tense events: what a step decided. :mod:`rizz.core.transition` folds them.

Each event is a small frozen record naming the branch (or rule) it touches, so a diff or an
audit can say what a step changed without comparing whole states (STYLE.md §2).
"""

from __future__ import annotations

from attrs import field, frozen

from rizz.core.records import AntiPattern, ContextItem, Episode, Label, QuarantinedItem, Rule, Sketch, StepRecord, Turn
from rizz.core.vec import vec_repr

__all__ = [
    "AntiPatternWritten",
    "BanditUpdated",
    "BlockEvidenceMoved",
    "BranchDeactivated",
    "BranchPruned",
    "BranchSpawned",
    "BranchesMerged",
    "ContextStored",
    "DistillationRecorded",
    "EpisodeDeduplicated",
    "EpisodeWritten",
    "Event",
    "InteractionDiscarded",
    "LabelSnapped",
    "MemoryRetired",
    "Quarantined",
    "Routed",
    "RuleActivated",
    "RuleAdded",
    "RuleCountersMoved",
    "RulePromoted",
    "RuleRetired",
    "SketchUpdated",
    "StepRecorded",
    "TurnRemembered",
    "VerdictDropped",
    "ZoneEvidenceMoved",
]


@frozen
class BranchSpawned:
    branch_id: str
    label: Label
    anchor: bytes = field(repr=vec_repr)
    label_embedding: bytes = field(repr=vec_repr)
    shape: str | None = field()
    step: int = field()


@frozen
class LabelSnapped:
    proposed: Label
    snapped: Label
    method: str  # "embedding" | "jaccard"
    score: float


@frozen
class Routed:
    branch_id: str
    score: float
    step: int
    shape: str | None
    answered: bool
    reward: float | None


@frozen
class EpisodeWritten:
    branch_id: str
    episode: Episode
    embedding: bytes


@frozen
class EpisodeDeduplicated:
    branch_id: str
    key: str


@frozen
class AntiPatternWritten:
    branch_id: str
    anti_pattern: AntiPattern
    embedding: bytes


@frozen
class Quarantined:
    branch_id: str
    item: QuarantinedItem


@frozen
class InteractionDiscarded:
    branch_id: str
    reason: str  # "unparsed" | "low-reward" | "writes-disabled"
    step: int


@frozen
class ContextStored:
    branch_id: str
    item: ContextItem
    embedding: bytes


@frozen
class RuleAdded:
    branch_id: str
    rule: Rule


@frozen
class RuleCountersMoved:
    rule_id: str
    helpful: int  # delta
    harmful: int  # delta
    branch_id: str  # the branch whose step produced the evidence


@frozen
class RuleActivated:
    rule_id: str


@frozen
class RuleRetired:
    rule_id: str


@frozen
class RulePromoted:
    rule_id: str
    tier: str  # "family" | "global"
    function: str


@frozen
class BranchesMerged:
    kept: str
    absorbed: str


@frozen
class BranchDeactivated:
    branch_id: str
    reason: str


@frozen
class BranchPruned:
    branch_id: str
    reason: str


@frozen
class DistillationRecorded:
    branch_id: str
    rules_added: int
    next_due: int = 0  # successes the branch's next distillation waits for (0: rules.distill_every)
    answered: int = 0  # the branch's answered steps now (0: not kept; rules.distill_after_miss keeps it)


@frozen
class TurnRemembered:
    turn: Turn
    capacity: int  # working memory keeps the newest `capacity` turns


@frozen
class VerdictDropped:
    """A late verdict whose routed branch no longer exists (merged or pruned since the answer)."""

    item_id: str
    branch_id: str
    step: int
    reason: str  # "branch-gone"


@frozen
class StepRecorded:
    record: StepRecord


@frozen
class MemoryRetired:
    """A stored memory contradicted by a newer verdict about the same input (:mod:`rizz.core.supersede`):
    removed from ``store`` (``episodes`` | ``anti_patterns`` | ``context``; under
    ``write.supersede_derived`` also ``rules``, ``key`` a rule id, whose counters are retired,
    and ``working_memory``, ``key`` ``turn-<step>``) of ``branch_id`` and kept in that branch's
    quarantine (never retrieved) with ``reason``."""

    branch_id: str
    store: str
    key: str
    reason: str
    step: int


@frozen
class BlockEvidenceMoved:
    """An answered step of ``branch_id`` with ``block`` shown in its prompt or not (block evidence, :mod:`rizz.core.evidence`)."""

    branch_id: str
    block: str
    shown: bool
    reward: float
    helpful: int  # 0/1, counted only when shown
    harmful: int  # 0/1, counted only when shown


@frozen
class ZoneEvidenceMoved:
    """Memories of ``source`` were in a prompt of ``reader`` that earned ``reward`` (zone evidence, :mod:`rizz.core.evidence`)."""

    source: str
    reader: str
    reward: float
    helpful: int
    harmful: int


@frozen
class SketchUpdated:
    """``branch_id``'s subspace sketch after folding this step's input (computed once, in decide)."""

    branch_id: str
    sketch: Sketch


@frozen
class BanditUpdated:
    """A verdict for the arm the bandit chose: ``features`` (m,) as seen at choice time, ``reward``."""

    features: tuple[float, ...]
    reward: float


Event = (
    BranchSpawned
    | LabelSnapped
    | Routed
    | EpisodeWritten
    | EpisodeDeduplicated
    | AntiPatternWritten
    | Quarantined
    | InteractionDiscarded
    | ContextStored
    | RuleAdded
    | DistillationRecorded
    | RuleCountersMoved
    | RuleActivated
    | RuleRetired
    | RulePromoted
    | BranchesMerged
    | BranchDeactivated
    | BranchPruned
    | TurnRemembered
    | StepRecorded
    | VerdictDropped
    | MemoryRetired
    | BlockEvidenceMoved
    | ZoneEvidenceMoved
    | SketchUpdated
    | BanditUpdated
)
