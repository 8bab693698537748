"""Label quality under a grid of routing settings, refolded from one logged run (issue #10 §4).

Usage::

    python benchmarks/label_sweep.py RUN_DIR [--base default] [--grid 'routing.snap_threshold=0.8,0.92']...

``RUN_DIR`` is a ``rizz run`` whose log holds a judge label for every answered step, i.e. a run
under ``policies/judge-always.yaml`` (``rizz run STREAM --policy judge-always --out RUN_DIR``).
No model is called: every grid point refolds the logged stream through the pure core
(:func:`rizz.core.rizz`: ``step_with_events``, the route and lifecycle rounds the runs use),
feeding each step the logged input embedding φ(x), the logged judge label and label embedding
ψ(a), and the logged verdict. Under ``routing.judge: when_uncertain`` a step keeps its label only
when :func:`rizz.core.needs_label` says the run would have asked the judge (the label the judge
gave in the logged run is the label it would give again: same prompt, same model, cached).

Only routing and lifecycle are refolded: memory writes, rules and block evidence are switched
off in every grid point (:func:`routing_only`; neither the router nor the lifecycle reads
memory contents), so the refold of the run's own policy reproduces its logged routes (checked
and printed). **Rewards are held fixed** at the logged ones — an approximation: with another
route the prompt, the answer and so the reward could change. Rewards reach routing only through
branch statistics (pruning, ``linucb``'s reward-history feature), so the figures of the fixed
router do not depend on them except through pruning.

The logged labels are those of the run's ``routing.fallback_application``: a point whose policy
reads judge replies another way (``labels-tuned``: ``first_line``) refolds them unchanged unless
``--labels`` gives its labels (``benchmarks/judge_probe.py x --from-run RUN_DIR --fallback
first_line --out L.json``: the logged replies read again, no model call); a note on stderr says so.

A ``--grid`` is ``field=v1,v2;field=v1,...`` (dotted policy fields, values read as YAML); each
``--grid`` is one family, the product of its fields, each point the base with those fields set
and validated like a policy file. Without ``--grid`` the families of :data:`GRID` run.

Printed per point (without ``--all``, only the base and the points whose figures differ from
it): purity and fragmentation of the branches *as routed* (the bench report's figures,
:func:`rizz.lab.labels.label_quality`) and *after merges* (each step's branch followed through
later ``BranchesMerged`` events to the branch that holds it at the end), branches spawned, judge
labels used, branches per task (the JSON also has each task's share in its largest branch);
points that improve one figure as routed without worsening the other are marked ``*``. The last
line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import yaml

from rizz.core import Policy, StepInput, Verdict, events as ev, needs_label, rizz
from rizz.lab.labels import label_quality

#: The default grid: one family per knob group of issue #10 §4 (judge prompt aside), each
#: varied from the base alone.
GRID: dict[str, dict[str, list[Any]]] = {
    "snap": {"routing.snap_threshold": [0.70, 0.75, 0.80, 0.85, 0.88, 0.92, 0.95],
             "routing.jaccard_threshold": [0.2, 0.3, 0.4, 0.5, 0.7]},
    "judge": {"routing.confident_similarity": [0.2, 0.3, 0.4, 0.5, 0.6], "routing.w_anchor": [1.0, 2.0, 3.0]},
    "score": {"routing.w_application": [0.5, 1.0, 1.5], "routing.score_offset": [0.8, 1.0, 1.2, 1.5]},
    "merge": {"lifecycle.merge_anchor_similarity": [0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
              "lifecycle.merge_label_jaccard": [0.0, 0.2, 0.34, 0.5], "lifecycle.merge_every": [10, 25]},
    "sketch": {"sketch.enabled": [True], "sketch.rank": [2, 4], "sketch.merge_overlap": [0.2, 0.3, 0.5, 0.7, 1.0],
               "sketch.w_energy": [0.0, 0.5]},
}


class Step(NamedTuple):
    """One logged answered (or context-only) element: the core's input, its verdict, its task."""

    inp: StepInput
    verdict: Verdict | None
    task: str


