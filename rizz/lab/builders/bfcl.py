"""BFCL (from the ``bfcl-eval`` wheel, Apache-2.0) -> episode stream (specs/stream-format.md).

Source: ``bfcl_eval/data/BFCL_v4_<category>.json`` and ``possible_answer/`` inside the pinned
wheel (:data:`rizz.adapters.agents.bfcl_env.BFCL_VERSION`); ``--data-root`` is not read.

Categories: ``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` (verifier
``bfcl_ast``, environment ``{"name": "bfcl"}``) and ``multi_turn_base`` (verifier
``bfcl_multi_turn``, environment ``{"name": "bfcl", "involved_classes", "initial_config"}``,
``turns`` = the user's later turns). Element: ``input`` = the first user turn; ``tools`` = the
entry's function docs as BFCL gives them; ``reference`` = BFCL's ground truth as JSON;
``metadata``: task and ``category`` = the category, ``bfcl_id`` = BFCL's id. Id ``bfcl-<bfcl id>``.

Split: each category's ids in file order, first half ``train``, second half ``test``.
``--per-task N`` keeps the first N of the split per category; categories follow ``--categories``.
An AST item whose ground truth names a parameter its own function docs lack is dropped with a
note (no answer passes BFCL's checker there: ``parallel_multiple_12`` and ``_26``, both train).
"""

from __future__ import annotations

import json
from pathlib import Path

from rizz.adapters.agents.bfcl_env import AST_CATEGORIES, CATEGORIES, load_category
from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import BuildError, BuildOptions, BuildResult, finish, select

__all__ = ["BFCL_SPLITS", "bfcl_elements", "build_bfcl"]

BFCL_SPLITS = ("train", "test")


def _user_text(turn: list[dict[str, str]]) -> str:
    return "\n\n".join(m["content"] for m in turn if m.get("role") == "user")


def gold_fits_docs(entry: dict, ground_truth: list) -> bool:
    """False when BFCL's ground truth names a function or parameter its own docs lack (no
    answer can pass BFCL's checker then; e.g. parallel_multiple_12, _26)."""
    docs = {d["name"]: set(d.get("parameters", {}).get("properties", {})) for d in entry["function"]}
    return all(name in docs and set(params) <= docs[name] for item in ground_truth for name, params in item.items())


def bfcl_elements(category: str, split: str, notes: list[str] | None = None) -> list[StreamElement]:
    """The elements of one category's ``split`` half, in file order."""
    if category not in CATEGORIES:
        raise BuildError(f"--categories: {category!r} is not one of {', '.join(CATEGORIES)}")
    if split not in BFCL_SPLITS:
        raise BuildError(f"--split {split}: BFCL streams have train and test halves")
    pairs = load_category(category)
    half = len(pairs) // 2
    pairs = pairs[:half] if split == "train" else pairs[half:]
    out = []
    for entry, answer in pairs:
        turns = entry["question"]
        meta = {"task": category, "category": category, "bfcl_id": entry["id"]}
        if category in AST_CATEGORIES:
            if not gold_fits_docs(entry, answer["ground_truth"]):
                if notes is not None:
                    notes.append(f"{category}: dropped {entry['id']} (its ground truth names a parameter its docs lack)")
                continue
            out.append(StreamElement(
                id=f"bfcl-{entry['id']}", input=_user_text(turns[0]), metadata=meta, tools=entry["function"],
                environment={"name": "bfcl"}, reference=json.dumps(answer["ground_truth"]), verifier="bfcl_ast"))
        else:
            out.append(StreamElement(
                id=f"bfcl-{entry['id']}", input=_user_text(turns[0]), metadata=meta, tools=entry["function"],
                turns=[_user_text(t) for t in turns[1:]], reference=json.dumps(answer["ground_truth"]),
                environment={"name": "bfcl", "involved_classes": entry["involved_classes"],
                             "initial_config": entry["initial_config"]}, verifier="bfcl_multi_turn"))
    return out


def build_bfcl(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a BFCL stream over ``opts.tasks`` (the categories; default ``simple_python``)."""
    del root  # the data ships inside the bfcl-eval wheel
    notes: list[str] = []
    items: list[StreamElement] = []
    for category in opts.tasks or ("simple_python",):
        items += select(bfcl_elements(category, opts.split, notes), opts, category, notes)
    return finish(items, opts, notes)
