"""HumanEval (stand-in for StreamBench DS-1000) -> stream (specs/stream-format.md).

Source: ``DATA_ROOT/humaneval/HumanEval_0-131.jsonl`` (``openai/human-eval`` @ 6d43fb9,
MIT), problems HumanEval/0-131 in source order.

Element: ``input`` = :data:`HUMANEVAL_INSTRUCTION` + a blank line + the problem's
``prompt`` (signature and docstring); ``instruction`` null; ``metadata``: task
``HumanEval``, shape ``code``, ``tests`` (the ``test`` field, defining ``check(candidate)``),
``entry_point``, ``prompt``; ``verifier`` ``code_exec`` (run
``prompt + completion + tests + check(entry_point)``); ``reference`` = the canonical
solution body (for the verifier and audits only). Id ``humaneval-<n>``.

Split (by position): train = HumanEval/0-25 (first 20%), eval = 26-38 (next 10%),
test = 39-131 (last 70%).
"""

from __future__ import annotations

from pathlib import Path

from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import (
    BuildOptions,
    BuildResult,
    finish,
    fraction_split,
    interleave,
    load_jsonl,
    select,
)

__all__ = ["HUMANEVAL_INSTRUCTION", "build_humaneval", "humaneval_elements"]

HUMANEVAL_INSTRUCTION = ("Complete the following Python function. Reply with the complete "
                         "function definition (signature included) in one ```python code block.")


def humaneval_elements(root: Path, opts: BuildOptions) -> list[StreamElement]:
    """HumanEval elements of ``opts.split`` in source order (before caps)."""
    records = load_jsonl(root / "humaneval" / "HumanEval_0-131.jsonl")
    out = []
    for i in fraction_split(len(records), opts.split):
        rec = records[i]
        number = rec["task_id"].split("/")[-1]
        out.append(StreamElement(
            id=f"humaneval-{int(number):03d}", input=f"{HUMANEVAL_INSTRUCTION}\n\n{rec['prompt']}",
            metadata={"task": "HumanEval", "shape": "code", "tests": rec["test"],
                      "entry_point": rec["entry_point"], "prompt": rec["prompt"]},
            reference=rec["canonical_solution"], verifier="code_exec"))
    return out


def build_humaneval(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a HumanEval stream: source order (``sequential``) or a seeded shuffle (``interleaved``)."""
    notes: list[str] = []
    items = select(humaneval_elements(root, opts), opts, "HumanEval", notes)
    if opts.order == "interleaved":
        items = interleave([[el] for el in items], opts.seed)
    return finish(items, opts, notes)
