"""``rizz diff`` and ``rizz inspect``: what a step changed, and what the bank holds, for a person.

Both refold the run's log with the run's own policy (no model calls); ``diff`` keeps the
events of the requested steps and the compiler's drops from the log records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rizz.core import AdaptiveState
from rizz.core import events as ev
from rizz.core.evidence import block_shown
from rizz.shell.agents.view import episode_lines
from rizz.shell.logfold import LogFold
from rizz.shell.logrecord import parse
from rizz.shell.policy_file import parse_policy
from rizz.shell.runlog import RunDir
from rizz.shell.wording import ordinal, plural

__all__ = ["branch_rows", "budget_source", "describe_event", "diff_run", "inspect_run"]


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


def _fold_until(rd: RunDir, stop: int, keep_from: int) -> tuple[AdaptiveState, list[tuple[dict[str, Any], tuple]]]:
    """Fold the log in order until the first step/answer record past step ``stop`` (log order:
    a live log's verdicts for steps ≤ ``stop`` that arrived after it are not included)."""
    meta = rd.meta()
    fold = LogFold(parse_policy(meta["policy_data"], f"{rd.meta_path}:policy_data"), rd.embeddings)
    kept = []
    for i, rec in enumerate(rd.records(), 1):
        if rec["step"] > stop and rec.get("kind", "step") in ("step", "answer"):
            break
        events = fold.apply(parse(rec, f"{rd.log_path}:{i}"))
        if keep_from <= rec["step"] <= stop:
            kept.append((rec, events))
    return fold.state, kept


def budget_source(budget: int, policy_budget: int, cap: int | None) -> str:
    """Which limit set a prompt's token ``budget`` (:func:`rizz.shell.answering.budget`: the
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


def diff_run(run_dir: str | Path, at: int, to: int | None = None) -> str:
    """Text describing what steps ``at``..``to`` (inclusive, 0-based: step 0 is the first
    element) changed; each step's line also gives its element's place counted from 1, as
    progress counts steps done.

    Raises ValueError when ``at`` or ``to`` is negative or past the end of the log, when
    ``to < at``, or when the log is empty.
    """
    rd = RunDir(run_dir)
    to = at if to is None else to
    if at < 0:
        raise ValueError(f"--at {at}: steps are numbered from 0")
    if to < at:
        raise ValueError(f"--to {to} is before --at {at}")
    n = sum(1 for r in rd.records() if r.get("kind", "step") in ("step", "answer"))
    if n == 0:
        raise ValueError(f"the log of {run_dir} has no steps yet")
    for flag, step in (("--at", at), ("--to", to)):
        if step >= n:
            raise ValueError(f"{flag} {step}: step {step} is not in the log of {run_dir} (it has {'step 0 only' if n == 1 else f'steps 0..{n - 1}'})")
    state, kept = _fold_until(rd, to, at)
    meta = rd.meta()
    policy_budget = int(meta["policy_data"]["compiler"]["token_budget"])
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
            lines.append(f"  judge proposed {j['function']}/{j['application']}" + (" (fallback label)" if j.get("fallback") else ""))
        for e in events:
            d = describe_event(e)
            if d:
                lines.append("  " + d)
        p = rec.get("prompt")
        if p:
            lines.append(f"  prompt: {p['tokens']} tokens (budget {p['budget']}: {budget_source(p['budget'], policy_budget, meta.get('budget_cap'))}), "
                         f"{plural(len(p['rule_ids']), 'rule')}, {plural(len(p['episode_keys']), 'example')}")
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
            lines += episode_lines(rec["episode"])
    lines.append(f"after step {to}: {plural(len(state.branches), 'branch', 'branches')} ({len(state.active_branches())} active)")
    return "\n".join(lines)


def inspect_run(run_dir: str | Path) -> list[dict[str, Any]]:
    """One row per branch of the run's final state: id, label, active, sizes, traffic, reward
    (and, under ``evidence.enabled``, the blocks its evidence withholds now)."""
    rd = RunDir(run_dir)
    state, _ = _fold_until(rd, 10**12, 10**12)
    policy = parse_policy(rd.meta()["policy_data"], f"{rd.meta_path}:policy_data")
    return branch_rows(state, policy)


def branch_rows(state: Any, policy: Any = None) -> list[dict[str, Any]]:
    """One row per branch of ``state`` (``rizz inspect``, ``rizz serve``'s ``/branches``):
    label, shape, sizes, traffic, answered steps and their mean reward (None before the first
    answered step); with an evidence-enabled ``policy`` also the blocks its evidence withholds."""
    rows = []
    for bid in state.branch_ids():
        b = state.branches[bid]
        row = {
            "branch": bid, "label": str(b.label), "shape": b.shape or "-", "active": b.active,
            "episodes": len(b.episodes), "rules": len(b.rules), "anti_patterns": len(b.anti_patterns),
            "context": len(b.context), "quarantined": len(b.quarantine), "traffic": b.stats.traffic,
            "answered": b.stats.answered,
            "mean_reward": round(b.stats.mean_reward, 4) if b.stats.answered else None,
        }
        if policy is not None and policy.evidence.enabled:  # issue #10: the blocks this branch's evidence withholds now
            row["withheld"] = ",".join(k for k in ("examples", "rules", "mistakes", "scoped_context", "working_memory")
                                       if not block_shown(b, k, policy)) or "-"
        rows.append(row)
    return rows
