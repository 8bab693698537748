"""BFCL (from the ``bfcl-eval`` wheel, Apache-2.0) -> episode stream (specs/stream-format.md).

Source: ``bfcl_eval/data/BFCL_v4_<category>.json`` and ``possible_answer/`` inside the pinned
wheel (:data:`rizz.adapters.agents.bfcl_env.BFCL_VERSION`); ``--data-root`` is not read.

Categories (:data:`~rizz.adapters.agents.bfcl_env.CATEGORIES`; docs/agents.md says how each is checked):

* AST (verifier ``bfcl_ast``, environment ``{"name": "bfcl"}``): ``simple_python``,
  ``multiple``, ``parallel``, ``parallel_multiple``, ``live_simple``, ``live_multiple``,
  ``live_parallel``, ``live_parallel_multiple`` (``reference`` = BFCL's ground truth, a list),
  ``simple_java``, ``simple_javascript`` (``tools`` = the docs as BFCL shows them for the
  language, every parameter a string; ``reference`` = ``{"ground_truth": [...], "function":
  [the docs in the language's own types]}``, which the checker's type conversion reads).
* Relevance (verifier ``bfcl_ast``): ``irrelevance``, ``live_irrelevance`` (``reference``
  ``{"call": false}``: the reply must call nothing) and ``live_relevance`` (``{"call": true}``:
  it must call something; BFCL checks no arguments there).
* Multi-turn (verifier ``bfcl_multi_turn``, environment ``{"name": "bfcl", "involved_classes",
  "initial_config"}``, ``turns`` = the user's later turns): ``multi_turn_base``,
  ``multi_turn_miss_param`` (a turn lacks a needed value, the next turn gives it: its gold is
  no call), ``multi_turn_long_context`` (environment ``long_context: true``: BFCL pads the
  scenario with its long-context data), ``multi_turn_miss_func`` (environment
  ``missed_function``: ``{"K": [names]}``, those tools listed only from turn K on, at the end of
  the list; turn K's text is BFCL's own "I have updated some more functions ..." message).

Element: ``input`` = the first user turn (BFCL's live items that carry earlier assistant
messages: each message as ``User: ...`` / ``Assistant: ...``); a system message of the turn
becomes ``instruction``; ``tools`` = the entry's function docs; ``reference`` = BFCL's ground
truth as JSON (above); ``metadata``: task and ``category`` = the category, ``bfcl_id`` =
BFCL's id. Id ``bfcl-<bfcl id>``.

Split: each category's ids in file order, first half ``train``, second half ``test``.
``--per-task N`` keeps the first N of the split per category; categories follow ``--categories``
one after another (``--order sequential``, the default) or in a seeded mix keeping each
category's order (``--order interleaved``, ``--seed``).
An AST item no correct answer can pass BFCL's checker on is dropped with a note naming the
defect (:func:`gold_problem`: e.g. a ground truth naming a parameter its own docs lack,
``parallel_multiple_12`` and ``_26``, both train), and so is an item with no function docs
(four ``live_irrelevance`` items, train).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rizz.adapters.agents.bfcl_env import (
    AST_CATEGORIES,
    CATEGORIES,
    RELEVANCE_CATEGORIES,
    language,
    language_docs,
    load_category,
)
from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import BuildError, BuildOptions, BuildResult, finish, interleave, select

__all__ = ["BFCL_SPLITS", "bfcl_elements", "build_bfcl"]

BFCL_SPLITS = ("train", "test")
#: BFCL's user message for a ``multi_turn_miss_func`` turn that adds the held-out functions
#: (``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC`` in ``bfcl_eval/constants/default_prompts.py``).
MORE_FUNCTIONS = "I have updated some more functions you can choose from. What about now?"


def _user_text(turn: list[dict[str, str]]) -> str:
    return "\n\n".join(m["content"] for m in turn if m.get("role") == "user")


def _first_turn(turn: list[dict[str, str]]) -> tuple[str | None, str]:
    """``(instruction, input)`` of an entry's first turn: its system messages, and its user text
    (each message labelled with its role when the turn also holds assistant messages)."""
    system = "\n\n".join(m["content"] for m in turn if m.get("role") == "system") or None
    said = [m for m in turn if m.get("role") != "system"]
    if all(m.get("role") == "user" for m in said):
        return system, _user_text(said)
    return system, "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in said)


def gold_fits_docs(entry: dict, ground_truth: list) -> bool:
    """False when BFCL's ground truth names a function or parameter its own docs lack (no
    answer can pass BFCL's checker then; e.g. parallel_multiple_12, _26)."""
    docs = {d["name"]: set(d.get("parameters", {}).get("properties", {})) for d in entry["function"]}
    return all(name in docs and set(params) <= docs[name] for item in ground_truth for name, params in item.items())


#: Java element types BFCL's ``java_type_converter`` always reads back as strings.
_JAVA_STRING_ELEMENTS = ("any", "String", "char")


