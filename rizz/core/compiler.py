"""Prompt compiler (spec §5): retrieved material → a prompt under a hard token budget.

A fixed priority cascade approximates "maximise value subject to tokens ≤ budget": blocks
are laid out in ``policy.compiler.layout`` order; under pressure whole blocks give way in
``policy.compiler.drop_order`` and, inside a block, the lowest-scored items go first. The
instruction and the current input are never dropped; when they alone exceed the budget,
:class:`PromptBudgetError` is raised. The memory-use preamble appears only while rules,
examples, mistakes or recent turns are shown (not for scoped context alone), so as the
budget shrinks the prompt becomes exactly the frozen baseline's (layout ``instruction,
evidence, input``).

Scoped context items with a ``metadata.time`` are shown as ``[TIME] text`` and written in
the order of their actual instants, oldest first (specs/stream-format.md, ``metadata.time``; the shell parses the time into
``ContextItem.instant_us``, :mod:`rizz.formats.timekeys`; the compiler only compares);
which items are kept under the budget still follows their scores.

Token counting is a function handed in (the shell passes the model's own tokenizer); the
reported ``token_count`` is ``count_tokens(text)`` of the final text, never an estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attrs import frozen

from rizz.core.policy import PROTECTED_BLOCKS, CompilerPolicy
from rizz.core.retrieval import Retrieved
from rizz.errors import RizzError

__all__ = [
    "HEADERS",
    "MEMORY_BLOCKS",
    "PREAMBLE_BLOCKS",
    "PREAMBLE",
    "CompiledPrompt",
    "DroppedItem",
    "PromptBudgetError",
    "PromptItem",
    "PromptSection",
    "compile_prompt",
    "prompt_blocks",
]

#: Blocks that hold adaptive memory.
MEMORY_BLOCKS = ("scoped_context", "rules", "examples", "mistakes", "working_memory")
#: The memory the preamble speaks about ("apply a rule or example ... never repeat a listed
#: mistake"); it is shown only when one of these is. Scoped context alone gets no preamble:
#: it is material to read, not earlier work to apply (a preamble announcing notes that never
#: came was seen in a newcomer's scoped-context prompt).
PREAMBLE_BLOCKS = ("rules", "examples", "mistakes", "working_memory")
PREAMBLE = (
    "Notes from earlier verified work follow. Apply a rule or example only when it fits the "
    "current input; never repeat a listed mistake."
)
HEADERS = {
    "scoped_context": "Context:",
    "preamble": "",
    "instruction": "",
    "evidence": "Evidence:",
    "rules": "Rules that helped before:",
    "examples": "Solved examples:",
    "mistakes": "Mistakes to avoid:",
    "working_memory": "Recent turns:",
    "input": "",
}


class PromptBudgetError(ValueError, RizzError):
    """The instruction and the input alone need ``needed`` tokens, more than ``budget``."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(f"instruction + input need {needed} tokens, over the prompt budget of {budget} tokens")
        self.needed = needed
        self.budget = budget


@frozen
class PromptItem:
    """One item of a block. ``at`` = (instant in integer microseconds UTC, step) for a
    time-stamped scoped context item (its display order), else None; ``stored`` = the step
    a rule, example or mistake was stored at (its display order under
    ``compiler.item_order: stored``), else None."""

    id: str
    text: str
    score: float
    at: tuple[int, int] | None = None
    stored: int | None = None


@frozen
class PromptSection:
    block: str
    header: str
    items: tuple[PromptItem, ...]

    def text(self) -> str:
        body = "\n\n".join(i.text for i in self.items)
        return f"{self.header}\n{body}" if self.header else body


@frozen
class DroppedItem:
    block: str
    id: str
    tokens: int
    reason: str  # "budget" | "item-too-long"


