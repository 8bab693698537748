"""τ-bench databases: loading, copy-on-write tables, the state digest (the environment over
them: :mod:`~rizz.adapters.agents.tau_env`).

The retail and airline databases (``../shared/data/tau_bench/<domain>/db``: JSON objects keyed
by id, copied verbatim from ``sierra-research/tau-bench``, MIT) are read once per process and
shared read-only; an episode writes into its own overlay (:class:`Tables`), so starting an
episode costs nothing and the base data is never changed.

:meth:`Tables.digest` (an episode's state digest) hashes only the records that differ from the base data
(and new records), so two databases with the same content have the same digest whatever the
order of the writes: this is τ-bench's "final database equals the database after the gold
actions" test (``tau_bench/envs/base.py``, ``calculate_reward``), done here on our own tools.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import operator
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rizz.adapters.agents.tools import ToolError

__all__ = ["COMMON_TOOLS", "TABLES", "Tables", "calculate", "load_base", "resolve_db"]

#: Domain -> table file names (``<table>.json`` in the db directory).
TABLES: dict[str, tuple[str, ...]] = {"retail": ("users", "orders", "products"),
                                      "airline": ("users", "flights", "reservations")}
_BASE: dict[str, dict[str, dict[str, Any]]] = {}


def resolve_db(db: str, data_roots: tuple[Any, ...] = ()) -> Path:
    """The τ-bench database directory ``db`` names.

    Tried in order: ``db`` itself if absolute; each of ``data_roots``; ``$RIZZ_DATA_ROOT``
    (else ``../shared/data``); the repository's ``data/`` (shipped slices).

    Raises:
      FileNotFoundError: naming every place tried.
    """
    path = Path(db)
    if path.is_absolute():
        candidates = [path]
    else:
        roots = [Path(r) for r in data_roots]
        roots.append(Path(os.environ.get("RIZZ_DATA_ROOT") or Path("..") / "shared" / "data"))
        roots.append(Path(__file__).resolve().parents[3] / "data")
        candidates = [r / path for r in roots]
    for cand in candidates:
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"τ-bench database {db!r} not found; tried {', '.join(map(str, candidates))}")


def load_base(directory: Path, domain: str) -> dict[str, dict[str, Any]]:
    """A domain's tables as read from ``directory`` (read once per process, shared read-only)."""
    key = f"{directory.resolve()}:{domain}"
    if key not in _BASE:
        tables = {}
        for table in TABLES[domain]:
            with open(directory / f"{table}.json", encoding="utf-8") as fh:
                tables[table] = json.load(fh)
        _BASE[key] = tables
    return _BASE[key]


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class Tables:
    """A database as copy-on-write tables over a shared, read-only base.

    ``get`` reads (the returned record must not be changed); ``mut`` returns the episode's own
    copy to change; ``insert`` adds a record; ``ids`` lists a table's keys in base order then new.
    """

    def __init__(self, base: Mapping[str, Mapping[str, Any]]) -> None:
        self._base = base
        self._own: dict[str, dict[str, Any]] = {t: {} for t in base}

    def get(self, table: str, key: str) -> Any:
        own = self._own[table]
        return own[key] if key in own else self._base[table].get(key)

    def need(self, table: str, key: str, what: str) -> Any:
        """``get``, refused when absent: :class:`ToolError` ``"{what} {key!r} not found"``."""
        record = self.get(table, key)
        if record is None:
            raise ToolError(f"{what} {key!r} not found")
        return record

    def mut(self, table: str, key: str) -> Any:
        own = self._own[table]
        if key not in own:
            if key not in self._base[table]:
                raise KeyError(key)
            own[key] = copy.deepcopy(self._base[table][key])
        return own[key]

    def insert(self, table: str, key: str, record: Any) -> None:
        self._own[table][key] = record

    def ids(self, table: str) -> list[str]:
        return list(self._base[table]) + [k for k in self._own[table] if k not in self._base[table]]

    def values(self, table: str) -> list[Any]:
        return [self.get(table, k) for k in self.ids(table)]

    def digest(self) -> str:
        """``sha256:<hex>`` over the records that differ from the base (content, not history)."""
        h = hashlib.sha256()
        for table in sorted(self._own):
            for key in sorted(self._own[table]):
                rec = _canon(self._own[table][key])
                base = self._base[table].get(key)
                if base is None or _canon(base) != rec:
                    h.update(f"{table}\0{key}\0{rec}\n".encode())
        return "sha256:" + h.hexdigest()


_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


def calculate(expression: str) -> str:
    """Evaluate ``+ - * /`` and parentheses over numbers (parsed with ``ast``, never ``eval``);
    the result rounded to 2 decimals, as text. Raises :class:`ToolError` on anything else."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ToolError("only numbers, + - * / and parentheses are allowed")

    try:
        tree = ast.parse(str(expression), mode="eval")
        return str(round(float(ev(tree)), 2))
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except SyntaxError:
        raise ToolError(f"cannot parse expression {expression!r}") from None


def _calculate(db: Tables, expression: str) -> str:
    del db
    return calculate(expression)


def _think(db: Tables, thought: str) -> str:
    del db, thought
    return ""


def _transfer_to_human_agents(db: Tables, summary: str) -> str:
    del db, summary
    return "Transfer successful"


#: The tools both domains end with, in this order (their schemas:
#: :data:`rizz.adapters.agents.tau_schema.COMMON_SCHEMAS`).
COMMON_TOOLS: dict[str, Callable[..., Any]] = {
    "calculate": _calculate, "think": _think, "transfer_to_human_agents": _transfer_to_human_agents}
