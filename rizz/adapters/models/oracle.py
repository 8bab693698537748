"""``--model oracle``: a scripted agent that replays each episode's gold actions (validation only).

It reads the element's ``reference`` (the gold; normally seen only by the verifier) and needs no
model, so it checks the environments, the verifiers and the loop independently of model quality
(docs/agents.md): it must score 1.0 on every τ-bench task and every BFCL item it is given.
:class:`NullAgent` is its opposite, a scripted agent that does nothing; it must score 0 wherever
the gold actions change the database.

* τ-bench: one gold action a step, then one message with every required output.
* BFCL single-turn: one reply with the gold calls (each parameter's first acceptable value other
  than ``""``; a parameter whose only acceptable value is ``""`` is left out); Java and
  JavaScript values written as the language's source text, the forms BFCL's type converters
  read (``"new int[]{1, 2}"``, ``"5L"``, ``"[1, 2]"``). Irrelevance: a reply with no call;
  live relevance: a call of the first tool without arguments (BFCL checks no arguments there).
* BFCL multi-turn: per turn, one reply with that turn's gold calls, then a message that ends
  the turn (positional arguments in the gold strings are bound by the API's signature).
"""

from __future__ import annotations

import ast
import json
from typing import Any

from rizz.adapters.agents.bfcl_env import language
from rizz.adapters.agents.calls import ToolCall
from rizz.adapters.agents.env import Environment
from rizz.adapters.agents.loop import STOP, AgentReply
from rizz.adapters.models.base import Generation, Message, estimate_tokens
from rizz.formats.streams import StreamElement

__all__ = ["NullAgent", "OracleAgent", "OracleModel", "ScriptedUser", "gold_calls"]


def _bfcl_value(values: list[Any]) -> tuple[bool, Any]:
    """(present, value) for one BFCL possible-answer list: its first value other than ``""``
    (``""`` marks an optional parameter that may be left out); absent if there is none."""
    given = [v for v in values if v != ""]
    return (True, _pick(given[0])) if given else (False, None)


def _pick(value: Any) -> Any:
    """A value from BFCL's possible-answer form: inside a dict each key maps to its acceptable values."""
    if isinstance(value, dict):
        out = {}
        for k, options in value.items():
            present, v = _bfcl_value(options if isinstance(options, list) else [options])
            if present:
                out[k] = v
        return out
    if isinstance(value, list):
        return [_pick(v) for v in value]
    return value


#: Java element type names for ``new T[]{...}`` (BFCL's type names otherwise).
_JAVA_ELEMENT = {"integer": "int", "any": "Object"}


def _quoted(text: str) -> str:
    """``"text"``: BFCL's converters strip the first and last character, nothing is unescaped."""
    return f'"{text}"'


def _java(value: Any, kind: str, nested: str | None) -> str:
    """``value`` as Java source of type ``kind`` (elements ``nested``), in the forms BFCL's
    ``java_type_converter`` reads back to ``value``."""
    if isinstance(value, str):  # a String, an ``any`` object or a variable name: as written
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "long":
        return f"{value}L"
    if kind == "float":
        return f"{value}f"
    if kind == "Array":
        element = _JAVA_ELEMENT.get(nested or "any", nested)
        return f"new {element}[]{{{', '.join(_java(v, nested or 'any', None) for v in value)}}}"
    if kind == "ArrayList":
        quote = {"String": '"', "char": "'"}.get(nested or "", "")
        items = ", ".join(f"{quote}{_java(v, nested or 'any', None)}{quote}" for v in value)
        return f"new ArrayList<>(Arrays.asList({items}))" if value else "new ArrayList<>()"
    if kind == "HashMap":
        puts = " ".join(f'put("{k}", {_quoted(v) if isinstance(v, str) else _java(v, "any", None)});'
                        for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return str(value)


def _js(value: Any, kind: str, nested: str | None) -> str:
    """``value`` as JavaScript source of type ``kind``, in the forms BFCL's ``js_type_converter`` reads back."""
    if isinstance(value, str):
        return _quoted(value) if kind == "String" else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "Bigint":
        return f"{value}n"
    if isinstance(value, list):
        return "[" + ", ".join(_js(v, nested or "any", None) if not isinstance(v, str) else _quoted(v)
                               for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_quoted(v) if isinstance(v, str) else _js(v, 'any', None)}"
                               for k, v in value.items()) + "}"
    return str(value)