@frozen
class CompiledPrompt:
    """The compiled prompt (paper §3.4, the budgeted compiler).

    Attributes:
        sections: the blocks shown, in the policy's layout order (``compiler.layout``), each a
            :class:`PromptSection` (``block`` name, ``header``, ``items``); a block with nothing
            to show is absent.
        text: the prompt as the model is sent it (the sections rendered in layout order).
        token_count: ``text``'s length in the tokenizer's tokens, always ``<= budget``
            (:func:`compile_prompt` raises :class:`PromptBudgetError` when the instruction and
            the input alone do not fit).
        budget: the token budget it was compiled under.
        dropped: what did not fit, each a :class:`DroppedItem` (block, id, tokens, reason
            ``"budget"`` or ``"item-too-long"``).
    """

    sections: tuple[PromptSection, ...]
    text: str
    token_count: int
    budget: int
    dropped: tuple[DroppedItem, ...]

    def section(self, block: str) -> PromptSection | None:
        """The shown section of ``block`` (``"examples"``, ``"rules"``, ...), or None."""
        return next((s for s in self.sections if s.block == block), None)

    def item_ids(self, block: str) -> tuple[str, ...]:
        """The ids of ``block``'s shown items, in prompt order (``()`` when not shown): a caller
        puts ``item_ids("rules")`` in :attr:`StepInput.prompt_rule_ids` and
        ``item_ids("examples")`` in :attr:`StepInput.prompt_episode_keys`, which drive the
        rules' helpful/harmful counters and the examples' evidence."""
        s = self.section(block)
        return tuple(i.id for i in s.items) if s else ()


def _fmt_pair(inp: str, ans: str, label: str = "Answer") -> str:
    return f"Input: {inp}\n{label}: {ans}"


def _context_item(item: object, score: float) -> PromptItem:
    """A scoped-context item; with a time (``metadata.time``) shown as ``[TIME] text``."""
    time = getattr(item, "time", None)
    if time is None:
        return PromptItem(item.key, item.text, score)  # type: ignore[attr-defined]
    return PromptItem(item.key, f"[{time}] {item.text}", score, (item.instant_us, item.step))  # type: ignore[attr-defined]


def _time_ordered(items: list[PromptItem]) -> list[PromptItem]:
    """Untimed items first (in score order), then time-stamped ones oldest first by the actual
    instant (ties by step), so the newest statement sits nearest the question."""
    if not any(i.at is not None for i in items):
        return items
    return [i for i in items if i.at is None] + sorted((i for i in items if i.at is not None), key=lambda i: i.at)  # type: ignore[arg-type, return-value]


def prompt_blocks(retrieved: Retrieved, text: str, instruction: str | None, evidence: str | None) -> dict[str, list[PromptItem]]:
    """The candidate items of every block, before budgeting. Evidence is split on blank lines
    (earlier paragraphs score higher)."""
    ev = [p.strip() for p in (evidence or "").split("\n\n") if p.strip()]
    return {
        "scoped_context": [_context_item(s.item, s.score) for s in retrieved.context],
        "preamble": [PromptItem("preamble", PREAMBLE, 0.0)],
        "instruction": [PromptItem("instruction", instruction, 0.0)] if instruction else [],
        "evidence": [PromptItem(f"evidence-{i}", p, -float(i)) for i, p in enumerate(ev)],
        "rules": [PromptItem(s.item.id, s.item.text(), s.score, stored=s.item.step) for s in retrieved.rules],  # type: ignore[attr-defined]
        "examples": [
            PromptItem(s.item.key, _fmt_pair(s.item.input, s.item.answer), s.score, stored=s.item.step)  # type: ignore[attr-defined]
            for s in retrieved.episodes
        ],
        "mistakes": [
            PromptItem(s.item.key, _fmt_pair(s.item.input, s.item.answer, "Wrong answer"), s.score, stored=s.item.step)  # type: ignore[attr-defined]
            for s in retrieved.anti_patterns
        ],
        "working_memory": [PromptItem(f"turn-{t.step}", _fmt_pair(t.input, t.answer), float(t.step)) for t in retrieved.working],
        "input": [PromptItem("input", text, 0.0)],
    }


#: Blocks whose items' display order the policy sets: by score (``CompilerPolicy.nearest_last``
#: reverses it) or, under ``CompilerPolicy.item_order: stored``, in the order they were stored.
ORDERED_BLOCKS = ("examples", "rules", "mistakes")


