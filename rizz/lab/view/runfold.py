"""The refold behind ``rizz view``: one RUN_DIR folded as ``rizz replay`` folds it (no model call).

The log is folded record by record through :class:`rizz.engine.logfold.LogFold` with the run's
own policy. Before each answered element is folded, its route round is taken once (and handed
to the fold, so nothing is routed twice), and from the state it routed on the view rebuilds
what the element's prompt showed: the core's pure retrieval (:func:`rizz.core.retrieve`) and
prompt blocks, less the items the log says the compiler dropped, laid out by the compiler
(:func:`rizz.core.compile_prompt`, every item counted as 0 tokens, so nothing more is
dropped). The rebuilt text is checked against the logged prompt's sha256: ``exact`` says every
block's source is the one the run used. A tool-using episode's step shows the memory its agent
prompts showed (:func:`_episode_prompt`: the examples as the engine's
:func:`rizz.engine.agent_prompt.shown_examples` showed them) and its longest prompt as logged. A peer's folder (``rizz bench -P peer:NAME``) has no
state to refold; its steps keep their answers, verdicts and token counts only.

:func:`view_run` returns one JSON-ready dict per RUN_DIR (the page's ``runs[i]``)::

    name, path, kind ("run" | "live" | "peer"), policy, model, digest_ok (the refold's digest is
    summary.json's, as ``rizz replay`` compares them: where summary.json ends when it folds fewer
    log records than the log holds, :func:`rizz.engine.run.summary_covers`; None without one),
    summary_stale (None, or for such a summary ``"summary.json is from 3 steps; the log has 5"``:
    a resume that did not finish, or a live session, appended more; not a mismatch), summary (steps, answered, mean_reward, branches, state_digest),
    fallback_label (not for a peer: where a label the judge's fallback made with no model reply
    came from, by the run's routing.judge and the words it read under its
    routing.fallback_application, :func:`rizz.formats.wording.fallback_label_wording`),
    writes (not for a peer: whether the run's policy writes memory, write.enabled; frozen's does not),
    steps:    one per answered element, in answer order (see :func:`_answer`),
    items:    memory items (rizz.lab.view.ledger),
    branches: branches in creation order (rizz.lab.view.ledger)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from rizz.core import compile_prompt, digest, prompt_blocks, retrieve, sub_state, unwall
from rizz.core.compiler import MEMORY_BLOCKS
from rizz.core.routing import route_candidates
from rizz.core.tenants import TenantStates, branch_key, decision_tenant, locate
from rizz.engine.agent_prompt import shown_examples
from rizz.engine.codec import decode_step
from rizz.engine.logfold import LogFold, LogFoldError, views
from rizz.engine.run import Stale, read_summary, summary_covers, summary_extent, summary_outcome
from rizz.formats.logrecord import LogRecord, parse
from rizz.formats.policy_file import parse_policy
from rizz.formats.streams import StreamElement
from rizz.formats.wording import fallback_label_wording
from rizz.lab.diff import branch_rows
from rizz.lab.episode_view import episode_lines
from rizz.lab.view.ledger import BLOCK_KIND, Ledger
from rizz.store.runlog import RunDir

__all__ = ["MAX_CANDIDATES", "view_run"]

#: Route candidates kept per step (best first): enough to see the choice, bounded for long runs.
MAX_CANDIDATES = 8
#: A budget no rebuilt prompt reaches (tokens): the rebuild counts every item as 0 tokens.
_NO_BUDGET = 1 << 30


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def view_run(root: str | Path, name: str | None = None) -> dict[str, Any]:
    """The view data of the RUN_DIR ``root`` (see the module docstring).

    Raises FileNotFoundError for a folder without ``run.json``; LogRecordError / LogFoldError
    (naming ``log.jsonl:<line>``) for a bad log.
    """
    rd = RunDir(root)
    meta = rd.meta()
    records = list(rd.records())
    head = dict(name=name or Path(root).name, path=str(root), policy=meta.get("policy"), model=meta.get("model"))
    if "policy_data" not in meta:
        return dict(head, kind="peer", **_peer(records, meta, rd.root / "calls.jsonl"))
    policy = parse_policy(meta["policy_data"], f"{rd.meta_path}:policy_data")
    head["fallback_label"] = fallback_label_wording(policy.routing.fallback_application, policy.routing.judge)  # this run's words
    head["writes"] = policy.write.enabled  # frozen's policy writes no memory
    fold = LogFold(policy, rd.embeddings)
    led = Ledger()
    steps: list[dict[str, Any]] = []
    at_step: dict[int, dict[str, Any]] = {}
    turns: dict[tuple[str | None, int], int] = {}  # (tenant, its local step) -> global step
    live = False
    logged = read_summary(rd.summary_path) or {}
    covered = summary_covers(logged, records)  # summary.json of fewer records (a resume that did not finish)
    at_covered: list[str] = []
    for n, data in enumerate(records, 1):
        where = f"{rd.log_path}:{n}"
        rec = parse(data, where)
        live = live or rec.kind in ("answer", "verdict", "expire")
        try:
            if rec.kind in ("step", "answer"):
                entry, events, tenant = _answer(fold, rec, data, led, turns, rd)
                at_step[rec.step] = entry
                steps.append(entry)
                at = rec.step
            else:
                tenant = _tenant(fold, rec)
                events = fold.apply(rec)
                at = max(fold.answers - 1, 0)
        except LogFoldError as e:  # as rizz replay says it (rizz.engine.logfold.restore_fold)
            raise LogFoldError(f"{where}: {e}") from None
        if n == covered:
            at_covered.append(digest(fold.state))
        entry = at_step.get(rec.step)
        changes = led.apply(events, tenant, at)
        if entry is None:
            continue
        entry["changes"] += changes
        if rec.kind == "verdict" and rec.verdict is not None:
            entry["verdict"] = dict(reward=_r(rec.verdict.reward), verifier=rec.verdict.verifier, parsed=rec.verdict.parsed)
            entry["verdict_at"] = at
        elif rec.kind == "expire":
            entry["expired"] = rec.reason
    _finish(led, fold.state, steps)
    rewards = [s["verdict"]["reward"] for s in steps if s["verdict"]]
    summary = dict(steps=len(steps), answered=len(rewards), mean_reward=round(sum(rewards) / len(rewards), 6) if rewards else 0.0,
                   branches={"total": len(fold.state.branches), "active": len(fold.state.active_branches())},
                   state_digest=digest(fold.state))
    stale = None if covered is None else Stale(covered, at_covered[0] if at_covered else None)
    outcome = summary_outcome(True, logged, summary, stale)  # as rizz replay judges it
    summary_stale = None
    if stale is not None:
        was, now = summary_extent(logged, dict(summary, log_records=len(records)), stale)
        summary_stale = f"summary.json is from {was}; the log has {now}"
    return dict(head, kind="live" if live else "run", summary=summary,
                digest_ok=None if outcome == "unrecorded" else outcome in ("same", "stale"), summary_stale=summary_stale,
                steps=steps, items=led.items, branches=[led.branches[k] for k in _creation(led.branches)])


def _creation(branches: dict[str, Any]) -> list[str]:
    """View keys in creation order: by tenant (untenanted first), then by branch number."""
    def order(k: str) -> tuple[str, int, str]:
        tenant, _, bid = k.rpartition("/")
        return tenant, len(bid), bid
    return sorted(branches, key=order)


def _tenant(fold: LogFold, rec: LogRecord) -> str | None:
    """The tenant whose sub-state a verdict, expire or distill record folds (before it is folded)."""
    if rec.kind == "distill" and rec.branch is not None:
        return locate(fold.state, rec.branch)[0]
    w = fold.inflight.get(rec.id)
    return decision_tenant(w.decision, w.step_input) if w is not None else None


def _answer(fold: LogFold, rec: LogRecord, data: dict[str, Any], led: Ledger, turns: dict[tuple[str | None, int], int],
            rd: RunDir) -> tuple[dict[str, Any], tuple[object, ...], str | None]:
    """Fold a step or answer record; returns (its step entry, its events, its tenant).

    The entry: ``step``, ``id``, ``task``, the input (``input``, ``instruction``, ``evidence``,
    ``scope``, ``shape``, ``tenant``, ``time``, ``context_only``), the route (``branch`` view key,
    ``label``, ``score``, ``spawned``, ``judge``, ``snapped``, ``cands`` [[branch, cosine, score]]),
    ``prompt`` (:func:`_prompt`; an episode's: :func:`_episode_prompt`), ``overflow``, ``answer``, ``verdict``, ``expired``,
    ``changes`` [[text, item, branch]], ``episode`` (lines), ``calls`` (model calls).
    """
    policy = fold.core.policy
    inp, verdict = decode_step(rec, fold.store)
    before = fold.state
    routed = fold.core.route_round(before, inp)
    own, local, inner = unwall(routed.state, inp, routed.decision)
    tenant = decision_tenant(routed.decision, inp)
    bkey = routed.decision.branch_id
    turns[(tenant, local.step)] = rec.step
    declared = policy.routing.declared_label and inp.declared_label is not None
    label = None if declared or inp.label is None else inner.snapped.snapped if inner.snapped is not None else inp.label  # the input's, as scored
    cands = route_candidates(sub_state(before, tenant), policy, local, label)
    cands.sort(key=lambda c: -(c[2] if c[2] is not None else c[1]))
    x = rec.input
    assert x is not None  # decode_step refused a record without one
    entry: dict[str, Any] = dict(
        step=rec.step, id=rec.id, task=rec.task, kind=rec.kind, context_only=rec.context_only,
        input=x.text, instruction=x.instruction, evidence=x.evidence, scope=x.scope, shape=x.shape, tenant=x.tenant, time=x.time,
        branch=bkey, label=str(inner.label), score=_r(inner.score), spawned=inner.spawn is not None,
        judge=dict(function=rec.judge.function, application=rec.judge.application, fallback=rec.judge.fallback,
                   repaired=rec.judge.repaired, raw=bool(rec.judge.raw)) if rec.judge else None,
        declared=f"{rec.declared_label.function}/{rec.declared_label.application}" if rec.declared_label else None,
        snapped=None, cands=[[branch_key(tenant, b), _r(c), _r(s)] for b, c, s in cands[:MAX_CANDIDATES]],
        prompt=None, overflow=rec.overflow,
        answer=dict(raw=rec.answer.raw, extracted=rec.answer.extracted, parsed=rec.answer.parsed,
                    reasoning=rec.answer.reasoning) if rec.answer else None,
        verdict=dict(reward=_r(verdict.reward), verifier=verdict.verifier, parsed=verdict.parsed) if verdict else None,
        expired=None, changes=[], episode=None, calls=len(rec.calls),
    )
    if inner.snapped is not None:
        sn = inner.snapped
        entry["snapped"] = [str(sn.proposed), str(sn.snapped), sn.method, _r(sn.score)]
        led.snapped(bkey, rec.step, str(sn.proposed), str(sn.snapped), sn.method, sn.score)
    if rec.prompt is not None and rec.episode is None:
        entry["prompt"] = _prompt(rec, own, policy, local, inner, led, tenant, turns, rd)
    elif rec.prompt is not None:
        entry["prompt"] = _episode_prompt(rec, own, policy, local, inner, led, tenant, rd)
    if rec.episode is not None:
        entry["episode"] = episode_lines(data["episode"], reward=verdict.reward if verdict else None)
    events = fold.apply(rec, inp=inp, routed=routed if rec.v != 1 else None)
    return entry, events, tenant


def _prompt(rec: LogRecord, own: Any, policy: Any, inp: Any, decision: Any, led: Ledger, tenant: str | None,
            turns: dict[tuple[str | None, int], int], rd: RunDir) -> dict[str, Any]:
    """The prompt of ``rec`` rebuilt block by block (see the module docstring).

    Returns ``tokens``, ``budget``, ``rendering``, ``exact`` (the rebuilt text's sha256 is the
    logged one), ``sections`` [[block, [item]]] — an item is ``{"s": score}`` plus, for memory,
    ``"m"`` (item index; the item's key is its id), ``"b"`` (the branch it was read from) and, for
    a rule, ``"c"`` [helpful, harmful, status] at that step; other blocks' items carry their
    ``"id"``, an evidence paragraph also its ``"text"`` —,
    ``dropped`` [[block, id, tokens, reason, item index | None]] and, when not exact, ``text``
    (the logged prompt, when its file is there).
    """
    p = rec.prompt
    assert p is not None
    got = retrieve(own, policy, inp, decision)
    source = _sources(got)
    blocks = prompt_blocks(got, inp.text, inp.instruction, inp.evidence)
    gone = {(d[0], d[1]) for d in p.dropped}
    shown = {b: [it for it in items if (b, it.id) not in gone] for b, items in blocks.items()}
    rebuilt = compile_prompt(shown, policy.compiler, lambda _: 0, _NO_BUDGET)
    exact = hashlib.sha256(rebuilt.text.encode("utf-8")).hexdigest() == p.sha256
    logged = set(p.rule_ids) | set(p.episode_keys)  # what the log itself names, when the rebuild differs
    sections = []
    for sec in rebuilt.sections:
        items = []
        for it in sec.items:
            item: dict[str, Any] = {"s": _r(it.score)}
            kind = BLOCK_KIND.get(sec.block)
            if kind == "turn":
                local = int(it.id.rpartition("-")[2])
                item["m"] = led.add(tenant, "turn", it.id, None, turns.get((tenant, local)), text=it.text)
            elif kind is not None:
                item |= _memory_item(it, sec.block, kind, own, led, tenant, source, decision)
            else:  # instruction, evidence, preamble, input: the element's own text or fixed text
                item["id"] = it.id
                if sec.block == "evidence":
                    item["text"] = it.text
            if "m" in item and (exact or it.id in logged):
                led.use(item["m"], rec.step)
            items.append(item)
        sections.append([sec.block, items])
    out: dict[str, Any] = dict(tokens=p.tokens, budget=p.budget, rendering=p.rendering, exact=exact, sections=sections,
                               dropped=_dropped(p, led, tenant))
    if not exact:
        out["text"] = rd.prompt_text(p.sha256)
    return out


def _sources(got: Any) -> dict[tuple[str, str], str]:
    """(block, item id) -> the branch each retrieved memory item was read from."""
    source = {("examples", s.item.key): s.branch_id for s in got.episodes}
    source |= {("rules", s.item.id): s.branch_id for s in got.rules}
    source |= {("mistakes", s.item.key): s.branch_id for s in got.anti_patterns}
    source |= {("scoped_context", s.item.key): s.branch_id for s in got.context}
    return source


def _episode_prompt(rec: LogRecord, own: Any, policy: Any, inp: Any, decision: Any, led: Ledger, tenant: str | None,
                    rd: RunDir) -> dict[str, Any]:
    """The memory an agent step's prompts showed, block by block, and the logged prompt text.

    The examples are the retrieved ones as the policy's ``agents`` settings showed them
    (:func:`rizz.engine.agent_prompt.shown_examples`: under ``example_values: placeholders``
    each call's values written ``{parameter}``), those the log names (``episode_keys``: the
    first agent prompt's, after ``examples_offered_tools`` left out the examples calling a tool
    the element is not offered, a tool list the log does not hold); the rules are the log's
    ``rule_ids``; other memory less what the budget dropped. The same dict as :func:`_prompt`
    with ``exact`` None, ``episode`` True and ``text`` the episode's longest prompt as sent
    (when its file is there); an example's item carries ``"t"``, its text as shown.
    """
    p = rec.prompt
    assert p is not None
    got = retrieve(own, policy, inp, decision)
    source = _sources(got)
    blocks = prompt_blocks(got, inp.text, None, None)
    el = StreamElement(id=rec.id, input=inp.text)  # no tool list: episode_keys name the examples offered_tools kept
    examples = shown_examples(blocks["examples"], got, el, policy.agents)
    gone = {(d[0], d[1]) for d in p.dropped}
    shown = {b: [it for it in items if (b, it.id) not in gone] for b, items in blocks.items() if b in MEMORY_BLOCKS}
    shown["examples"] = [it for it in examples if it.id in set(p.episode_keys)]
    shown["rules"] = [it for it in shown.get("rules", []) if it.id in set(p.rule_ids)]
    rebuilt = compile_prompt(shown, policy.compiler, lambda _: 0, _NO_BUDGET)
    sections = []
    for sec in rebuilt.sections:
        kind = BLOCK_KIND.get(sec.block)
        if kind is None or kind == "turn":  # the preamble; an episode keeps no working memory
            continue
        items = []
        for it in sec.items:
            item: dict[str, Any] = {"s": _r(it.score), **_memory_item(it, sec.block, kind, own, led, tenant, source, decision)}
            if sec.block == "examples":
                item["t"] = it.text
            led.use(item["m"], rec.step)
            items.append(item)
        sections.append([sec.block, items])
    return dict(tokens=p.tokens, budget=p.budget, rendering=p.rendering, exact=None, episode=True, sections=sections,
                dropped=_dropped(p, led, tenant), text=rd.prompt_text(p.sha256))


def _memory_item(it: Any, block: str, kind: str, own: Any, led: Ledger, tenant: str | None, source: dict[tuple[str, str], str],
                 decision: Any) -> dict[str, Any]:
    """A shown memory item's page fields: ``m`` (its ledger index), ``b`` (the branch it was read
    from) and, for a rule, ``c`` [helpful, harmful, status] at that step."""
    m = led.find(tenant, kind, it.id)
    if m is None:  # not seen written (cannot happen in a whole log; kept readable anyway)
        m = led.add(tenant, kind, it.id, None, None, text=it.text)
    item: dict[str, Any] = {"m": m, "b": branch_key(tenant, source.get((block, it.id), decision.branch_id))}
    if kind == "rule":
        c = own.rule_ledger.get(it.id)
        item["c"] = [c.helpful, c.harmful, c.status] if c is not None else [0, 0, "candidate"]
    return item


def _dropped(p: Any, led: Ledger, tenant: str | None) -> list[list[Any]]:
    """The prompt's dropped items, each [block, id, tokens, reason, ledger index | None]."""
    return [[d[0], d[1], d[2], d[3], led.find(tenant, BLOCK_KIND[d[0]], d[1]) if d[0] in BLOCK_KIND else None] for d in p.dropped]


def _finish(led: Ledger, state: Any, steps: list[dict[str, Any]]) -> None:
    """The final state's branch figures and rule counters into ``led``; a branch merged or pruned
    away gets its figures from the steps routed to it (it is no longer in the state)."""
    if isinstance(state, TenantStates):
        ledgers = {None: state.untenanted.rule_ledger, **{t: s.rule_ledger for t, s in state.tenants.items()}}
    else:
        ledgers = {None: state.rule_ledger}
    rows = branch_rows(state)
    kept = {r["branch"] for r in rows}
    routed: dict[str, list[float | None]] = {}
    for st in steps:
        routed.setdefault(st["branch"], []).append(st["verdict"]["reward"] if st["verdict"] else None)
    for key, b in led.branches.items():
        if key not in kept:
            rewards = [x for x in routed.get(key, []) if x is not None]
            rows.append(dict(branch=key, label=b["label"] or "?", shape=b["shape"] or "-", active=False, traffic=len(routed.get(key, [])),
                             answered=len(rewards), mean_reward=round(sum(rewards) / len(rewards), 4) if rewards else None))
    led.finish(rows, ledgers)


def _request_text(request: Any) -> str | None:
    """A logged model request as text: chat messages (``role: content``), message texts, or a prompt."""
    if isinstance(request, str):
        return request
    if isinstance(request, list):
        return "\n\n".join(f"{m.get('role')}: {m.get('content')}" if isinstance(m, dict) else str(m) for m in request)
    return None


def _peer(records: list[dict[str, Any]], meta: dict[str, Any], calls_log: Path) -> dict[str, Any]:
    """A peer's folder: answers, verdicts and answer-prompt tokens per step (no state, no memory),
    and each step's first answer prompt as the peer sent it (``calls.jsonl``, when there)."""
    sent: dict[int, str | None] = {}
    if calls_log.exists():
        for line in calls_log.read_text(encoding="utf-8").splitlines():
            c = json.loads(line)
            if c.get("kind") == "answer" and c.get("step") not in sent:
                sent[c.get("step")] = _request_text(c.get("request"))
    steps = []
    for r in views(records):
        answer_calls = [c["prompt_tokens"] for c in r.get("calls", []) if c.get("kind") == "answer"]
        v = r.get("verdict")
        a = r.get("answer") or {}
        steps.append(dict(step=r["step"], id=r["id"], task=r.get("task"), kind="peer", context_only=r.get("context_only", False),
                          input=(r.get("input") or {}).get("text"),
                          answer=dict(raw=a.get("raw"), extracted=a.get("extracted"), parsed=a.get("parsed")) if a else None,
                          verdict=dict(reward=_r(v["reward"]), verifier=v.get("verifier"), parsed=v.get("parsed", True)) if v else None,
                          prompt=dict(tokens=max(answer_calls, default=0), budget=None, exact=None, sections=[], dropped=[],
                                      text=sent.get(r["step"])) if answer_calls else None,
                          changes=[], cands=[], calls=len(r.get("calls", []))))
    answered = [s["verdict"]["reward"] for s in steps if s["verdict"]]
    summary = dict(steps=len(steps), answered=len(answered), mean_reward=round(sum(answered) / len(answered), 6) if answered else 0.0)
    return dict(summary=summary, digest_ok=None, steps=steps, items=[], branches=[], peer=meta.get("peer", True))
