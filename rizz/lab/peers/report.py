"""The peers table of a bench report (docs/peers.md).

For every entry of a bench that has ``peer:NAME`` entries: mean reward with its bootstrap 95%
interval, Δ vs ``default`` paired by step (points, paired bootstrap 95%), model calls per
answered step, prompt tokens per answered step (mean over answered steps of the sum over that
step's calls) and the largest single call's prompt, wall time, and the peer's failures (steps
with at least one; all failures, an error the peer logs and raises counted once
(:func:`distinct_failures`); answered steps where the peer produced no answer at all). The
"by where" line counts every record, echoes included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rizz.lab.stats import bootstrap_ci, paired_delta

__all__ = ["distinct_failures", "peer_markdown", "peer_results"]

HEADERS = ("entry", "mean reward [95% CI]", "Δ vs default (pp) [95% CI]", "calls/answered step", "prompt tokens/step mean",
           "max call prompt tokens", "wall s", "peer failures (steps / total / no answer)")


def distinct_failures(failures: list[dict[str, str]]) -> list[dict[str, str]]:
    """One step's failures with echoes removed: two failures whose messages agree after their
    first ``": "`` are one (ACE's instructor client logs ``Instructor validation failed:
    <message>`` for the ``IncompleteOutputException: <message>`` it raises); the first is kept."""
    seen: set[str] = set()
    out = []
    for f in failures:
        msg = f["error"].partition(": ")[2] or f["error"]
        if msg not in seen:
            seen.add(msg)
            out.append(f)
    return out


def peer_results(runs: dict[str, list[dict[str, Any]]], seed: int = 0) -> dict[str, Any]:
    """``{entry: {...}}`` for every entry of ``runs`` (records by entry, one stream order)."""
    rew = {p: {r["id"]: float(r["verdict"]["reward"]) for r in recs if "verdict" in r} for p, recs in runs.items()}
    order = [r["id"] for r in next(iter(runs.values()))]
    out: dict[str, Any] = {}
    for p, recs in runs.items():
        answered = [r for r in recs if "verdict" in r]
        rewards = [float(r["verdict"]["reward"]) for r in answered]
        per_step = [sum(int(c["prompt_tokens"]) for c in r.get("calls", [])) for r in answered]
        calls = [c for r in recs for c in r.get("calls", [])]
        kinds = sorted({c["kind"] for c in calls})
        entry: dict[str, Any] = {
            "n_answered": len(answered),
            "mean_reward": round(float(np.mean(rewards)), 6) if rewards else 0.0,
            "ci95": bootstrap_ci(rewards, seed=seed),
            "calls_per_answered_step": round(len(calls) / len(answered), 4) if answered else 0.0,
            "calls_by_kind": {k: sum(1 for c in calls if c["kind"] == k) for k in kinds},
            "prompt_tokens_per_step_mean": round(float(np.mean(per_step)), 1) if per_step else 0.0,
            "max_call_prompt_tokens": max((int(c["prompt_tokens"]) for c in calls), default=0),
            "wall_s": round(sum(float(r.get("wall_s", 0.0)) for r in recs), 2),
        }
        if p.startswith("peer:"):
            fails = [f for r in recs for f in (r.get("peer") or {}).get("failures", [])]
            distinct = sum(len(distinct_failures((r.get("peer") or {}).get("failures", []))) for r in recs)
            entry["failures"] = {"steps": sum(1 for r in recs if (r.get("peer") or {}).get("failures")), "total": distinct,
                                 "no_answer": sum(1 for r in answered if r["answer"]["raw"] is None),
                                 "by_where": {w: sum(1 for f in fails if f["where"] == w) for w in sorted({f["where"] for f in fails})}}
        if "default" in rew and p != "default":
            ids = [i for i in order if i in rew[p] and i in rew["default"]]
            entry["delta_vs_default"] = paired_delta([rew[p][i] for i in ids], [rew["default"][i] for i in ids], seed=seed)
        out[p] = entry
    return out


def _ci(ci: list[float] | None, fmt: str) -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if ci else "[–]"


def peer_markdown(peers: dict[str, Any]) -> list[str]:
    """The report.md section: a table with :data:`HEADERS` and the failure kinds."""
    rows = []
    for p, e in peers.items():
        d = e.get("delta_vs_default")
        delta = "(baseline)" if p == "default" else (f"{d['delta_pp']:+.1f} {_ci(d['ci95_pp'], '+.1f')}" if d else "–")
        f = e.get("failures")
        rows.append([p, f"{e['mean_reward']:.3f} {_ci(e['ci95'], '.3f')}", delta, f"{e['calls_per_answered_step']:.2f}",
                     f"{e['prompt_tokens_per_step_mean']:.0f}", str(e["max_call_prompt_tokens"]), f"{e['wall_s']:.1f}",
                     f"{f['steps']} / {f['total']} / {f['no_answer']}" if f else "–"])
    lines = ["## Peers side by side", "", "| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    if "default" not in peers:
        lines += ["Δ vs default is `–`: `default` is not among this bench's entries (add it to `-P` to pair every entry with it).", ""]
    lines += ["*peer failures*: steps with at least one failure / failures (an error the peer both logs and raises counted once) / "
              "answered steps where the peer gave no answer at all; each peer's `log.jsonl` has them under `peer.failures`.", ""]
    kinds = {p: e["calls_by_kind"] for p, e in peers.items()}
    lines += ["Model calls by kind: " + "; ".join(f"{p} " + ", ".join(f"{k} {n}" for k, n in v.items()) for p, v in kinds.items()), ""]
    where = {p: e["failures"]["by_where"] for p, e in peers.items() if e.get("failures", {}).get("by_where")}
    if where:
        lines += ["Peer failures by where: " + "; ".join(f"{p} " + ", ".join(f"{k} {n}" for k, n in v.items()) for p, v in where.items()),
                  "(examples: each peer's `calls.jsonl` has every request and reply)", ""]
    return lines
