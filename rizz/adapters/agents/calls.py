"""Tool calls as text: the text protocol (Python call syntax, BFCL's prompt format) of GGUF models
whose chat template takes no tools (SmolLM2; the Qwen models use their template's own format,
:mod:`rizz.adapters.agents.qwen_tools`) and of any backend without native tool calling.

A reply is a *call attempt* when, after code fences are removed, it starts with ``[`` or with
``name(``: then it must parse (with :mod:`ast`, never ``eval``) as one call or a list of calls
``name(arg=value, ...)`` whose names may be dotted (``math.factorial``) and whose argument
values are Python literals (strings, numbers, booleans, None, lists, tuples, dicts), or as calls
one after another separated by ``;`` (``a(x=1); b(y=2)``: the form a verified trajectory is
written in memory, which a model shown it as an example copies). Anything
else is a message to the user. A call attempt that does not parse is a :class:`CallSyntaxError`,
which the agent loop hands back to the model as the tool's error result.

Examples:
  >>> parse_reply("[get_order(order_id='#W1'), calculate(expression='1+2')]")
  (ToolCall(name='get_order', arguments={'order_id': '#W1'}), ToolCall(name='calculate', arguments={'expression': '1+2'}))
  >>> parse_reply("get_order(order_id='#W1'); calculate(expression='1+2');")
  (ToolCall(name='get_order', arguments={'order_id': '#W1'}), ToolCall(name='calculate', arguments={'expression': '1+2'}))
  >>> parse_reply("Your order has shipped.")
  ()
  >>> format_call(ToolCall("cd", {"folder": "docs"}))
  "cd(folder='docs')"
"""

from __future__ import annotations

import ast
import re
from typing import Any

import attrs

from rizz.errors import RizzError

__all__ = ["CallSyntaxError", "ToolCall", "format_call", "parse_reply"]

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```\s*$", re.S)
_CALL_START = re.compile(r"^\s*(\[|[A-Za-z_][\w.]*\s*\()")


class CallSyntaxError(ValueError, RizzError):
    """A reply that tries to call a tool but is not a list of ``name(arg=literal, ...)`` calls."""


@attrs.frozen
class ToolCall:
    """One tool call: ``name`` and keyword ``arguments`` (JSON-like values)."""

    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict, eq=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and (self.name, self.arguments) == (other.name, other.arguments)

    def __hash__(self) -> int:
        return hash((self.name, repr(sorted(self.arguments.items()))))

    def to_json(self) -> list[Any]:
        return [self.name, self.arguments]


def _strip(text: str) -> str:
    text = text.strip()
    m = _FENCE.match(text)
    return m.group(1).strip() if m else text


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    raise CallSyntaxError("a tool name must be a plain or dotted name")


def _literal(node: ast.AST) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        raise CallSyntaxError(f"argument value {ast.unparse(node)!r} is not a literal") from None
    return list(value) if isinstance(value, tuple) else value


def _call(node: ast.AST) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise CallSyntaxError(f"{ast.unparse(node)!r} is not a call name(arg=value, ...)")
    if node.args:
        raise CallSyntaxError(f"{_name(node.func)}: pass arguments by keyword (name=value)")
    args = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise CallSyntaxError(f"{_name(node.func)}: **kwargs is not allowed")
        args[kw.arg] = _literal(kw.value)
    return ToolCall(_name(node.func), args)


def _call_sequence(body: str) -> list[ast.expr] | None:
    """The calls of ``a(x=1); b(y=2);`` (statements separated by ``;`` or lines, each one call):
    the form rizz's trajectory memory writes (``compact_trajectory``) and a model shown it
    copies; None when ``body`` is anything else."""
    try:
        module = ast.parse(body, mode="exec")
    except SyntaxError:
        return None
    values = [st.value for st in module.body if isinstance(st, ast.Expr)]
    if not values or len(values) != len(module.body) or not all(isinstance(v, ast.Call) for v in values):
        return None
    return values


def parse_reply(text: str) -> tuple[ToolCall, ...]:
    """The tool calls in a model reply; ``()`` when the reply is a message to the user.

    Raises:
      CallSyntaxError: the reply is a call attempt that does not parse.
    """
    body = _strip(text)
    if not _CALL_START.match(body):
        return ()
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError as err:
        sequence = _call_sequence(body)
        if sequence is None:
            raise CallSyntaxError(f"cannot parse the call: {err.msg}") from None
        return tuple(_call(n) for n in sequence)
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    if not nodes:
        raise CallSyntaxError("an empty list of calls")
    return tuple(_call(n) for n in nodes)


def format_call(call: ToolCall) -> str:
    """``name(arg=repr(value), ...)``, the text protocol's form (parses back to ``call``)."""
    args = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    return f"{call.name}({args})"