def _stored_order(items: list[PromptItem]) -> list[PromptItem]:
    """Oldest stored first (ties, and items without a step, by id): the order does not depend
    on the input, so the same items render to the same text."""
    return sorted(items, key=lambda i: (i.stored if i.stored is not None else -1, i.id))


def _render(
    layout: Iterable[str], shown: dict[str, list[PromptItem]], policy: CompilerPolicy | None = None
) -> tuple[tuple[PromptSection, ...], str]:
    has_memory = any(shown.get(b) for b in PREAMBLE_BLOCKS)
    sections = []
    for block in layout:
        items = shown.get(block) or []
        if not items or (block == "preamble" and not has_memory):
            continue
        if policy is not None and block in ORDERED_BLOCKS:
            if policy.item_order == "stored":
                items = _stored_order(items)
            elif policy.nearest_last:
                items = items[::-1]
        if block == "scoped_context":
            items = _time_ordered(items)
        sections.append(PromptSection(block, HEADERS[block], tuple(items)))
    return tuple(sections), "\n\n".join(s.text() for s in sections)


def compile_prompt(
    blocks: dict[str, list[PromptItem]],
    policy: CompilerPolicy,
    count_tokens: Callable[[str], int],
    budget: int | None = None,
) -> CompiledPrompt:
    """Fit ``blocks`` (from :func:`prompt_blocks`) into ``budget`` tokens (default: the policy's).

    Args:
      blocks: block name → candidate items.
      policy: layout, drop order, per-item cap (tokens), the items' display order.
      count_tokens: text → tokens, the model's own tokenizer.
      budget: hard cap in tokens; the shell passes ``min(policy budget, window − answer reserve)``.
    Returns:
      A :class:`CompiledPrompt` with ``token_count ≤ budget``.
    Raises:
      PromptBudgetError: the protected blocks (instruction, input) alone exceed the budget.
    """
    budget = policy.token_budget if budget is None else budget
    layout = policy.layout
    shown = {b: sorted(blocks.get(b, []), key=lambda i: -i.score) for b in layout}
    dropped: list[DroppedItem] = []
    cost: dict[tuple[str, str], int] = {}
    for b in layout:
        keep = []
        for it in shown[b]:
            n = count_tokens(it.text)
            cost[(b, it.id)] = n
            if b not in PROTECTED_BLOCKS and n > policy.item_max_tokens:
                dropped.append(DroppedItem(b, it.id, n, "item-too-long"))
            else:
                keep.append(it)
        shown[b] = keep

    protected = {b: shown[b] for b in PROTECTED_BLOCKS if b in shown}
    _, ptext = _render(layout, protected)
    needed = count_tokens(ptext)
    if needed > budget:
        raise PromptBudgetError(needed, budget)

    # The drop sequence: blocks in drop order, lowest-scored items first inside a block. The
    # preamble is never an item of it: it is shown exactly while a PREAMBLE_BLOCKS block is.
    order = [b for b in policy.drop_order if b in layout and b not in PROTECTED_BLOCKS]
    order += [b for b in reversed(layout) if b not in order and b not in PROTECTED_BLOCKS]
    seq = [(b, it) for b in order if b != "preamble" for it in reversed(shown[b])]

    def attempt(j: int) -> tuple[tuple[PromptSection, ...], str, int]:
        gone = {(b, it.id) for b, it in seq[:j]}
        kept = {b: [it for it in shown[b] if (b, it.id) not in gone] for b in layout}
        sections, text = _render(layout, kept, policy)
        return sections, text, count_tokens(text)

    # Smallest j such that dropping seq[:j] fits (binary search on exact counts; the count
    # falls as items are removed). j = len(seq) leaves the protected blocks, which fit.
    best = attempt(0)
    j = 0
    if best[2] > budget:
        lo, hi = 0, len(seq)
        best = attempt(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = attempt(mid)
            if got[2] <= budget:
                hi, best = mid, got
            else:
                lo = mid
        j = hi
    dropped += [DroppedItem(b, it.id, cost[(b, it.id)], "budget") for b, it in seq[:j]]
    sections, text, total = best
    return CompiledPrompt(sections, text, total, budget, tuple(dropped))
