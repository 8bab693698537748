"""Interference benchmark (results/2026-12-01-interference-test50.md): streams that mix tasks which look alike but must be
answered differently, from the real data under ``DATA_ROOT`` (no new source).

Groups (``--tasks`` takes group names; default all four):

* ``numbers``: NumGLUE-cm with NumGLUE-ds (TRACE): both ask for a number about a short text.
* ``letters``: C-STANCE, FOMC and ScienceQA (TRACE): all answer with a letter, whose meaning
  differs per task (stance, policy stance, a multiple-choice option).
* ``code``: Py150 line completion (TRACE, fuzzy ratio) with HumanEval function writing
  (``code_exec``): both show Python and ask for Python.
* ``text``: MeetingBank summaries (TRACE, ROUGE-L) with 20Minuten simplification (TRACE, SARI):
  both rewrite a long text.

Elements are exactly those of :func:`rizz.lab.builders.trace.trace_elements` and
:func:`rizz.lab.builders.humaneval.humaneval_elements` (same ids, fields, verifiers).
Splits: ``train`` and ``eval`` are the sources' own (MeetingBank has no train split: its eval
split stands in, noted); ``test`` skips the first :data:`HELD_OUT_SKIP` items of each TRACE
task's test file, which are the ones in ``data/trace-mini/test.jsonl``, so the interference
test never repeats an element of the TRACE slice. ``per_task`` caps each task; the order is
``interleaved`` (seeded, default) or ``sequential`` (group after group, task after task).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import BuildError, BuildOptions, BuildResult, finish, interleave, select
from rizz.lab.builders.humaneval import humaneval_elements
from rizz.lab.builders.trace import trace_elements

__all__ = ["HELD_OUT_SKIP", "INTERFERENCE_GROUPS", "build_interference"]

#: Group name -> its tasks (TRACE task names, and HumanEval).
INTERFERENCE_GROUPS: dict[str, tuple[str, ...]] = {
    "numbers": ("NumGLUE-cm", "NumGLUE-ds"),
    "letters": ("C-STANCE", "FOMC", "ScienceQA"),
    "code": ("Py150", "HumanEval"),
    "text": ("MeetingBank", "20Minuten"),
}
#: TRACE test items per task held by data/trace-mini/test.jsonl (built with --per-task 40).
HELD_OUT_SKIP = 40


def _task_elements(root: Path, task: str, opts: BuildOptions, notes: list[str]) -> list[StreamElement]:
    if task == "HumanEval":
        return humaneval_elements(root, opts)
    split_opts = opts
    if task == "MeetingBank" and opts.split == "train":
        split_opts = attrs.evolve(opts, split="eval")
        notes.append("MeetingBank: no train split in TRACE's release; its eval split stands in")
    els = trace_elements(root, task, split_opts, notes)
    if opts.split == "test":
        els = els[HELD_OUT_SKIP:]
    return els


def build_interference(root: Path, opts: BuildOptions) -> BuildResult:
    """Build an interference stream (see the module docstring).

    Raises:
      BuildError: an unknown group name, a missing source file, an empty selection.
    """
    groups = opts.tasks or tuple(INTERFERENCE_GROUPS)
    unknown = [g for g in groups if g not in INTERFERENCE_GROUPS]
    if unknown:
        raise BuildError(f"unknown interference group {unknown[0]!r}; expected one of {', '.join(INTERFERENCE_GROUPS)}")
    notes: list[str] = []
    per_task = [
        select(_task_elements(root, t, opts, notes), opts, t, notes)
        for g in INTERFERENCE_GROUPS if g in groups for t in INTERFERENCE_GROUPS[g]
    ]
    if (opts.order or "interleaved") == "sequential":
        elements = [el for items in per_task for el in items]
    else:
        elements = interleave(per_task, opts.seed)
    return finish(elements, opts, notes)
