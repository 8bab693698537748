"""What ``rizz view`` knows of a run's memory and branches, filled in while the log is refolded.

:class:`Ledger` turns the core's events into two JSON-ready tables for the page:

- ``items``: every memory item a step wrote (episode, rule, anti-pattern, scoped context,
  quarantined interaction) or a prompt showed (a working-memory turn), with the step it came
  from, the branch that holds it now, when it was retired and the steps whose prompts used it;
- ``branches``: every branch with its label, spawn, snaps, the step it was merged, pruned or
  deactivated at, and the items it holds.

Steps are global (the log's answer order); a tenant's events name its own branch ids, which
become view keys (``"<tenant>/<id>"``, :func:`rizz.core.tenants.branch_key`).
"""

from __future__ import annotations

from typing import Any

from rizz.core import events as ev
from rizz.core.tenants import branch_key
from rizz.lab.diff import describe_event

__all__ = ["BLOCK_KIND", "Ledger"]

#: The prompt block that shows each kind of memory item (rizz.core.compiler.MEMORY_BLOCKS).
BLOCK_KIND = {"examples": "episode", "rules": "rule", "mistakes": "anti_pattern", "scoped_context": "context",
              "working_memory": "turn"}
#: MemoryRetired.store -> item kind.
_STORE_KIND = {"episodes": "episode", "anti_patterns": "anti_pattern", "context": "context", "rules": "rule",
               "working_memory": "turn"}


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


