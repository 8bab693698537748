"""StreamBench-style mix: HotpotQA + HumanEval + FOMC + C-STANCE in one seeded stream.

StreamBench (Wu et al. 2024) streams several tasks; here its HotpotQA-distract subtask,
HumanEval (stand-in for DS-1000) and two fixed-label classification tasks from TRACE
(stand-ins for DDXPlus) are mixed. Each source is built by its own builder for
``opts.split`` (TRACE's own splits for FOMC / C-STANCE; the positional 20/10/70 splits for
HotpotQA and HumanEval), capped by ``per_task``, then interleaved with
``random.Random(seed)`` keeping each source's order (``order`` ``sequential`` concatenates
them instead).
"""

from __future__ import annotations

from pathlib import Path

from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import BuildError, BuildOptions, BuildResult, finish, interleave, select
from rizz.lab.builders.hotpotqa import hotpotqa_elements
from rizz.lab.builders.humaneval import humaneval_elements
from rizz.lab.builders.trace import trace_elements

__all__ = ["STREAMBENCH_SOURCES", "build_streambench"]

STREAMBENCH_SOURCES: tuple[str, ...] = ("HotpotQA", "HumanEval", "FOMC", "C-STANCE")


def _source(root: Path, name: str, opts: BuildOptions, notes: list[str]) -> list[StreamElement]:
    if name == "HotpotQA":
        return hotpotqa_elements(root, opts)
    if name == "HumanEval":
        return humaneval_elements(root, opts)
    return trace_elements(root, name, opts, notes)


def build_streambench(root: Path, opts: BuildOptions) -> BuildResult:
    """Build the mixed stream (default order ``interleaved``); ``tasks`` picks sources."""
    sources = opts.tasks or STREAMBENCH_SOURCES
    unknown = [s for s in sources if s not in STREAMBENCH_SOURCES]
    if unknown:
        raise BuildError(f"unknown StreamBench source {unknown[0]!r}; expected one of "
                         f"{', '.join(STREAMBENCH_SOURCES)}")
    notes: list[str] = []
    groups = [select(_source(root, s, opts, notes), opts, s, notes)
              for s in STREAMBENCH_SOURCES if s in sources]
    if (opts.order or "interleaved") == "interleaved":
        elements = interleave(groups, opts.seed)
    else:
        elements = [el for g in groups for el in g]
    return finish(elements, opts, notes)
