"""The τ-bench environment: a domain's tools (:mod:`~rizz.adapters.agents.tau_retail`,
:mod:`~rizz.adapters.agents.tau_airline`) over one episode's copy-on-write database
(:mod:`~rizz.adapters.agents.tau_db`); its state digest is the database's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rizz.adapters.agents import tau_airline, tau_retail
from rizz.adapters.agents.tau_db import TABLES, Tables, load_base, resolve_db
from rizz.adapters.agents.tools import ToolError, to_text

__all__ = ["TOOLSETS", "TauEnvironment", "tau_environment"]


class TauEnvironment:
    """A τ-bench domain's tools over one episode's database (see the module docstring)."""

    name = "tau_bench"
    #: Tools whose successful call ends the episode, as in τ-bench (its retail and airline
    #: environments' ``terminate_tools``): a human agent takes over.
    terminate_tools = frozenset({"transfer_to_human_agents"})

    def __init__(self, domain: str, tables: Tables, tools: Mapping[str, Callable[..., Any]]) -> None:
        self.domain = domain
        self.db = tables
        self._tools = tools

    def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        fn = self._tools.get(tool)
        if fn is None:
            raise ToolError(f"unknown tool {tool!r}; the tools are: {', '.join(sorted(self._tools))}")
        try:
            return to_text(fn(self.db, **dict(arguments)))
        except TypeError as err:  # missing / unexpected argument
            raise ToolError(f"{tool}: {err}".replace(f"{fn.__name__}() ", "")) from None

    def state_digest(self) -> str:
        return self.db.digest()


def _toolsets() -> dict[str, dict[str, Callable[..., Any]]]:
    return {"retail": tau_retail.TOOLS, "airline": tau_airline.TOOLS}


TOOLSETS = _toolsets


def tau_environment(env: Mapping[str, Any], *, data_roots: tuple[Any, ...] = ()) -> TauEnvironment:
    """A fresh episode environment from ``{"name": "tau_bench", "domain": D, "db": DIR}``.

    Raises:
      ValueError: unknown domain; FileNotFoundError: no such database directory.
    """
    domain = env.get("domain")
    if domain not in TABLES:
        raise ValueError(f"environment.domain: expected one of {', '.join(TABLES)}, got {domain!r}")
    directory = resolve_db(env.get("db") or f"tau_bench/{domain}/db", data_roots)
    return TauEnvironment(domain, Tables(load_base(directory, domain)), _toolsets()[domain])