class Ledger:
    """Items and branches of one run (see the module docstring); :meth:`apply` takes each record's events."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.branches: dict[str, dict[str, Any]] = {}
        self._index: dict[tuple[str | None, str, str], int] = {}

    # -- items -------------------------------------------------------------------------
    def find(self, tenant: str | None, kind: str, key: str) -> int | None:
        """The index of an item in :attr:`items`, or None."""
        return self._index.get((tenant, kind, key))

    def add(self, tenant: str | None, kind: str, key: str, branch: str | None, at: int | None, **fields: Any) -> int:
        """Add an item (or return the one with the same tenant, kind and key); returns its index."""
        i = self.find(tenant, kind, key)
        if i is not None:
            return i
        i = len(self.items)
        self._index[(tenant, kind, key)] = i
        self.items.append(dict(kind=kind, key=key, branch=branch, written=at, uses=[], retired=None, **fields))
        if branch is not None:
            self.branch(branch)["items"].append(i)
        return i

    def use(self, i: int, step: int) -> None:
        """Step ``step``'s prompt showed item ``i``."""
        uses = self.items[i]["uses"]
        if not uses or uses[-1] != step:
            uses.append(step)

    # -- branches ----------------------------------------------------------------------
    def branch(self, key: str) -> dict[str, Any]:
        """The branch record of view key ``key`` (created empty for a branch not seen spawning)."""
        b = self.branches.get(key)
        if b is None:
            b = self.branches[key] = dict(id=key, label=None, shape=None, spawned=None, snaps=[], end=None, items=[])
        return b

    def apply(self, events: tuple[object, ...], tenant: str | None, at: int) -> list[list[Any]]:
        """Fold one record's events (of ``tenant``'s sub-state) at global step ``at``.

        Returns what the step changed, for the page: ``[text, item index | None, branch key | None]``
        per event worth a line (``rizz diff``'s wording, :func:`rizz.lab.diff.describe_event`).
        """
        out = []
        for e in events:
            item, bkey = self._event(e, tenant, at)
            text = None if isinstance(e, ev.Routed) else describe_event(e)  # the route has its own part of the page
            if text is not None:
                out.append([text, item, bkey])
        return out

    def _event(self, e: object, tenant: str | None, at: int) -> tuple[int | None, str | None]:  # noqa: C901 - one case per event
        def key(b: str) -> str:
            return branch_key(tenant, b)

        match e:
            case ev.BranchSpawned(branch_id=b, label=lab, shape=shape):
                rec = self.branch(key(b))
                rec.update(label=str(lab), shape=shape, spawned=at)
                return None, key(b)
            case ev.EpisodeWritten(branch_id=b, episode=x):
                return self.add(tenant, "episode", x.key, key(b), at, input=x.input, answer=x.answer, reward=_r(x.reward), scope=x.scope), key(b)
            case ev.AntiPatternWritten(branch_id=b, anti_pattern=a):
                return self.add(tenant, "anti_pattern", a.key, key(b), at, input=a.input, answer=a.answer, reward=_r(a.reward), scope=a.scope), key(b)
            case ev.ContextStored(branch_id=b, item=c):
                return self.add(tenant, "context", c.key, key(b), at, text=c.text, scope=c.scope, time=c.time), key(b)
            case ev.RuleAdded(branch_id=b, rule=r):
                return self.add(tenant, "rule", r.id, key(b), at, text=r.text(), status="candidate"), key(b)
            case ev.Quarantined(branch_id=b, item=q):
                return self.add(tenant, "quarantine", f"{q.key}@{at}", key(b), at, input=q.input, answer=q.answer, reward=_r(q.reward),
                                reason=q.reason), key(b)
            case ev.RuleActivated(rule_id=r) | ev.RuleRetired(rule_id=r) | ev.RulePromoted(rule_id=r):
                i = self.find(tenant, "rule", r)
                if i is not None:
                    status = {ev.RuleActivated: "active", ev.RuleRetired: "retired"}.get(type(e))
                    if status:
                        self.items[i]["status"] = status
                    if status == "retired":
                        self.items[i]["retired"] = [at, "retired by its helpful/harmful counters"]
                return i, None
            case ev.MemoryRetired(branch_id=b, store=store, key=k, reason=why):
                i = self.find(tenant, _STORE_KIND.get(store, store), k)
                if i is not None:
                    self.items[i]["retired"] = [at, why]
                return i, key(b)
            case ev.BranchesMerged(kept=k, absorbed=a):
                kept, gone = self.branch(key(k)), self.branch(key(a))
                gone["end"] = dict(at=at, how="merged", into=key(k))
                for i in gone["items"]:
                    if self.items[i]["branch"] == key(a):
                        self.items[i]["branch"] = key(k)
                        kept["items"].append(i)
                return None, key(k)
            case ev.BranchPruned(branch_id=b, reason=why) | ev.BranchDeactivated(branch_id=b, reason=why):
                rec = self.branch(key(b))
                if rec["end"] is None:
                    rec["end"] = dict(at=at, how="pruned" if isinstance(e, ev.BranchPruned) else "deactivated", reason=why)
                if isinstance(e, ev.BranchPruned):  # a pruned branch's memory leaves the bank with it
                    for i in rec["items"]:
                        if self.items[i]["branch"] == key(b) and self.items[i]["retired"] is None:
                            self.items[i]["retired"] = [at, f"its branch {key(b)} was pruned"]
                return None, key(b)
        return None, None

    def snapped(self, branch: str, at: int, proposed: str, snapped: str, method: str, score: float) -> None:
        """A label proposed at ``at`` was snapped to ``branch``'s (``rizz diff``'s ``~ label ... snapped``)."""
        self.branch(branch)["snaps"].append([at, proposed, snapped, method, _r(score)])

    def finish(self, rows: list[dict[str, Any]], ledgers: dict[str | None, Any]) -> None:
        """Add the final state's figures: ``rows`` from :func:`rizz.lab.diff.branch_rows` (view keys),
        ``ledgers`` tenant -> that sub-state's rule ledger (each rule's final counters)."""
        for row in rows:
            b = self.branch(row["branch"])
            b.update(label=row["label"], shape=None if row["shape"] == "-" else row["shape"], active=row["active"],
                     traffic=row["traffic"], answered=row["answered"], mean_reward=row["mean_reward"])
        for (tenant, kind, key), i in self._index.items():
            c = ledgers.get(tenant, {}).get(key) if kind == "rule" else None
            if c is not None:
                self.items[i].update(helpful=c.helpful, harmful=c.harmful, status=c.status, tier=c.tier)
