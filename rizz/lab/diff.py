"""``rizz diff`` and ``rizz inspect``: what a step changed, and what the bank holds, for a person.

Both refold the run's log with the run's own policy (no model calls); ``diff`` keeps the
events of the requested steps and the compiler's drops from the log records.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rizz.core import events as ev
from rizz.core.evidence import block_shown
from rizz.core.tenants import TenantStates, branch_key
from rizz.engine.run import check_step, fold_until
from rizz.formats.logrecord import steps_in
from rizz.formats.policy_file import parse_policy
from rizz.formats.wording import fallback_label_wording, ordinal, plural
from rizz.lab.episode_view import episode_lines
from rizz.store.runlog import RunDir

__all__ = ["COLUMNS", "LABEL_FROM_WORDS", "LabelSources", "ROUTED_BY", "branch_rows", "branch_table", "budget_source", "describe_event", "diff_run",
           "inspect_run", "label_from_legend"]



def _as_sent(compiled: int, calls) -> str:
    """The answer call's prompt tokens as the backend counted them, where they differ from the
    compiled prompt's (the chat template's markup, or the model's own tokenizer, adds some)."""
    sent = next((c.get("prompt_tokens") for c in calls if c.get("kind") == "answer"), None)
    return f"; {sent} as sent to the model (its chat template included)" if sent is not None and sent != compiled else ""

