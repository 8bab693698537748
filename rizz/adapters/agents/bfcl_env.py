"""BFCL (Berkeley Function Calling Leaderboard) from the ``bfcl-eval`` package (Apache-2.0).

What rizz takes from the wheel (pinned in ``pyproject.toml``; installed ``--no-deps``, its
checkers need only the standard library):

* the question and possible-answer files (``bfcl_eval/data/BFCL_v4_<category>.json``) and the
  multi-turn function docs (``data/multi_turn_func_doc``), read by :func:`load_category`;
* the multi-turn API classes (``eval_checker/multi_turn_eval/func_source_code``), executed by
  :class:`MultiTurnEnvironment` through ``getattr`` on parsed calls (never ``eval``);
* the AST checker (``eval_checker/ast_eval/ast_checker``, with its Java and JavaScript type
  converters) and the multi-turn checker (``eval_checker/multi_turn_eval/multi_turn_checker``),
  called by the ``bfcl_ast`` and ``bfcl_multi_turn`` verifiers (:mod:`rizz.adapters.verifiers.episodes`).

Ported rather than imported (``bfcl_eval/utils.py`` creates directories inside the installed
package when imported): the rewriting of Java and JavaScript function docs into the form BFCL
shows the model (:func:`language_docs`).

The AST checker's module imports ``bfcl_eval.constants.model_config``, which imports every
provider SDK BFCL supports (only to read one flag, ``underscore_to_dot``, for providers that
rename dotted function names). :func:`ast_checker` registers a minimal stand-in for that one
module (every model: ``underscore_to_dot`` False, as for models given the dotted names, which
the text protocol and rizz's tool schemas keep) before importing the checker.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import inspect
import json
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rizz.adapters.agents.tools import ToolError, to_text

__all__ = ["AST_CATEGORIES", "MULTI_TURN_CATEGORIES", "RELEVANCE_CATEGORIES", "SINGLE_TURN_CATEGORIES", "CATEGORIES",
           "BFCL_VERSION", "MultiTurnEnvironment", "SingleTurnEnvironment", "ast_checker", "bfcl_environment", "data_dir",
           "function_docs", "language", "language_docs", "load_category", "shown_tools"]

#: The bfcl-eval release rizz pins (pyproject.toml) and reads.
BFCL_VERSION = "2026.3.23"
#: Single-turn categories BFCL scores with its AST checker (``bfcl_ast``): the calls of one reply
#: against the possible answers.
AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "simple_java", "simple_javascript",
                  "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
#: Single-turn categories BFCL scores by whether the reply calls a function at all (its
#: ``relevance_file_runner``): irrelevance -- no call; relevance -- some call, arguments unchecked.
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
SINGLE_TURN_CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES
#: Multi-turn categories (``bfcl_multi_turn``): the API classes' state and the calls' results per turn.
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
CATEGORIES = SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES


def data_dir() -> Path:
    """``bfcl_eval/data`` inside the installed wheel. Raises ModuleNotFoundError without bfcl-eval."""
    import bfcl_eval

    return Path(bfcl_eval.__file__).resolve().parent / "data"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def function_docs(involved_classes: list[str]) -> list[dict[str, Any]]:
    """The function docs BFCL gives the model for a multi-turn entry, in class order."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    out: list[dict[str, Any]] = []
    for cls in involved_classes:
        out.extend(_jsonl(data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[cls]))
    return out