class Point(NamedTuple):
    name: str
    fields: dict[str, Any]
    policy: Policy


def load_steps(run_dir: str | Path) -> tuple[list[Step], list[str], dict[str, Any]]:
    """``(steps, logged branch per step, run.json)`` of a ``rizz run`` RUN_DIR (step records; a
    live session's answer is paired with its verdict and folded at the answer's place)."""
    from rizz.engine.codec import decode_step
    from rizz.formats.logrecord import parse
    from rizz.store.runlog import RunDir

    rd = RunDir(run_dir)
    meta = rd.meta()
    raw = list(rd.records())
    verdicts = {(r["id"], r["step"]): r.get("verdict") for r in raw if r.get("kind") == "verdict"}
    steps, logged = [], []
    for n, r in enumerate(raw, 1):
        kind = r.get("kind", "step")
        if kind not in ("step", "answer"):
            continue
        if kind == "answer":
            if (r["id"], r["step"]) not in verdicts:
                continue  # expired or still pending: never folded with a verdict
            r = {**r, "kind": "step", "verdict": verdicts[(r["id"], r["step"])]}
        try:
            inp, verdict = decode_step(parse(r), rd.embeddings)
        except Exception as e:
            raise ValueError(f"{rd.log_path}:{n}: cannot read the step record ({e})") from None
        steps.append(Step(inp, verdict, r.get("task") or "-"))
        logged.append((r.get("route") or {}).get("branch", "?"))
    return steps, logged, meta


def relabel(steps: Sequence[Step], labels: dict[str, Any], embedder: Any) -> tuple[list[Step], int]:
    """Steps whose judge label is replaced by ``labels[item_id]`` (``{"function", "application"}``,
    e.g. ``benchmarks/judge_probe.py --out``), ψ(a) embedded as the run does (application words
    joined by spaces). Returns the steps and how many were relabelled."""
    from rizz.core import normalise_label

    todo = [(i, normalise_label(labels[s.inp.item_id]["function"], labels[s.inp.item_id]["application"]))
            for i, s in enumerate(steps) if s.inp.item_id in labels and not s.inp.context_only]
    vecs = embedder.embed([lab.application.replace("-", " ") for _, lab in todo]) if todo else []
    out = list(steps)
    for (i, lab), v in zip(todo, vecs):
        out[i] = out[i]._replace(inp=attrs.evolve(out[i].inp, label=lab, label_embedding=v.astype("float32").tobytes()))
    return out, len(todo)


def routing_only(policy: Policy) -> Policy:
    """``policy`` with memory writes, rules and block evidence off (routing and lifecycle unchanged)."""
    return attrs.evolve(policy, write=attrs.evolve(policy.write, enabled=False, working_memory_size=0),
                        rules=attrs.evolve(policy.rules, enabled=False),
                        evidence=attrs.evolve(policy.evidence, enabled=False))


def _bare(inp: StepInput) -> StepInput:
    """The input without references into the logged run's memory (rule ids, episode keys, rules)."""
    return attrs.evolve(inp, prompt_rule_ids=(), prompt_episode_keys=(), candidate_rules=(), distilled=False, prompt_blocks=())


def refold(policy: Policy, steps: Sequence[Step]) -> dict[str, Any]:
    """Refold ``steps`` under ``routing_only(policy)``.

    Returns ``{"routes": [branch per step], "records": [label_quality records], "merged":
    {absorbed: kept}, "labels": {branch: {"label", "shape"}}, "judged": steps that used a judge
    label, "spawned": branches spawned}``. A step without a logged label routes without one.
    """
    core = rizz(routing_only(policy))
    state = core.init()
    routes: list[str] = []
    records: list[dict[str, Any]] = []
    merged: dict[str, str] = {}
    labels: dict[str, dict[str, Any]] = {}
    judged = spawned = 0
    for s in steps:
        inp = _bare(s.inp)
        if inp.label is not None and not inp.context_only and not needs_label(state, core.policy, inp.embedding, inp.shape):
            inp = attrs.evolve(inp, label=None, label_embedding=b"")
        judged += inp.label is not None and not inp.context_only
        state, events = core.step_with_events(state, inp, s.verdict)
        for e in events:
            if isinstance(e, ev.BranchSpawned):
                spawned += 1
                labels[e.branch_id] = {"label": f"{e.label.function}/{e.label.application}", "shape": e.shape}
            elif isinstance(e, ev.BranchesMerged):
                merged[e.absorbed] = e.kept
            elif isinstance(e, ev.StepRecorded):
                routes.append(e.record.branch_id)
        rec: dict[str, Any] = {"route": {"branch": routes[-1]}, "task": s.task}
        if not inp.context_only and s.verdict is not None:
            rec["verdict"] = {"reward": s.verdict.reward}
        records.append(rec)
    return {"routes": routes, "records": records, "merged": merged, "labels": labels, "judged": judged, "spawned": spawned}