def gold_problem(entry: dict, ground_truth: list, category: str) -> str | None:
    """Why no correct answer can pass BFCL's AST checker on this item, or None. Each reason is
    a defect of the item's data, read off the checker (``bfcl_eval/eval_checker/ast_eval``):

    * the ground truth names a function or parameter the docs lack (``parallel_multiple_12``);
    * a required parameter has no acceptable value but ``""`` ("leave it out"; the checker
      demands it and then finds no value to match; ``live_simple_112-68-0``);
    * a Java list whose elements the converter reads as strings (``any``, ``String``, ``char``)
      has only acceptable lists holding non-strings (``simple_java_65``);
    * a dict's acceptable value maps a key to a bare value, not a list of acceptable values
      (the checker then iterates the value: only one character of a string matches;
      ``simple_java_64``).
    """
    if not gold_fits_docs(entry, ground_truth):
        return "its ground truth names a parameter its docs lack"
    docs = {d["name"]: d.get("parameters", {}) for d in entry["function"]}
    for item in ground_truth:
        for name, params in item.items():
            props = docs[name].get("properties", {})
            for req in docs[name].get("required", []):
                if not [v for v in params.get(req, []) if v != ""]:
                    return f"required parameter {req!r} of {name} has no acceptable value but leaving it out"
            for key, values in params.items():
                doc = props[key]
                nested = (doc.get("items") or {}).get("type")
                options = [v for v in values if v != ""]
                if (language(category) == "java" and doc.get("type") in ("Array", "ArrayList")
                        and nested in _JAVA_STRING_ELEMENTS and options
                        and all(isinstance(v, list) and not all(isinstance(x, str) for x in v) for v in options)):
                    return f"Java {doc['type']}<{nested}> {key!r} of {name}: BFCL reads its elements as strings, the gold holds others"
                if any(isinstance(v, dict) and not all(isinstance(x, list) for x in v.values()) for v in options):
                    return f"dict {key!r} of {name}: its acceptable value is not a list per key"
    return None


def _single_turn(category: str, entry: dict[str, Any], answer: dict[str, Any], meta: dict[str, Any],
                 notes: list[str] | None) -> StreamElement | None:
    instruction, text = _first_turn(entry["question"][0])
    tools = entry["function"]
    if not tools:
        if notes is not None:
            notes.append(f"{category}: dropped {entry['id']} (no function docs; an episode element needs tools)")
        return None
    if category in RELEVANCE_CATEGORIES:
        reference = json.dumps({"call": category == "live_relevance"})
    else:
        problem = gold_problem(entry, answer["ground_truth"], category)
        if problem is not None:
            if notes is not None:
                notes.append(f"{category}: dropped {entry['id']} ({problem})")
            return None
        reference = json.dumps(answer["ground_truth"])
        if language(category) != "python":
            tools = language_docs(entry["function"], category)
            reference = json.dumps({"ground_truth": answer["ground_truth"], "function": entry["function"]})
    return StreamElement(id=f"bfcl-{entry['id']}", input=text, instruction=instruction, metadata=meta, tools=tools,
                         environment={"name": "bfcl"}, reference=reference, verifier="bfcl_ast")


def _multi_turn(category: str, entry: dict[str, Any], answer: dict[str, Any], meta: dict[str, Any]) -> StreamElement:
    turns = entry["question"]
    missed: dict[str, list[str]] = entry.get("missed_function") or {}
    held = [n for k in sorted(missed, key=int) for n in missed[k]]
    # BFCL's order: the docs without the held-out functions, each added at the end in its turn
    tools = [d for d in entry["function"] if d["name"] not in held]
    tools += sorted((d for d in entry["function"] if d["name"] in held), key=lambda d: held.index(d["name"]))
    later = [MORE_FUNCTIONS if not t and str(i) in missed else _user_text(t) for i, t in enumerate(turns) if i]
    env: dict[str, Any] = {"name": "bfcl", "involved_classes": entry["involved_classes"],
                           "initial_config": entry["initial_config"]}
    if missed:
        env["missed_function"] = missed
    if "long_context" in category:
        env["long_context"] = True
    return StreamElement(id=f"bfcl-{entry['id']}", input=_user_text(turns[0]), metadata=meta, tools=tools, turns=later,
                         reference=json.dumps(answer["ground_truth"]), environment=env, verifier="bfcl_multi_turn")


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
        meta = {"task": category, "category": category, "bfcl_id": entry["id"]}
        if category in AST_CATEGORIES or category in RELEVANCE_CATEGORIES:
            el = _single_turn(category, entry, answer, meta, notes)
            if el is not None:
                out.append(el)
        else:
            out.append(_multi_turn(category, entry, answer, meta))
    return out


def build_bfcl(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a BFCL stream over ``opts.tasks`` (the categories; default ``simple_python``)."""
    del root  # the data ships inside the bfcl-eval wheel
    notes: list[str] = []
    groups = [select(bfcl_elements(category, opts.split, notes), opts, category, notes)
              for category in opts.tasks or ("simple_python",)]
    if (opts.order or "sequential") == "sequential":
        return finish([el for g in groups for el in g], opts, notes)
    return finish(interleave(groups, opts.seed), opts, notes)