def _clip(text: str, n: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def describe_event(e: object) -> str | None:
    """One line for a person, or None for bookkeeping events not worth a line."""
    match e:
        case ev.BranchSpawned(branch_id=b, label=lab, shape=shape):
            return f"+ branch {b} spawned: {lab} (shape {shape or '-'})"
        case ev.LabelSnapped(proposed=p, snapped=s, method=m, score=sc):
            return f"~ label {p} snapped to {s} by {m} ({sc:.3f})"
        case ev.Routed(branch_id=b, score=sc, reward=r):
            return f"→ routed to {b} (score {sc:.3f})" + (f", reward {r:.3f}" if r is not None else ", context only")
        case ev.EpisodeWritten(branch_id=b, episode=x):
            return f"+ episode written to {b}: {_clip(x.input)} ⇒ {_clip(x.answer, 30)}"
        case ev.EpisodeDeduplicated(branch_id=b, key=k):
            return f"= same content already in {b} ({k}); nothing written"
        case ev.AntiPatternWritten(branch_id=b, anti_pattern=a):
            return f"+ anti-pattern in {b}: {_clip(a.input)} ⇏ {_clip(a.answer, 30)} (reward {a.reward:.3f})"
        case ev.Quarantined(branch_id=b, item=q):
            return f"! quarantined in {b} ({q.reason}, reward {q.reward:.3f}): {_clip(q.input)}"
        case ev.InteractionDiscarded(branch_id=b, reason=r):
            return f"- not written to {b}: {r}"
        case ev.ContextStored(branch_id=b, item=c):
            return f"+ context stored in {b} (scope {c.scope}): {_clip(c.text)}"
        case ev.RuleAdded(branch_id=b, rule=r):
            return f"+ candidate rule {r.id} in {b}: {_clip(r.text(), 80)}"
        case ev.RuleCountersMoved(rule_id=r, helpful=h, harmful=a):
            return f"~ rule {r}: helpful +{h}, harmful +{a}"
        case ev.RuleActivated(rule_id=r):
            return f"* rule {r} activated"
        case ev.RuleRetired(rule_id=r):
            return f"- rule {r} retired"
        case ev.RulePromoted(rule_id=r, tier=t, function=f):
            return f"* rule {r} promoted to the {t} tier ({f})"
        case ev.BranchesMerged(kept=k, absorbed=a):
            return f"~ branch {a} merged into {k}"
        case ev.BranchDeactivated(branch_id=b, reason=r):
            return f"- branch {b} deactivated: {r}"
        case ev.BranchPruned(branch_id=b, reason=r):
            return f"- branch {b} pruned: {r}"
        case ev.MemoryRetired(branch_id=b, store=store, key=k, reason=r):
            return f"~ {b}: {store} {k} retired ({r})"
    return None


def budget_source(budget: int, policy_budget: int, cap: int | None) -> str:
    """Which limit set a prompt's token ``budget`` (:func:`rizz.engine.answering.budget`: the
    smallest of the policy's ``compiler.token_budget``, the ``--budget`` cap and the model's
    window less the reply's tokens), in words for ``rizz diff``.

    Example:
        >>> budget_source(2048, 8192, 2048), budget_source(8192, 8192, None), budget_source(8120, 16384, None)
        ('--budget', "the policy's compiler.token_budget", "the model's window less the reply's tokens")
    """
    if cap is not None and budget == cap:
        return "--budget"
    if budget == policy_budget:
        return "the policy's compiler.token_budget"
    return "the model's window less the reply's tokens"


def diff_run(run_dir: str | Path, at: int | None = None, to: int | None = None, *, snapshots: bool = True) -> str:
    """Text describing what steps ``at``..``to`` (inclusive, 0-based: step 0 is the first
    element) changed; each step's line also gives its element's place counted from 1, as
    progress counts steps done. ``at`` None: the log's last step; ``to`` None: ``at``.

    The log is folded under the run's own policy up to step ``to``, starting from the newest
    sound snapshot in ``snapshots/`` taken at or before the state just before step ``at`` (the
    first record of steps ``at``..``to``), so every record of those steps is folded and
    reported; without one (none kept that early, or each damaged), or with
    ``snapshots=False``, from the first record (:func:`rizz.engine.run.fold_until` with
    ``each_from=at``). The text is the same either way. Reads only, and the log once: a damaged
    snapshot is passed over, not rebuilt.

    Raises ValueError when ``at`` or ``to`` is negative or past the end of the log, when
    ``to < at`` (``at`` None: a ``to`` before the last step, whose message says that ``at``
    defaults to it and how to give both), or when the log is empty; FileNotFoundError when ``run_dir`` is not a RUN_DIR.
    """
    rd = RunDir(run_dir)
    meta = rd.meta()  # FileNotFoundError: no such directory, or not a RUN_DIR
    records = list(rd.records())  # read once: counted here, folded below
    n = steps_in(records)
    at_given = at is not None
    if at is None:
        if n == 0:
            raise ValueError(f"the log of {run_dir} has no steps yet")
        at = n - 1
    to = at if to is None else to
    if at < 0:
        check_step(run_dir, at, n)
    if to < 0:
        check_step(run_dir, to, n, "--to")
    if to < at:
        if not at_given:  # the user gave --to alone: say where the first step came from
            what = ("give --at 0 for step 0 alone" if to == 0
                    else f"give both, e.g. --at 0 --to {to} for steps 0..{to}, or --at {to} for step {to} alone")
            raise ValueError(f"--to {to} is before --at, which defaults to the log's last step ({at} here) when not given: {what}")
        raise ValueError(f"--to {to} is before --at {at}")
    if n == 0:
        raise ValueError(f"the log of {run_dir} has no steps yet")
    check_step(run_dir, at, n)
    check_step(run_dir, to, n, "--to")
    kept: list[tuple[dict[str, Any], tuple]] = []
    state = fold_until(run_dir, to, lambda rec, events: kept.append((rec, events)), each_from=at, snapshots=snapshots, records=records)
    policy = parse_policy(meta["policy_data"], f"{rd.meta_path}:policy_data")
    policy_budget = policy.compiler.token_budget
    fallback = fallback_label_wording(policy.routing.fallback_application, policy.routing.judge)  # what happened, the words it read
    lines = []
    for rec, events in kept:
        kind = rec.get("kind", "step")
        head = (f"step {rec['step']} [{rec['id']}]" + (f" {kind}" if kind != "step" else "") + f" ({ordinal(rec['step'] + 1)} element)"
                + (f" task {rec['task']}" if rec.get("task") else ""))
        if rec.get("answer"):
            head += f": answer {_clip(str(rec['answer']['extracted']), 40)!r}"
        lines.append(head)
        if rec.get("judge"):
            j = rec["judge"]
            if j.get("fallback") and not j.get("raw"):  # routing.judge: local (no model asked), or an empty reply
                lines.append(f"  label {j['function']}/{j['application']} {fallback}")
            else:
                lines.append(f"  judge proposed {j['function']}/{j['application']}" + (" (fallback label)" if j.get("fallback") else ""))
        for e in events:
            d = describe_event(e)
            if d:
                lines.append("  " + d)
        p = rec.get("prompt")
        if p:
            lines.append(f"  prompt: {p['tokens']} tokens "
                         f"(budget {p['budget']}: {budget_source(p['budget'], policy_budget, meta.get('budget_cap'))}), "
                         f"{plural(len(p['rule_ids']), 'rule')}, {plural(len(p['episode_keys']), 'example')}"
                         + _as_sent(p["tokens"], rec.get("calls") or ()))
            for block, item, tokens, reason in p["dropped"]:
                lines.append(f"  compiler dropped {block}/{item} ({tokens} tokens, {reason})")
        if rec.get("overflow"):
            lines.append("  input alone exceeds the prompt budget: not sent to the model (reward 0)")
        closed = {(r["id"], r["step"]) for r, _ in kept if r.get("kind") in ("verdict", "expire")}
        if kind == "answer" and (rec["id"], rec["step"]) not in closed:
            lines.append("  verdict not yet in the log at this point (a live session folds it when it arrives)")
        if kind == "verdict":
            lines.append(f"  verdict: reward {rec['verdict']['reward']:.3f} ({rec['verdict']['verifier']})")
        if kind == "expire":
            lines.append(f"  expired: {rec['reason']}")
        if rec.get("episode"):
            lines += episode_lines(rec["episode"], reward=(rec.get("verdict") or {}).get("reward"))
    lines.append(f"after step {to}: {plural(len(state.branches), 'branch', 'branches')} ({len(state.active_branches())} active)")
    return "\n".join(lines)


#: How an input reached its branch (``rizz inspect``'s ``routed_by``): with the judge's label as
#: it gave it, with a label made (in whole or part) by the judge's fallback from the input's
#: words (``routing.judge: local``, default's, makes every label so), a label snapped to a known
#: one, a caller-declared label, by anchor similarity alone (no label asked), or as context
#: (context-only input).
ROUTED_BY = ("judge", "fallback", "snapped", "declared", "anchor", "context")


class LabelSources:
    """Where each branch's label came from, and how its inputs reached it, read from the log
    records and the events their fold produced (:meth:`add`); :meth:`row` gives a branch's.

    A branch's label is made when it spawns, from its first input: ``judge`` (the judge's label
    as it gave it), ``fallback`` (the judge's reply lacked the function or the application: that
    part was made from the input's words, :func:`rizz.engine.judge.fallback_label`),
    ``snapped`` (the judge's label snapped to a known one: ``label_proposed`` is the judge's),
    ``declared`` (``metadata.label``), ``context`` (a context branch, named after the scope),
    or ``placeholder`` (no label was asked: ``unknown/unknown``, or ``any/global`` in one
    shared branch). A merge adds the absorbed branch's inputs to the kept one's.
    """

    def __init__(self) -> None:
        self.made: dict[str, dict[str, Any]] = {}
        self.routed: dict[str, Counter[str]] = {}
        self._answered: dict[tuple[str, int], str] = {}  # (id, step) -> branch (view key), for verdicts' merges

    def add(self, rec: dict[str, Any], events: tuple) -> None:
        kind, route = rec.get("kind", "step"), rec.get("route")
        branch = None
        if kind in ("step", "answer") and route:
            branch = route["branch"]
            self._answered[(rec["id"], rec["step"])] = branch
            snapped = next((e for e in events if isinstance(e, ev.LabelSnapped)), None)
            judge = rec.get("judge")
            how = ("context" if rec.get("context_only") else "declared" if rec.get("declared_label")
                   else "anchor" if not judge else "snapped" if snapped is not None else "fallback" if judge.get("fallback") else "judge")
            self.routed.setdefault(branch, Counter())[how] += 1
            if route.get("spawned"):
                made = {"anchor": "placeholder"}.get(how, how)
                self.made[branch] = {"label_from": made, "label_step": rec["step"],
                                     "label_proposed": str(snapped.proposed) if snapped is not None else None}
        elif kind == "verdict":
            branch = self._answered.get((rec["id"], rec["step"]))
        tenant = branch.rsplit("/", 1)[0] if branch and "/" in branch else None
        for e in events:
            if isinstance(e, ev.BranchesMerged):
                kept, gone = branch_key(tenant, e.kept), branch_key(tenant, e.absorbed)
                self.routed.setdefault(kept, Counter()).update(self.routed.pop(gone, Counter()))

    def row(self, branch: str) -> dict[str, Any]:
        """``label_from``, ``label_step``, ``label_proposed`` and ``routed_by`` (counts per
        :data:`ROUTED_BY`) of ``branch``; None values for a branch the log does not show spawning."""
        made = self.made.get(branch, {"label_from": None, "label_step": None, "label_proposed": None})
        counts = self.routed.get(branch, Counter())
        return {**made, "routed_by": {k: counts[k] for k in ROUTED_BY}}


def inspect_run(run_dir: str | Path, at: int | None = None) -> list[dict[str, Any]]:
    """One row per branch of the run's final state, or with ``at`` of its state after step
    ``at`` (0-based, as ``rizz diff --at`` counts: :func:`rizz.engine.run.state_at`'s): id,
    label, active, sizes (live rules and, apart, retired ones: :func:`branch_rows`), traffic,
    reward (and, under ``evidence.enabled``, the blocks its evidence withholds then), and where
    its label came from and how its inputs reached it up to then (:class:`LabelSources`).

    Raises ValueError (one line naming ``run_dir`` and the steps its log has) when ``at`` is
    negative or past the log's last step; FileNotFoundError when ``run_dir`` is not a RUN_DIR."""
    rd = RunDir(run_dir)
    meta = rd.meta()  # FileNotFoundError: no such directory, or not a RUN_DIR
    records = list(rd.records())  # read once: counted here, folded below
    if at is not None:
        check_step(run_dir, at, steps_in(records))
    sources = LabelSources()
    state = fold_until(run_dir, at, each=sources.add, records=records)
    policy = parse_policy(meta["policy_data"], f"{rd.meta_path}:policy_data")
    return [{**row, **sources.row(row["branch"])} for row in branch_rows(state, policy)]


#: What each ``label_from`` word means, in the order ``rizz inspect``'s legend gives them
#: (``fallback``'s words there are the run's policy's: :func:`~rizz.formats.wording.fallback_label_wording`).
LABEL_FROM_WORDS = {
    "judge": "the judge model's label as it gave it",
    "fallback": "made from the input with no model call",
    "snapped": "the judge's label snapped to a known one",
    "declared": "the input's metadata.label",
    "context": "a context branch, named after its scope",
    "placeholder": "no label asked (unknown/unknown, or any/global in one shared branch)",
}


def label_from_legend(run_dir: str | Path, rows: list[dict[str, Any]]) -> str | None:
    """``rizz inspect``'s line saying what the words of its "label from @ step" column mean
    (``fallback @0``: a fallback label, made at step 0), those ``rows`` show only, e.g. ``label
    from @ step: fallback = made from the input's task line (its instruction, else its first
    line) with no model call (routing.judge: local)``: the fallback's words are the run's
    policy's (``run.json``). None when no row says where its label came from."""
    seen = [w for w in LABEL_FROM_WORDS if any(r.get("label_from") == w for r in rows)]
    if not seen:
        return None
    routing = (RunDir(run_dir).meta().get("policy_data") or {}).get("routing") or {}
    words = {**LABEL_FROM_WORDS, "fallback": fallback_label_wording(routing.get("fallback_application"), routing.get("judge"))}
    return "label from @ step: " + "; ".join(f"{w} = {words[w]}" for w in seen)


def branch_rows(state: Any, policy: Any = None) -> list[dict[str, Any]]:
    """One row per branch of ``state`` (``rizz inspect``, ``rizz serve``'s ``/branches``):
    label, shape, sizes, traffic, answered steps and their mean reward (None before the first
    answered step); with an evidence-enabled ``policy`` also the blocks its evidence withholds.
    ``rules`` counts the live rules (as ``rizz view``'s branch table does); ``retired_rules``
    those retired by their helpful/harmful counters, which stay in the branch but no prompt shows."""
    rows = []
    for bid in state.branch_ids():
        b = state.branches[bid]
        ledger = _rule_ledger(state, bid)
        retired = sum(1 for r in b.rules if r.id in ledger and ledger[r.id].status == "retired")
        row = {
            "branch": bid, "label": str(b.label), "shape": b.shape or "-", "active": b.active,
            "episodes": len(b.episodes), "rules": len(b.rules) - retired, "retired_rules": retired, "anti_patterns": len(b.anti_patterns),
            "context": len(b.context), "quarantined": len(b.quarantine), "traffic": b.stats.traffic,
            "answered": b.stats.answered,
            "mean_reward": round(b.stats.mean_reward, 4) if b.stats.answered else None,
        }
        if policy is not None and policy.evidence.enabled:  # block evidence: the blocks this branch's evidence withholds now
            row["withheld"] = ",".join(k for k in ("examples", "rules", "mistakes", "scoped_context", "working_memory")
                                       if not block_shown(b, k, policy, explore=False)) or "-"
        rows.append(row)
    return rows


def _rule_ledger(state: Any, bid: str) -> Any:
    """The rule ledger that holds the counters of branch ``bid``'s rules: a tenanted run's
    (:class:`~rizz.core.tenants.TenantStates`, ``bid`` = ``<tenant>/<branch id>``) is its tenant's."""
    if not isinstance(state, TenantStates):
        return state.rule_ledger
    tenant, slash, _ = bid.rpartition("/")
    return state.tenants[tenant].rule_ledger if slash else state.untenanted.rule_ledger


def _routed(r: dict[str, Any]) -> str:
    counts = r.get("routed_by") or {}
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n) or "–"


