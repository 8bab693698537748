"""Deterministic builders of real benchmark streams (JSONL, specs/stream-format.md).

Every builder is ``build_<bench>(data_root: Path, opts: BuildOptions) -> BuildResult``:
the same data and options give the same elements in the same order (seeded with
``random.Random(opts.seed)``), so a written stream file is reproducible byte for byte.
Nothing is truncated: ``max_input_chars`` drops whole elements and says how many; long
inputs are reported in ``BuildResult.notes``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rizz.lab.builders._common import (
    ORDERS,
    SPLITS,
    BuildError,
    BuildOptions,
    BuildResult,
    fraction_split,
    interleave,
    prompt_chars,
)
from rizz.lab.builders.bfcl import build_bfcl
from rizz.lab.builders.hotpotqa import build_hotpotqa
from rizz.lab.builders.humaneval import build_humaneval
from rizz.lab.builders.interference import INTERFERENCE_GROUPS, build_interference
from rizz.lab.builders.locomo import LOCOMO_SPLITS, build_locomo
from rizz.lab.builders.streambench import STREAMBENCH_SOURCES, build_streambench
from rizz.lab.builders.tau_bench import build_tau_bench
from rizz.lab.builders.trace import TRACE_ORDER, TRACE_TASKS, build_trace

__all__ = [
    "BENCHES", "ORDERS", "SPLITS", "TRACE_TASKS", "TRACE_ORDER", "LOCOMO_SPLITS",
    "STREAMBENCH_SOURCES", "INTERFERENCE_GROUPS", "BuildError", "BuildOptions", "BuildResult", "build",
    "build_trace", "build_interference", "build_hotpotqa", "build_bfcl", "build_tau_bench", "build_humaneval", "build_locomo", "build_streambench",
    "fraction_split", "interleave", "prompt_chars",
]

#: Benchmark name (as on the command line) -> builder.
BENCHES: dict[str, Callable[[Path, BuildOptions], BuildResult]] = {
    "trace": build_trace,
    "hotpotqa": build_hotpotqa,
    "humaneval": build_humaneval,
    "locomo": build_locomo,
    "streambench": build_streambench,
    "bfcl": build_bfcl,
    "tau-bench": build_tau_bench,
    "interference": build_interference,
}


def build(bench: str, data_root: Path, opts: BuildOptions) -> BuildResult:
    """Build ``bench`` (one of :data:`BENCHES`) from ``data_root``.

    Raises:
      BuildError: unknown benchmark, missing source file, bad option, empty selection.
    """
    try:
        builder = BENCHES[bench]
    except KeyError:
        raise BuildError(f"unknown benchmark {bench!r}; expected one of {', '.join(BENCHES)}") from None
    if opts.split == "dev" and bench != "tau-bench":
        raise BuildError(f"--split dev: only tau-bench has a dev split ({bench} has train, eval, test)")
    if opts.domain is not None and bench != "tau-bench":
        raise BuildError(f"--domain is for tau-bench only, not {bench}")
    return builder(Path(data_root), opts)