def _holder(b: str, merged: dict[str, str]) -> str:
    while b in merged:
        b = merged[b]
    return b


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """Label quality as routed and after merges (:func:`rizz.lab.labels.label_quality`)."""
    lq = label_quality(result["records"], result["labels"])
    m = result["merged"]
    after = [{**r, "route": {"branch": _holder(r["route"]["branch"], m)}} for r in result["records"]]
    lqm = label_quality(after, result["labels"])
    return {"purity": lq["purity"], "fragmentation": lq["fragmentation"],
            "per_task": {t: v["branches"] for t, v in lq["per_task"].items()},
            "per_task_share": {t: v["top_share"] for t, v in lq["per_task"].items()},
            "purity_merged": lqm["purity"], "fragmentation_merged": lqm["fragmentation"],
            "per_task_merged": {t: v["branches"] for t, v in lqm["per_task"].items()},
            "spawned": result["spawned"], "merges": len(m), "judged": result["judged"], "branches": lq["branches"]}


def parse_grid(text: str) -> dict[str, list[Any]]:
    """``'a.b=1,2;c.d=x'`` → ``{"a.b": [1, 2], "c.d": ["x"]}`` (values read as YAML)."""
    out: dict[str, list[Any]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, values = part.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ValueError(f"--grid {text!r}: expected field=v1,v2 (got {part!r})")
        out[key.strip()] = [yaml.safe_load(v) for v in values.split(",")]
    return out


def points(base: str, families: dict[str, dict[str, list[Any]]]) -> list[Point]:
    """The base, then every point of every family (validated; duplicates of a point dropped)."""
    from rizz.formats.policy_file import policy_data
    from rizz.lab.sweep import SweepSpec, expand

    base_pol = _load(base)
    out = [Point("base", {}, base_pol)]

    def key(p: Policy) -> str:
        return json.dumps(policy_data(attrs.evolve(p, name=base_pol.name)), sort_keys=True, default=str)

    seen = {key(base_pol)}
    for fam, grid in families.items():
        spec = SweepSpec(f"label_sweep --grid {fam}", base, tuple((k, tuple(v)) for k, v in grid.items()), ())
        for _, pol, fields in expand(spec):
            k = key(pol)
            if k in seen:
                continue
            seen.add(k)
            out.append(Point(pol.name, fields, pol))
    return out


def _load(ref: str) -> Policy:
    from rizz.formats.policy_file import load_policy

    return load_policy(ref)


def _v(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _better(f: dict[str, Any], b: dict[str, Any]) -> bool:
    return (f["purity"] >= b["purity"] and f["fragmentation"] <= b["fragmentation"]
            and (f["purity"] > b["purity"] or f["fragmentation"] < b["fragmentation"]))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a rizz run under judge-always (every step has a judge label)")
    ap.add_argument("--base", default="default", help="policy file or shipped name the grid varies (default: default)")
    ap.add_argument("--grid", action="append", default=[], help="one family: 'field=v1,v2;field=v1' (repeatable)")
    ap.add_argument("--all", action="store_true", help="print every point (default: the base and the points whose figures differ)")
    ap.add_argument("--labels", default=None, help="JSON {item id: {function, application}} replacing the logged judge labels "
                    "(benchmarks/judge_probe.py --out); embeds the applications with the run's embedder")
    args = ap.parse_args(argv)
    from rizz.formats.policy_file import PolicyError, parse_policy
    from rizz.lab.sweep import SweepError

    steps, logged, meta = load_steps(args.run_dir)
    unlabelled = sum(1 for s in steps if s.inp.label is None and not s.inp.context_only)
    own = parse_policy(meta["policy_data"], f"{args.run_dir}/run.json")
    check = refold(own, steps)["routes"]
    reproduced = sum(a == b for a, b in zip(check, logged))
    print(f"{args.run_dir}: {len(steps)} steps, {unlabelled} without a judge label; "
          f"refold under the run's own policy ({own.name}) reproduces {reproduced}/{len(steps)} logged routes")
    if args.labels:
        from rizz.adapters.embedder import Embedder

        emb = Embedder()
        if emb.name != meta.get("embedder"):
            print(f"label_sweep: the run used the embedder {meta.get('embedder')!r}, this one is {emb.name!r}", file=sys.stderr)
            return 2
        steps, n = relabel(steps, json.loads(Path(args.labels).read_text(encoding="utf-8")), emb)
        print(f"{args.labels}: relabelled {n} of {len(steps)} steps")
    try:
        families = {f"grid{i}": parse_grid(g) for i, g in enumerate(args.grid)} if args.grid else GRID
        pts = points(args.base, families)
    except (ValueError, SweepError, PolicyError) as e:
        print(f"label_sweep: {e}", file=sys.stderr)
        return 2
    other = sorted({p.policy.routing.fallback_application for p in pts} - {own.routing.fallback_application})
    if other and not args.labels:
        print(f"label_sweep: note: the logged labels were read under routing.fallback_application="
              f"{own.routing.fallback_application}; points under {', '.join(other)} refold them as logged. Their own labels: "
              f"benchmarks/judge_probe.py x --from-run {args.run_dir} --fallback {other[0]} --out L.json, then --labels L.json",
              file=sys.stderr)
    rows = []
    for p in pts:
        rows.append({"name": p.name, "fields": p.fields, **figures(refold(p.policy, steps))})
    base = rows[0]
    tasks = sorted(base["per_task"])
    print(f"{'':1} {'setting (last part of each field)':72} {'purity':>6} {'frag':>5} {'pur_m':>6} {'frag_m':>6} "
          f"{'spawn':>5} {'judge':>5}  branches per task ({', '.join(tasks)})")
    shown = ("purity", "fragmentation", "purity_merged", "fragmentation_merged", "spawned", "judged", "per_task")
    same = [r for r in rows[1:] if all(r[k] == base[k] for k in shown)]
    for r in rows:
        if not args.all and any(r is x for x in same):
            continue
        mark = "*" if r is not base and _better(r, base) else " "
        per = " ".join(str(r["per_task"].get(t, 0)) for t in tasks)
        short = ",".join(f"{k.rsplit('.', 1)[-1]}={_v(v)}" for k, v in r["fields"].items()) or r["name"]
        print(f"{mark} {short[:72]:72} {r['purity']:6.3f} {r['fragmentation']:5.2f} {r['purity_merged']:6.3f} "
              f"{r['fragmentation_merged']:6.2f} {r['spawned']:5d} {r['judged']:5d}  {per}")
    best = [r["name"] for r in rows[1:] if _better(r, base)]
    if same and not args.all:
        print(f"  ({len(same)} of {len(rows) - 1} settings give the base's figures; --all prints them)")
    print(f"{len(best)} of {len(rows) - 1} settings improve purity or fragmentation (as routed) without worsening the other")
    print(json.dumps({"run": str(args.run_dir), "base": args.base, "labels": args.labels, "steps": len(steps), "unlabelled": unlabelled,
                      "own_policy_routes_reproduced": reproduced, "points": [{k: v for k, v in r.items() if k != "branches"} | {"branches": [
                          {k: b[k] for k in ("id", "label", "traffic", "majority_task", "purity")} for b in r["branches"]]} for r in rows],
                      "improving": best}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