def _label_from(r: dict[str, Any]) -> str:
    return "–" if r.get("label_from") is None else f"{r['label_from']} @{r['label_step']}"


#: ``rizz inspect``'s columns in display order: (row key, header, priority: the order in which
#: they are dropped to fit the terminal, highest first; those of priority ≤ :data:`KEEP` never).
#: The memory sizes (:data:`MEMORY`) are never dropped: where they do not fit as columns of
#: their own they share one (:data:`MEMORY_HEADER`).
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("branch", "branch", 0), ("label", "label", 0), ("label_from", "label from\n@ step", 1), ("label_proposed", "judge's label\n(snapped)", 12),
    ("shape", "shape", 5),
    ("active", "active", 8), ("traffic", "traffic", 2), ("routed_by", "inputs routed by", 13), ("answered", "answered", 9),
    ("mean_reward", "mean\nreward", 3), ("episodes", "episodes", 4), ("rules", "rules", 7), ("retired_rules", "retired\nrules", 15),
    ("anti_patterns", "anti-\npatterns", 6),
    ("context", "context", 10), ("quarantined", "quaran-\ntined", 11), ("withheld", "withheld", 14),
)
#: The memory sizes' columns, in :data:`COLUMNS`' order.
MEMORY = ("episodes", "rules", "anti_patterns", "context", "quarantined")
#: The header of the one column the memory sizes share when their own columns do not fit: the
#: sizes in :data:`MEMORY`'s order, ``/`` between them; a line under the table names them.
MEMORY_HEADER = "memory\ne/r/a/c/q"
MEMORY_LEGEND = "memory e/r/a/c/q: episodes (verified examples), rules, anti-patterns, context, quarantined"
_TEXT = {"branch", "label", "label_from", "label_proposed", "shape", "routed_by", "withheld"}
_CELL = {"label_from": _label_from, "routed_by": _routed,
         "mean_reward": lambda r: None if r.get("mean_reward") is None else f"{r['mean_reward']:.3f}",  # 0.333, 0.000, 1.000: one width
         "memory": lambda r: "/".join(str(r.get(k, 0)) for k in MEMORY)}
