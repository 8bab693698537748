"""What an agent acts on: an environment of tools.

An :class:`Environment` executes one tool call at a time and says what the model sees back
(a string). A tool that refuses (bad arguments, a rule of the domain) raises
:class:`~rizz.adapters.agents.tools.ToolError`; the agent loop turns it, an unknown tool and a malformed call into the
tool's *error result* for the model, and the run goes on (docs/agents.md).

Environments are built from a stream element's ``environment`` field by
:func:`make_environment`: ``{"name": "tau_bench", ...}`` (:mod:`rizz.adapters.agents.tau_env`) or
``{"name": "bfcl", ...}`` (:mod:`rizz.adapters.agents.bfcl_env`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from rizz.adapters.agents.bfcl_env import bfcl_environment
from rizz.adapters.agents.tau_env import tau_environment
from rizz.formats.streams import sorted_plain

__all__ = ["Environment", "make_environment", "plain", "terminate_tools"]


class Environment(Protocol):
    """A set of tools over a state that the tools may change.

    Attributes:
      name: the environment kind (``tau_bench``, ``bfcl``).
    """

    name: str

    def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """Run ``tool(**arguments)``; returns the text result. Raises
        :class:`~rizz.adapters.agents.tools.ToolError`."""
        ...

    def state_digest(self) -> str:
        """``sha256:<hex>`` of the environment's state now (equal states, equal digests)."""
        ...


def terminate_tools(env: Environment) -> frozenset[str]:
    """The tools whose successful call ends an episode in ``env`` (its ``terminate_tools``
    attribute; none when it has none): τ-bench's ``transfer_to_human_agents``."""
    return frozenset(getattr(env, "terminate_tools", ()))


def plain(value: Any) -> Any:
    """A pyrsistent (frozen stream) value as plain dicts and lists, every dict's keys sorted
    (:func:`rizz.formats.streams.sorted_plain`): the same tool list prints the same in every
    process, so prompts, cache keys and a grammar made from the JSON schema (llama.cpp's tool
    calling) do not change with the hash seed."""
    return sorted_plain(value)


def make_environment(environment: Mapping[str, Any] | None, *, data_roots: tuple[Any, ...] = ()) -> Environment:
    """Build the environment an episode element names.

    Args:
      environment: the element's ``environment`` field (``name`` + initial configuration).
      data_roots: extra directories to resolve relative data paths against (tried first).

    Raises:
      ValueError: no environment, or an unknown ``name``.
      FileNotFoundError: a τ-bench database directory that none of the data roots has.
    """
    if environment is None:
        raise ValueError("an episode element needs 'environment' to run tools")
    env = plain(environment)
    name = env.get("name")
    if name == "tau_bench":
        return tau_environment(env, data_roots=data_roots)
    if name == "bfcl":
        return bfcl_environment(env)
    raise ValueError(f"unknown environment name {name!r}; expected 'tau_bench' or 'bfcl'")