def load_category(category: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(entry, possible_answer)`` pairs of a category, in file order (multi-turn entries get
    their ``function`` docs).

    Raises:
      ValueError: a category rizz does not run (see :data:`CATEGORIES`).
    """
    if category not in CATEGORIES:
        raise ValueError(f"BFCL category {category!r}: expected one of {', '.join(CATEGORIES)}")
    entries = _jsonl(data_dir() / f"BFCL_v4_{category}.json")
    if category in RELEVANCE_CATEGORIES:  # BFCL ships no possible answers: the decision is the answer
        return [(e, {"id": e["id"]}) for e in entries]
    answers = {a["id"]: a for a in _jsonl(data_dir() / "possible_answer" / f"BFCL_v4_{category}.json")}
    for e in entries:
        if "involved_classes" in e:
            e["function"] = function_docs(e["involved_classes"])
    return [(e, answers[e["id"]]) for e in entries]


def language(category: str) -> str:
    """``java``, ``javascript`` or ``python``: the language BFCL's AST checker reads a category's
    calls in (its ``is_java`` / ``is_js`` on the category name)."""
    return "javascript" if "javascript" in category else "java" if "java" in category else "python"


def language_docs(function: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """The function docs BFCL shows the model for a Java or JavaScript category (a copy; Python
    docs are returned unchanged): BFCL's ``_func_doc_language_specific_pre_processing``
    (``bfcl_eval/utils.py``), ported because importing that module creates directories inside
    the installed package. Each description gets the language note; every parameter becomes
    ``type: "string"`` (a value in the language's own syntax, e.g. ``"new int[]{1, 2}"``), its
    description saying the language type (and an array's element type, a JavaScript object's
    schema)."""
    lang = language(category)
    if lang == "python":
        return function
    docs = copy.deepcopy(function)
    name = "Java" if lang == "java" else "JavaScript"
    hint = " Note that the provided function is in Java 8 SDK syntax." if lang == "java" else \
        " Note that the provided function is in JavaScript syntax."
    for item in docs:
        item["description"] = item["description"] + hint
        for value in item["parameters"]["properties"].values():
            if value["type"] == "any":
                value["description"] += f" This parameter can be of any type of {name} object in string representation."
            else:
                value["description"] += f" This is {name} {value['type']} type parameter in string representation."
            if value["type"] in (("ArrayList", "Array") if lang == "java" else ("array",)):
                value["description"] += (f" The list elements are of type {value['items']['type']}; "
                                         "they are not in string representation.")
                del value["items"]
            if lang == "javascript" and value["type"] == "dict" and "properties" in value:
                value["description"] += (" The dictionary entries have the following schema; they are not in string "
                                         f"representation. {json.dumps(value['properties'])}")
                del value["properties"]
            value["type"] = "string"
    return docs


def shown_tools(tools: tuple[Any, ...], environment: Mapping[str, Any] | None, turn: int) -> tuple[Any, ...]:
    """The tools listed to the model at user turn ``turn`` (0: the element's ``input``): all but
    those ``environment.missed_function`` (``{"K": [names]}``, BFCL's ``multi_turn_miss_func``)
    holds out until a later turn K."""
    held = (environment or {}).get("missed_function") or {}
    later = {n for k, names in held.items() if int(k) > turn for n in names}
    return tuple(t for t in tools if t["name"] not in later) if later else tools


class _AnyModel(dict):
    def __missing__(self, key: str) -> Any:
        return types.SimpleNamespace(underscore_to_dot=False)


def ast_checker() -> Callable[..., dict[str, Any]]:
    """BFCL's ``ast_checker(func_description, model_output, possible_answer, language,
    test_category, model_name)`` (see the module docstring for the one stand-in module)."""
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stand_in = types.ModuleType(name)
        stand_in.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
        sys.modules[name] = stand_in
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker as checker

    return checker


def _state(value: Any, path: frozenset[int] = frozenset()) -> Any:
    """A JSON-able picture of an API object's public state (for the digest); a reference back
    to an object on the current path (a file system's parent link) is written ``<cycle>``."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if id(value) in path:
        return "<cycle>"
    inner = path | {id(value)}
    if isinstance(value, Mapping):
        return {str(k): _state(v, inner) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        items = [_state(v, inner) for v in value]
        return sorted(items, key=repr) if isinstance(value, set) else items
    if hasattr(value, "__dict__"):
        return {type(value).__name__: {k: _state(v, inner) for k, v in sorted(vars(value).items())
                                       if not k.startswith("_") and not callable(v) and k != "parent"}}
    return repr(value)


class SingleTurnEnvironment:
    """BFCL single-turn (AST) categories: calls are scored, never executed."""

    name = "bfcl"

    def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        del arguments
        raise ToolError(f"{tool}: single-turn BFCL functions are not executed; the calls themselves are the answer")

    def state_digest(self) -> str:
        return "sha256:" + hashlib.sha256(b"").hexdigest()


class MultiTurnEnvironment:
    """BFCL multi-turn: the involved API classes from the wheel, loaded with the entry's
    ``initial_config`` (BFCL's own ``_load_scenario``; ``long_context``: the scenario padded with
    BFCL's long-context data, as for ``multi_turn_long_context``); a call runs the named public
    method."""

    name = "bfcl"

    def __init__(self, involved_classes: list[str], initial_config: Mapping[str, Any], long_context: bool = False) -> None:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        for cls in involved_classes:
            if cls not in CLASS_FILE_PATH_MAPPING:
                raise ValueError(f"environment.involved_classes: unknown BFCL class {cls!r}")
            inst = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[cls]), cls)()
            if cls not in STATELESS_CLASSES:
                inst._load_scenario(copy.deepcopy(dict(initial_config.get(cls, {}))), long_context=long_context)
            self.instances[cls] = inst
            for mname, method in inspect.getmembers(inst, predicate=inspect.ismethod):
                if not mname.startswith("_"):
                    self.methods[mname] = method

    def params(self, tool: str) -> list[str]:
        """Parameter names of ``tool`` in signature order (binds positional arguments)."""
        fn = self.methods.get(tool)
        return list(inspect.signature(fn).parameters) if fn else []

    def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        fn = self.methods.get(tool.rsplit(".", 1)[-1])
        if fn is None:
            raise ToolError(f"unknown tool {tool!r}")
        try:
            result = fn(**dict(arguments))
        except Exception as err:  # the API's own exception is the tool's error result
            raise ToolError(f"{tool}: {type(err).__name__}: {err}") from None
        return to_text(result) if isinstance(result, (str, dict, list)) else str(result)

    def state_digest(self) -> str:
        pic = {cls: _state(inst) for cls, inst in sorted(self.instances.items())}
        return "sha256:" + hashlib.sha256(json.dumps(pic, sort_keys=True, default=repr).encode()).hexdigest()


def bfcl_environment(env: Mapping[str, Any]) -> SingleTurnEnvironment | MultiTurnEnvironment:
    """``{"name": "bfcl"}`` (single-turn) or ``{"name": "bfcl", "involved_classes", "initial_config"}``
    (optional ``long_context``: true; ``missed_function``: read by :func:`shown_tools`)."""
    if env.get("involved_classes"):
        return MultiTurnEnvironment(list(env["involved_classes"]), env.get("initial_config") or {},
                                    long_context=bool(env.get("long_context")))
    return SingleTurnEnvironment()
