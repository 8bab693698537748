"""τ-bench retail / airline -> episode stream (specs/stream-format.md, "Episode elements").

Source: ``DATA_ROOT/tau_bench/<domain>/`` (``sierra-research/tau-bench`` @ 59a200c, MIT; see its
SOURCE.md): ``tasks_<split>.json`` (retail: train 500, dev 20, test 91 shared; airline: test 38
shared), ``wiki.md`` (the agent policy) and ``db/`` (the databases the tools act on).

Element (one per task, in file order): ``input`` = the task's hidden brief (the agent's side
never sees it: the simulated user, briefed with ``user``, opens the conversation, and that
opening message, not the brief, is what the step embeds, labels, routes and retrieves from and
the input the episode writes to memory: :func:`rizz.engine.agent_step.open_conversation`);
``instruction`` = the domain policy (``wiki.md``); ``tools`` = rizz's tool
schemas of the domain (:mod:`rizz.adapters.agents.tau_retail`, :mod:`~rizz.adapters.agents.tau_airline`);
``user`` = the brief; ``environment`` = ``{"name": "tau_bench", "domain": D, "db":
"tau_bench/D/db"}``; ``reference`` = ``{"actions": gold actions, "outputs": required outputs}``
as JSON; ``verifier`` ``tau_db``; ``metadata``: task ``tau-<domain>``, ``user_id``,
``task_index``. Id ``tau-<domain>-<split>-<task_index>``.

Splits are the source's own: retail ``train``/``dev``/``test``; airline ``test`` only.
"""

from __future__ import annotations

import json
from pathlib import Path

from rizz.adapters.agents import tau_airline, tau_retail
from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import BuildError, BuildOptions, BuildResult, finish, load_json, select

__all__ = ["TAU_DOMAINS", "TAU_SPLITS", "build_tau_bench", "tau_elements"]

TAU_DOMAINS = ("retail", "airline")
#: Domain -> the splits the source ships.
TAU_SPLITS = {"retail": ("train", "dev", "test"), "airline": ("test",)}


def tau_elements(root: Path, domain: str, split: str, db: str | None = None) -> list[StreamElement]:
    """Every task of ``domain``/``split`` as an episode element, in file order."""
    if domain not in TAU_DOMAINS:
        raise BuildError(f"--domain: expected one of {', '.join(TAU_DOMAINS)}, got {domain!r}")
    if split not in TAU_SPLITS[domain]:
        raise BuildError(f"--split {split}: τ-bench {domain} ships only {', '.join(TAU_SPLITS[domain])}")
    base = root / "tau_bench" / domain
    tasks = load_json(base / f"tasks_{split}.json")
    wiki = (base / "wiki.md").read_text(encoding="utf-8")
    schemas = tau_retail.SCHEMAS if domain == "retail" else tau_airline.SCHEMAS
    out = []
    for t in tasks:
        out.append(StreamElement(
            id=f"tau-{domain}-{split}-{t['task_index']:03d}", input=t["instruction"], instruction=wiki,
            metadata={"task": f"tau-{domain}", "user_id": t["user_id"], "task_index": t["task_index"]},
            reference=json.dumps({"actions": t["actions"], "outputs": t["outputs"]}, ensure_ascii=False),
            verifier="tau_db", tools=schemas, user=t["instruction"],
            environment={"name": "tau_bench", "domain": domain, "db": db or f"tau_bench/{domain}/db"}))
    return out


def build_tau_bench(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a τ-bench stream of ``opts.domain`` (default ``retail``), source order."""
    notes: list[str] = []
    domain = opts.domain or "retail"
    items = select(tau_elements(root, domain, opts.split), opts, f"tau-{domain}", notes)
    return finish(items, opts, notes)
