"""Shared pieces of the stream builders: results, splits, caps, ordering, reports."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rizz.errors import RizzError
from rizz.formats.streams import StreamElement, count_tasks
from rizz.formats.wording import plural

__all__ = [
    "SPLITS", "ORDERS", "BuildError", "BuildOptions", "BuildResult", "fraction_split",
    "interleave", "load_json", "load_jsonl", "prompt_chars", "select", "finish",
]

SPLITS: tuple[str, ...] = ("train", "eval", "test", "dev")  # dev: τ-bench only
ORDERS: tuple[str, ...] = ("sequential", "interleaved")
#: Non-TRACE sources are cut by position: first 20% train, next 10% eval, last 70% test.
SPLIT_FRACTIONS: Mapping[str, tuple[float, float]] = {
    "train": (0.0, 0.2), "eval": (0.2, 0.3), "test": (0.3, 1.0)}


class BuildError(RizzError):
    """A builder cannot produce the requested stream (missing file, bad option)."""


def _check_split(_inst: Any, _attr: Any, value: str) -> None:
    if value not in SPLITS:
        raise BuildError(f"--split: expected one of {', '.join(SPLITS)}, got {value!r}")


def _check_order(_inst: Any, _attr: Any, value: str | None) -> None:
    if value is not None and value not in ORDERS:
        raise BuildError(f"--order: expected one of {', '.join(ORDERS)}, got {value!r}")


def _check_positive(_inst: Any, attr: attrs.Attribute, value: int | None) -> None:
    if value is not None and value < 1:
        raise BuildError(f"--{attr.name.replace('_', '-')}: expected a positive integer, got {value}")


def _to_tasks(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class BuildOptions:
    """Options every builder takes (the CLI flags of ``rizz streams build``).

    Attributes:
      split: ``train``, ``eval`` or ``test``.
      order: ``sequential`` / ``interleaved``; None = the benchmark's default.
      per_task: cap on items per task (first N in source order, after the length filter).
      seed: seed of the interleaving shuffle (``random.Random(seed)``).
      tasks: subset of tasks (TRACE task names, LoCoMo conversation ids, StreamBench sources).
      max_input_chars: drop elements whose prompt chars (input + instruction + evidence)
        exceed this, with a printed count; None keeps everything.
      warn_chars: report (never cut) elements longer than this many chars.
      pool: TRACE only: ``"500"`` (LLM-CL-Benchmark_500) or ``"5000"`` (larger test sets).
      keep_duplicates: TRACE only: keep repeated (prompt, answer) records within a file.
      domain: τ-bench only: ``retail`` or ``airline``.
    """

    split: str = attrs.field(default="test", validator=_check_split)
    order: str | None = attrs.field(default=None, validator=_check_order)
    per_task: int | None = attrs.field(default=None, validator=_check_positive)
    seed: int = 0
    tasks: tuple[str, ...] | None = attrs.field(default=None, converter=_to_tasks)
    max_input_chars: int | None = attrs.field(default=None, validator=_check_positive)
    warn_chars: int = 24000
    pool: str = "500"
    keep_duplicates: bool = False
    domain: str | None = None  # τ-bench only: retail | airline


@attrs.frozen
class BuildResult:
    """A built stream and the notes a builder prints (drops, skips, long inputs)."""

    elements: tuple[StreamElement, ...]
    notes: tuple[str, ...] = ()

    def per_task(self) -> dict[str, int]:
        """Number of elements per ``metadata.task`` (order of first appearance; ``-`` = no task)."""
        return count_tasks(self.elements)


def load_json(path: Path) -> Any:
    """Parse a JSON file; BuildError if missing."""
    if not path.is_file():
        raise BuildError(f"source file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def load_jsonl(path: Path) -> list[Any]:
    """Parse a JSON Lines file; BuildError if missing."""
    if not path.is_file():
        raise BuildError(f"source file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def fraction_split(n: int, split: str) -> range:
    """Positions of ``split`` among n source-ordered records (20% / 10% / 70%, floors)."""
    if split not in SPLIT_FRACTIONS:
        raise BuildError(f"--split {split}: this benchmark has train, eval and test (dev is τ-bench's)")
    lo, hi = SPLIT_FRACTIONS[split]
    return range(int(n * lo), int(n * hi))


def prompt_chars(el: StreamElement) -> int:
    """Characters the model would see for this element: input + instruction + evidence."""
    return len(el.input) + len(el.instruction or "") + sum(len(e) for e in el.evidence_items)


def select(elements: Sequence[StreamElement], opts: BuildOptions, label: str,
           notes: list[str], *, cap: bool = True) -> list[StreamElement]:
    """Apply ``max_input_chars`` (drop, noted) then ``per_task`` (first N) to one task's items."""
    kept = list(elements)
    if opts.max_input_chars is not None:
        before = len(kept)
        kept = [el for el in kept if prompt_chars(el) <= opts.max_input_chars]
        if len(kept) < before:
            notes.append(f"{label}: dropped {before - len(kept)} of {plural(before, 'element')} longer than "
                         f"--max-input-chars {opts.max_input_chars}")
    if cap and opts.per_task is not None:
        kept = kept[: opts.per_task]
    return kept


def interleave(groups: Sequence[Sequence[Any]], seed: int) -> list[Any]:
    """Seeded mix of several ordered groups that keeps each group's internal order.

    A sequence of group labels (one per item) is shuffled with ``random.Random(seed)`` and
    each label takes the next item of its group, so every interleaving is equally likely.
    """
    labels = [g for g, items in enumerate(groups) for _ in items]
    random.Random(seed).shuffle(labels)
    cursors = [0] * len(groups)
    out = []
    for g in labels:
        out.append(groups[g][cursors[g]])
        cursors[g] += 1
    return out


def finish(elements: Sequence[StreamElement], opts: BuildOptions, notes: list[str]) -> BuildResult:
    """Report long inputs (never cut) and the longest one; wrap up a :class:`BuildResult`."""
    if not elements:
        raise BuildError("the selection is empty (check --split, --tasks, --per-task, --max-input-chars)")
    long = [el for el in elements if prompt_chars(el) > opts.warn_chars]
    if long:
        ids = ", ".join(el.id for el in long[:5]) + (", ..." if len(long) > 5 else "")
        notes.append(f"{plural(len(long), 'element')} {'exceeds' if len(long) == 1 else 'exceed'} {opts.warn_chars} prompt chars "
                     f"(kept, not cut): {ids}")
    longest = max(elements, key=prompt_chars)
    notes.append(f"longest element: {longest.id} with {prompt_chars(longest)} prompt chars")
    return BuildResult(tuple(elements), tuple(notes))
