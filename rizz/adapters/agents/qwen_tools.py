"""Tool calls in a GGUF's own chat-template format: Qwen2.5's ``<tool_call>`` JSON blocks.

Qwen2.5's chat template (``tokenizer.chat_template`` in the GGUF), given ``tools``, writes them
as one JSON a line inside a ``<tools>…</tools>`` system block and asks for each call as

    <tool_call>
    {"name": <function-name>, "arguments": <args-json-object>}
    </tool_call>

:func:`template_calls_tools` recognises such a template from its text (it mentions ``tools``
and ``<tool_call>``: Qwen2.5, Qwen3, Hermes-style templates; SmolLM2's does not).
llama-cpp-python renders it (``Jinja2ChatFormatter`` passes ``tools`` to the template) but
returns the reply as plain text; :func:`parse_tool_calls` reads the calls out of it.

What counts as a call, in order:

1. every ``<tool_call>…</tool_call>`` block (an unclosed last block runs to the end of the
   reply: a reply cut by ``max_tokens``); the text outside the blocks is the agent's message;
2. with no such block, every fenced code block (```` ```json … ``` ````) whose body starts
   like a call object (``{"name": …`` or ``[{"name": …``), the text outside them the message;
3. with neither, the whole reply when it starts like a call object.

Rules 2 and 3 are rizz's leniency, measured: Qwen2.5-Coder-0.5B-Instruct, given the tools
through this template, answered BFCL items with the call object bare or in a ``json`` fence,
never inside ``<tool_call>`` tags (4 of 4 replies probed).

A block may hold one object, several (one after another) or a JSON list of them. Each object
needs a string ``name``; ``arguments`` is a JSON object, or a string holding one (as OpenAI's
``function.arguments``), or absent (no arguments). Anything else makes the whole reply a
malformed call (``error``), as on the OpenAI path (:mod:`rizz.engine.native_agent`); a name
that is not one of the element's tools is kept as the call's name, as there, and the
environment answers it with its unknown-tool error.

Examples:
  >>> parse_tool_calls('Let me look.\\n<tool_call>\\n{"name": "get_order", "arguments": {"id": 1}}\\n</tool_call>')
  ParsedReply(message='Let me look.', calls=(('get_order', {'id': 1}),), error=None)
  >>> parse_tool_calls("Your order has shipped.")
  ParsedReply(message='Your order has shipped.', calls=(), error=None)
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

__all__ = ["ParsedReply", "parse_tool_calls", "template_calls_tools"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.S)
_CALL_START = re.compile(r'^\s*\[?\s*\{\s*"name"\s*:')


class ParsedReply(NamedTuple):
    """A reply read for calls: ``message`` (text outside the calls, stripped), ``calls``
    (``(name, arguments)`` in order, names as the model wrote them), ``error`` (None, or why
    the reply is a malformed call: then ``calls`` is empty)."""

    message: str
    calls: tuple[tuple[str, dict[str, Any]], ...]
    error: str | None


def template_calls_tools(template: str) -> bool:
    """True when a chat ``template`` writes ``tools`` and asks for ``<tool_call>`` blocks."""
    return "tools" in template and "<tool_call>" in template


def _values(body: str) -> list[Any]:
    """The JSON values in ``body``, one after another. Raises ValueError."""
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(body) and body[i] in " \t\r\n,":
            i += 1
        if i == len(body):
            break
        value, i = dec.raw_decode(body, i)
        out.extend(value if isinstance(value, list) else [value])
    if not out:
        raise ValueError("empty")
    return out


def _call(obj: Any) -> tuple[str, dict[str, Any]]:
    """``(name, arguments)`` of one call object. Raises ValueError with the model's words."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError(f"{json.dumps(obj, ensure_ascii=False)[:80]} is not a call object with a string \"name\"")
    name, args = obj["name"], obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args or "{}")
        except ValueError as err:
            raise ValueError(f"arguments of {name} are not a JSON object ({err})") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ValueError(f"arguments of {name} are not a JSON object (not an object)")
    return name, args


def _split(text: str) -> tuple[str, list[str]]:
    """``(message, call bodies)`` by the module docstring's rules 1-3."""
    blocks = _BLOCK.findall(text)
    if blocks:
        return _BLOCK.sub("", text), blocks
    fenced = [m for m in _FENCE.finditer(text) if _CALL_START.match(m.group(1))]
    if fenced:
        return _FENCE.sub(lambda m: "" if _CALL_START.match(m.group(1)) else m.group(0), text), [m.group(1) for m in fenced]
    return ("", [text]) if _CALL_START.match(text) else (text, [])


def parse_tool_calls(text: str) -> ParsedReply:
    """The calls and the message in a reply ``text`` (see the module docstring)."""
    message, bodies = _split(text)
    calls: list[tuple[str, dict[str, Any]]] = []
    for body in bodies:
        try:
            values = _values(body)
        except ValueError as err:
            return ParsedReply(message.strip(), (), f"malformed call: {body.strip()[:80]!r} is not JSON ({err})")
        try:
            calls += [_call(v) for v in values]
        except ValueError as err:
            return ParsedReply(message.strip(), (), f"malformed call: {err}")
    return ParsedReply(message.strip(), tuple(calls), None)
