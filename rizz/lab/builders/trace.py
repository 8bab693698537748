"""TRACE (Wang et al. 2023): 8 continual-learning tasks -> stream (specs/stream-format.md).

Source: ``DATA_ROOT/trace/LLM-CL-Benchmark_500/<task>/{train,eval,test}.json`` and
``DATA_ROOT/trace/LLM-CL-Benchmark_5000/<task>/test.json`` (``zjwang21/TRACE`` @ cb1bfea,
Apache-2.0), records ``{"prompt", "answer"}`` in source order.

Each record becomes one element: ``input`` = the whole TRACE prompt (it already holds the
task instruction; ``instruction`` is null), ``reference`` = the answer unchanged,
``metadata.task`` = the task name, ``metadata.shape`` and ``verifier`` from
:data:`TRACE_TASKS` (TRACE ``evaluations/eval_*.py``). 20Minuten carries the paragraph
extracted from its prompt in ``metadata.source`` (SARI needs it). Ids are
``<task-lower>-<split>-<index in source file, 4 digits>`` (``<split>5k`` for the 5000 pool).

Notes: ScienceQA answers are "letter, newline, explanation" (verifier ``first_char``);
3 NumGLUE-cm test answers are words (``Friday``), shape stays ``number`` as in TRACE.
Repeated (prompt, answer) records inside one file are dropped (first kept, counted) unless
``keep_duplicates``.
"""

from __future__ import annotations

import re
from pathlib import Path

from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import (
    BuildError,
    BuildOptions,
    BuildResult,
    finish,
    interleave,
    load_json,
    select,
)

__all__ = ["TRACE_TASKS", "TRACE_ORDER", "build_trace", "trace_elements"]

#: TRACE's task order (sequential protocol) with (shape, verifier) per task.
TRACE_TASKS: dict[str, tuple[str, str]] = {
    "C-STANCE": ("letter", "exact_match"),
    "FOMC": ("letter", "exact_match"),
    "MeetingBank": ("text", "rouge_l"),
    "Py150": ("text", "fuzzy_ratio"),
    "ScienceQA": ("letter", "first_char"),
    "NumGLUE-cm": ("number", "exact_match"),
    "NumGLUE-ds": ("number", "exact_match"),
    "20Minuten": ("text", "sari"),
}
TRACE_ORDER: tuple[str, ...] = tuple(TRACE_TASKS)

_MINUTEN = re.compile(
    r"Provide a simplified version of the following paragraph in German\.\n\n"
    r"Paragraph:\n(?P<source>.*)\n\nSimplification:", re.S)


def _source_file(root: Path, task: str, split: str, pool: str) -> tuple[Path, str]:
    if pool not in ("500", "5000"):
        raise BuildError(f"--pool: expected 500 or 5000, got {pool!r}")
    if pool == "5000" and split == "test":
        big = root / "trace" / "LLM-CL-Benchmark_5000" / task / "test.json"
        if big.is_file():
            return big, "test5k"
    path = root / "trace" / "LLM-CL-Benchmark_500" / task / f"{split}.json"
    if not path.is_file():
        raise BuildError(f"TRACE {task} has no {split} split here ({path} missing; "
                         "MeetingBank has no train split)")
    return path, split


def trace_elements(root: Path, task: str, opts: BuildOptions, notes: list[str]) -> list[StreamElement]:
    """All elements of one TRACE task for ``opts.split`` (source order), before caps.

    Raises:
      BuildError: unknown task, missing file, or a 20Minuten prompt whose paragraph
        cannot be extracted.
    """
    if task not in TRACE_TASKS:
        raise BuildError(f"unknown TRACE task {task!r}; expected one of {', '.join(TRACE_ORDER)}")
    path, tag = _source_file(root, task, opts.split, opts.pool)
    if opts.pool == "5000" and opts.split == "test" and tag == "test":
        notes.append(f"{task}: no LLM-CL-Benchmark_5000 test set here; used the _500 test set")
    shape, verifier = TRACE_TASKS[task]
    records = load_json(path)
    seen: set[tuple[str, str]] = set()
    dups = 0
    out = []
    for i, rec in enumerate(records):
        prompt, answer = rec["prompt"], rec["answer"]
        if not opts.keep_duplicates:
            if (prompt, answer) in seen:
                dups += 1
                continue
            seen.add((prompt, answer))
        meta = {"task": task, "shape": shape}
        if task == "20Minuten":
            m = _MINUTEN.fullmatch(prompt)
            if m is None:
                raise BuildError(f"{path}: record {i}: cannot extract the 20Minuten paragraph")
            meta["source"] = m.group("source")
        out.append(StreamElement(id=f"{task.lower()}-{tag}-{i:04d}", input=prompt, metadata=meta,
                                 reference=answer, verifier=verifier))
    if dups:
        notes.append(f"{task}: skipped {dups} repeated (prompt, answer) records in {path.name}")
    return out


def build_trace(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a TRACE stream.

    Args:
      root: the data root (holds ``trace/``).
      opts: ``order`` ``sequential`` (default; task after task in :data:`TRACE_ORDER`) or
        ``interleaved`` (seeded mix keeping each task's order); ``tasks`` a subset (kept in
        TRACE order; without ``tasks`` the train split leaves out MeetingBank, which has
        none); ``per_task`` first N per task after the length filter.

    Returns:
      :class:`BuildResult` with notes (duplicates skipped, drops, long inputs).
    """
    notes: list[str] = []
    tasks = opts.tasks or TRACE_ORDER
    unknown = [t for t in tasks if t not in TRACE_TASKS]
    if unknown:
        raise BuildError(f"unknown TRACE task {unknown[0]!r}; expected one of {', '.join(TRACE_ORDER)}")
    if opts.tasks is None and opts.split == "train":
        tasks = tuple(t for t in tasks if t != "MeetingBank")
        notes.append("MeetingBank: no train split in TRACE's release; left out")
    groups = [select(trace_elements(root, t, opts, notes), opts, t, notes)
              for t in TRACE_ORDER if t in tasks]
    if (opts.order or "sequential") == "sequential":
        elements = [el for g in groups for el in g]
    else:
        elements = interleave(groups, opts.seed)
    return finish(elements, opts, notes)