#: Columns of this priority or less are always shown (then long labels fold to fit).
KEEP = 3
#: The label column's width: room is kept for labels this long before other columns are added
#: (LABEL_ROOM), and a label folds onto more lines rather than get less than LABEL_MIN.
LABEL_ROOM, LABEL_MIN = 40, 16


def branch_table(rows: list[dict[str, Any]], width: int, wide: bool = False) -> tuple[Any, list[str]]:
    """``(rich Table, dropped column keys)`` of :func:`inspect_run`'s rows for a terminal of
    ``width`` characters: columns are dropped, least needed first (:data:`COLUMNS`), until the
    rest fit with room for labels up to :data:`LABEL_ROOM` characters; a longer label folds onto
    more lines, never cut. Those of priority ≤ :data:`KEEP` go only when even a label folded to
    :data:`LABEL_MIN` leaves them no room (branch and label always stay). The memory sizes
    (:data:`MEMORY`) are never dropped: when their columns do not fit beside those of priority
    ≤ :data:`KEEP`, they share one, ``e/r/a/c/q`` (:data:`MEMORY_HEADER`; the table's caption
    names them). ``wide`` keeps every column."""
    from rich import box
    from rich.table import Table

    def cell(r: dict[str, Any], key: str) -> str:
        v = _CELL[key](r) if key in _CELL else r.get(key)
        return "–" if v is None else {True: "yes", False: "no"}.get(v, str(v)) if isinstance(v, bool) else str(v)

    present = [c for c in COLUMNS if any(c[0] in r for r in rows)]
    memory = [c for c in present if c[0] in MEMORY]
    shared = ("memory", MEMORY_HEADER, 0)
    # a column takes its widest line and 3 more (padding and the gap to the next); the table 1 less
    need = {k: max([len(line) for line in h.split("\n")] + [len(cell(r, k)) for r in rows]) + 3 for k, h, _ in [*present, shared]}
    label_need = need["label"]

    def fit(columns: list[tuple[str, str, int]], steps: tuple[tuple[int, int], ...]) -> list[tuple[str, str, int]]:
        """``columns`` less those dropped to fit ``width``, at each step ``(label width, lowest
        priority dropped)`` in turn (the memory sizes are not dropped)."""
        shown = list(columns)
        for label_width, keep in steps:
            need["label"] = min(label_need, label_width + 3)
            while not wide and total(shown) > width:
                droppable = [c for c in shown if c[2] > keep and c[0] not in MEMORY]
                if not droppable:
                    break
                shown.remove(max(droppable, key=lambda c: c[2]))
        return shown

    def total(columns: list[tuple[str, str, int]]) -> int:
        return sum(need[k] for k, _, _ in columns) - 1

    steps = ((LABEL_ROOM, KEEP), (LABEL_MIN, 0))
    shown = fit(present, steps[:1])  # the memory sizes in columns of their own, with room for labels and every column ≤ KEEP
    if not wide and total(shown) > width:
        if memory:  # else they share one, in the place of the first
            at = present.index(memory[0])
            shown = fit([c for c in present[:at] if c not in memory] + [shared] + [c for c in present[at:] if c not in memory], steps)
        else:
            shown = fit(present, steps)
    # the label column's width once the others are placed: a longer label breaks after a "/" or "-"
    label_w = max(LABEL_MIN, width - 1 - sum(need[k] for k, _, _ in shown if k != "label") - 3)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption=MEMORY_LEGEND if shared in shown else None, caption_justify="left")
    for key, header, _ in shown:
        table.add_column(header, justify="left" if key in _TEXT else "right", overflow="fold",
                         no_wrap=key not in ("label", "routed_by"), min_width=LABEL_MIN if key == "label" else None)
    for r in rows:
        table.add_row(*[fold_label(cell(r, key), label_w) if key == "label" and not wide else cell(r, key) for key, _, _ in shown])
    return table, [c[0] for c in present if c not in shown and not (shared in shown and c in memory)]


def fold_label(label: str, width: int) -> str:
    """``label`` on lines of at most ``width`` characters, broken after a ``/`` or ``-`` where it
    can be (a part longer than ``width`` is cut at ``width``), joined by newlines.

    Example:
        >>> print(fold_label("simplify-text/provide-simplified-version", 24))
        simplify-text/provide-
        simplified-version
    """
    import re

    lines: list[str] = []
    line = ""
    for part in re.findall(r"[^/-]*[/-]|[^/-]+$", label):
        while len(part) > width:  # a part with no break in it: cut
            if line:
                lines.append(line)
                line = ""
            lines.append(part[:width])
            part = part[width:]
        if len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line] if line else lines) or label