def _literal(lang: str, value: Any, doc: dict[str, Any]) -> str:
    """A gold value as the string a Java / JavaScript BFCL item's parameter takes."""
    nested = (doc.get("items") or {}).get("type")
    return _java(value, doc["type"], nested) if lang == "java" else _js(value, doc["type"], nested)


def _parse_gold(text: str, env: Environment) -> ToolCall:
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    name = ast.unparse(node.func)
    args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    params = env.params(name) if hasattr(env, "params") else []
    for i, pos in enumerate(node.args):
        args[params[i]] = ast.literal_eval(pos)
    return ToolCall(name, {k: list(v) if isinstance(v, tuple) else v for k, v in args.items()})


def gold_calls(el: StreamElement, env: Environment | None) -> list[tuple[ToolCall, ...]]:
    """The gold replies of ``el``: one tuple of calls per agent step (see the module docstring);
    for multi-turn BFCL an empty tuple marks the end of a turn. ``env``: the episode's
    environment, needed only for multi-turn BFCL (its gold calls are parsed against the API
    classes); ValueError without it there."""
    gold = json.loads(el.reference) if isinstance(el.reference, str) else None
    if el.verifier == "tau_db":
        return [(ToolCall(a["name"], a["kwargs"]),) for a in gold["actions"]]
    if el.verifier == "bfcl_ast":
        if isinstance(gold, dict) and "call" in gold:  # (ir)relevance: no call, or any call
            return [(ToolCall(str(el.tools[0]["name"]), {}),)] if gold["call"] and el.tools else []
        lang = language(str(el.metadata.get("category") or ""))
        docs = {d["name"]: d["parameters"]["properties"] for d in gold["function"]} if isinstance(gold, dict) else {}
        calls = []
        for item in gold["ground_truth"] if isinstance(gold, dict) else gold:
            ((name, params),) = item.items()
            kept = {}
            for k, values in params.items():
                present, value = _bfcl_value(values)
                if present:
                    kept[k] = value if lang == "python" else _literal(lang, value, docs[name][k])
            calls.append(ToolCall(name, kept))
        return [tuple(calls)]
    if el.verifier == "bfcl_multi_turn":
        if env is None:
            raise ValueError(f"{el.id}: multi-turn gold calls need the episode's environment")
        out: list[tuple[ToolCall, ...]] = []
        for turn in gold:
            if turn:
                out.append(tuple(_parse_gold(c, env) for c in turn))
            out.append(())
        return out
    raise ValueError(f"{el.id}: the oracle has no gold for verifier {el.verifier!r}")


class OracleAgent:
    """Replays the gold (see the module docstring); state: the position in the script."""

    def __init__(self) -> None:
        self._script: list[tuple[ToolCall, ...]] | None = None

    def reply(self, el: StreamElement, transcript: list[dict[str, Any]], env: Environment) -> AgentReply:
        if self._script is None:
            self._script = gold_calls(el, env)
        if self._script:
            calls = self._script.pop(0)
            if calls:
                return AgentReply("", calls)
            return AgentReply("Done.")
        outputs = json.loads(el.reference).get("outputs", []) if el.verifier == "tau_db" else []
        return AgentReply(" ".join(outputs) or "Done.")


class NullAgent:
    """A scripted agent that calls no tool and says it cannot help."""

    def reply(self, el: StreamElement, transcript: list[dict[str, Any]], env: Environment) -> AgentReply:
        del el, transcript, env
        return AgentReply("I am sorry, I cannot help with that.")


class ScriptedUser:
    """The oracle's customer: opens with a fixed line and stops after the agent's first message."""

    def reply(self, transcript: list[dict[str, Any]]) -> str:
        return "Hi, I need help." if not transcript else STOP


class OracleModel:
    """The ``oracle`` model spec: a :class:`~rizz.adapters.models.base.ModelBackend` whose text
    calls (the judge, distillation) get an empty reply; episodes use :class:`OracleAgent`."""

    name = "oracle"
    context_window = 1 << 20
    scripted = True

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def generate(self, messages: list[Message], *, max_tokens: int, stop: tuple[str, ...] = (), rendering: str = "chat") -> Generation:
        del messages, max_tokens, stop, rendering
        return Generation("", 0, 0, 0.0, None, self.name, "stop")

    def agent(self) -> OracleAgent:
        return OracleAgent()

    def user(self) -> ScriptedUser:
        return ScriptedUser()
