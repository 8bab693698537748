"""Validate the agent environments and verifiers independently of model quality (issue #13).

For every episode element of the given stream files: the oracle (gold actions replayed, required
outputs said) and a do-nothing agent each run one episode; both are scored by the element's own
verifier. Prints, per task: n, oracle mean reward, do-nothing mean reward, how many items' gold
changes the database (τ-bench) or makes a call (BFCL: all but the irrelevance items, whose answer
is no call), and how many of those the do-nothing agent passed.

Usage::

    rizz streams build bfcl --categories simple_python,multiple,parallel,parallel_multiple,multi_turn_base \\
        --split test --out bfcl-test.jsonl     # any of the categories in docs/agents.md
    python benchmarks/agents_oracle.py bfcl-test.jsonl tau-retail-test.jsonl ...

Exit status 1 if the oracle misses any item or the do-nothing agent passes an item whose gold
changes the database or makes a call.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict

from rizz.adapters.agents.env import make_environment
from rizz.adapters.agents.loop import run_episode
from rizz.adapters.models.oracle import NullAgent, OracleAgent, ScriptedUser
from rizz.adapters.verifiers.episodes import gold_digest, verify_episode
from rizz.formats.streams import StreamElement, read_stream


def gold_acts(el: StreamElement) -> bool:
    """Whether the gold does what a do-nothing agent does not: a τ-bench gold that changes the
    database; any BFCL gold but an irrelevance item's (reference ``{"call": false}``: no call)."""
    if el.verifier == "tau_db":
        return gold_digest(el) != make_environment(el.environment).state_digest()
    return not (el.verifier == "bfcl_ast" and json.loads(str(el.reference)) == {"call": False})


def main(paths: list[str]) -> int:
    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0, 0])
    bad = 0
    t0 = time.perf_counter()
    for path in paths:
        for el in read_stream(path).elements:
            runs = [verify_episode(el, run_episode(el, agent, make_environment(el.environment), max_steps=1000,
                                                   user=ScriptedUser()))
                    for agent in (OracleAgent(), NullAgent())]
            row = rows[el.task or "-"]
            row[0] += 1
            row[1] += runs[0].reward
            row[2] += runs[1].reward
            if runs[0].reward < 1.0:
                bad += 1
                print(f"oracle missed {el.id}: {runs[0].detail[:200]}")
            changes = gold_acts(el)
            row[3] += changes
            if changes and runs[1].reward > 0:
                bad += 1
                row[4] += 1
                print(f"do-nothing passed {el.id} although its gold changes the state or makes a call")
    print("| task | n | oracle | do-nothing | gold changes state or calls | do-nothing passed those |")
    print("|---|---|---|---|---|---|")
    for task, (n, o, z, c, zc) in rows.items():
        print(f"| {task} | {n} | {o / n:.3f} | {z / n:.3f} | {c} | {zc} |")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
