"""Check a value against a policy's JSON Schema without the ``jsonschema`` package.

:func:`rizz.core.policy_schema` writes its schema with a few keywords of JSON Schema draft
2020-12: ``type``, ``enum``, ``minimum``, ``maximum``, ``properties``,
``additionalProperties``, ``items`` and ``uniqueItems`` (``$schema``, ``title``,
``description`` and ``default`` are annotations). :func:`schema_errors` checks those with the
draft's meaning, as ``jsonschema.Draft202012Validator.iter_errors`` does, so that loading a
policy needs nothing beyond the base install (docs/development.md, "The layers");
``tests/shell/test_schema_check.py`` holds the two equal on generated policies. A keyword
outside that list raises ``ValueError``: the schema has grown and this module must too.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["SchemaError", "schema_errors"]

#: The draft's types: ``true`` is no number, ``1.0`` is an integer (draft 6 on).
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, numbers.Number) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}
_ANNOTATIONS = frozenset({"$schema", "title", "description", "default"})
_PLAIN_KEY = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")


class SchemaError(NamedTuple):
    """One failed keyword: where, which, in which (sub)schema, on which value."""

    path: tuple[Any, ...]  # keys and list indexes from the checked value down to ``instance``
    keyword: str  # "type", "enum", "minimum", "maximum", "additionalProperties" or "uniqueItems"
    schema: Mapping[str, Any]  # the (sub)schema that holds ``keyword``
    instance: Any  # the value that failed it

    @property
    def json_path(self) -> str:
        """``path`` as JSONPath: ``$.write.thresholds.rouge_l``, ``$.compiler.layout[2]``, ``$['a-b']``."""
        out = "$"
        for part in self.path:
            if isinstance(part, int):
                out += f"[{part}]"
            elif isinstance(part, str) and _PLAIN_KEY.match(part):
                out += f".{part}"
            else:
                out += "['" + str(part).replace("\\", "\\\\").replace("'", "\\'") + "']"
        return out


def schema_errors(value: Any, schema: Mapping[str, Any], path: tuple[Any, ...] = ()) -> Iterator[SchemaError]:
    """Every keyword of ``schema`` (and of its subschemas) that ``value`` fails, in schema order.

    Raises ``ValueError`` for a keyword this module does not check.
    """
    for keyword, arg in schema.items():
        if keyword == "type":
            if not any(_TYPES[t](value) for t in ([arg] if isinstance(arg, str) else arg)):
                yield SchemaError(path, keyword, schema, value)
        elif keyword == "enum":
            if not any(_equal(each, value) for each in arg):
                yield SchemaError(path, keyword, schema, value)
        elif keyword in ("minimum", "maximum"):
            if _TYPES["number"](value) and (value < arg if keyword == "minimum" else value > arg):
                yield SchemaError(path, keyword, schema, value)
        elif keyword == "properties":
            if isinstance(value, dict):
                for key, sub in arg.items():
                    if key in value:
                        yield from schema_errors(value[key], sub, path + (key,))
        elif keyword == "additionalProperties":
            if isinstance(value, dict):
                extra = [k for k in value if k not in schema.get("properties", {})]
                if isinstance(arg, Mapping):
                    for key in extra:
                        yield from schema_errors(value[key], arg, path + (key,))
                elif arg is False and extra:
                    yield SchemaError(path, keyword, schema, value)
        elif keyword == "items":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    yield from schema_errors(item, arg, path + (i,))
        elif keyword == "uniqueItems":
            if arg and isinstance(value, list) and not _unique(value):
                yield SchemaError(path, keyword, schema, value)
        elif keyword not in _ANNOTATIONS:
            raise ValueError(f"schema keyword {keyword!r} is not checked by rizz.formats.schema_check")


_TRUE, _FALSE = object(), object()


def _unbool(v: Any) -> Any:
    """``True``/``False`` as values of their own: in JSON they never equal ``1``/``0``."""
    return _TRUE if v is True else _FALSE if v is False else v


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans apart from numbers, lists and mappings compared element-wise."""
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, Sequence) and isinstance(b, Sequence):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return len(a) == len(b) and all(k in b and _equal(v, b[k]) for k, v in a.items())
    return bool(_unbool(a) == _unbool(b))


def _unique(items: list[Any]) -> bool:
    """No two items are equal (JSON equality)."""
    seen: list[Any] = []
    for item in map(_unbool, items):
        if any(_equal(s, item) for s in seen):
            return False
        seen.append(item)
    return True
