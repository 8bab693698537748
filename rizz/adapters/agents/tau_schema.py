"""Compact declarations of τ-bench tool schemas (the JSON-schema function shape of ``tools``)."""

from __future__ import annotations

from typing import Any

__all__ = ["ADDRESS", "COMMON_SCHEMAS", "fn", "obj", "arr"]


def obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON-schema object; every property required unless ``required`` says otherwise."""
    return {"type": "object", "properties": props, "required": list(props) if required is None else required}


def arr(items: dict[str, Any], description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": items}
    if description:
        out["description"] = description
    return out


def s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def n(description: str, kind: str = "number") -> dict[str, Any]:
    return {"type": kind, "description": description}


def fn(name: str, description: str, props: dict[str, Any] | None = None,
       required: list[str] | None = None) -> dict[str, Any]:
    """One function description: ``{"name", "description", "parameters"}``."""
    return {"name": name, "description": description, "parameters": obj(props or {}, required)}


ADDRESS = {"address1": s("First line of the address, e.g. '123 Main St'."),
           "address2": s("Second line, e.g. 'Apt 1' or ''."), "city": s("City."),
           "state": s("State, e.g. 'NY'."), "country": s("Country, e.g. 'USA'."), "zip": s("Zip code.")}

#: The schemas of :data:`rizz.adapters.agents.tau_db.COMMON_TOOLS`, last in both domains' lists.
COMMON_SCHEMAS = [
    fn("calculate", "Evaluate an arithmetic expression (+ - * / and parentheses).", {"expression": s("e.g. '2 * (3 + 4)'.")}),
    fn("think", "Think out loud; changes nothing.", {"thought": s("A thought.")}),
    fn("transfer_to_human_agents", "Hand the user to a human agent (only when the request is out of scope).",
       {"summary": s("A summary of the user's issue.")}),
]
