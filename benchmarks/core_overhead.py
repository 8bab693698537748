"""Per-step overhead of the pure core beside one brute-force numpy top-k over the same memories.

Usage::

    python benchmarks/core_overhead.py [--sizes 1000,10000,100000] [--repeats 200]
        [--branches 24] [--dim 384] [--seed 0] [--shapes 1] [--policy default]

For each size N it builds an :class:`AdaptiveState` holding N verified episodic memories
(``--dim``-d, clustered random unit vectors) spread unevenly over ``--branches`` branches of
five task families, plus procedural rules (some active, some promoted to the family and
global tiers), anti-patterns (N/20), scoped context (N/50, in 40 sessions), quarantined
items, working memory and one diagnostics record per synthetic step. The state is built by
folding the core's own past-tense events (``BranchSpawned``, ``Routed``, ``EpisodeWritten``,
``AntiPatternWritten``, ``ContextStored``, ``RuleAdded``, ``StepRecorded``, …) with
:func:`rizz.core.apply.fold`, not by calling ``step`` N times.

The timed operation is the real public per-step path, on fresh inputs drawn from the
branches' clusters (half of them with a session scope):

1. ``r.plan(state, x)`` — route + retrieve;
2. ``compile_prompt(prompt_blocks(...), policy.compiler, count_tokens, budget)`` with the
   default 65,536-token budget and a cheap deterministic token counter, ``len(text) // 4``
   (a stand-in for the model's tokenizer, so the figure is the core's own cost);
3. ``r.step(state, x', verdict)`` with ``x'`` carrying the compiled prompt's rule ids, episode
   keys and token counts, and a verdict of reward 1.0 (so the step writes an episode).

The state advances (each step's output is the next step's input), as in a real run. On
the same queries, in the same run, the script times one brute-force top-k per query:
``M @ q`` and ``np.argpartition`` over a contiguous ``(N, d)`` float32 matrix of the same N
episodic embeddings, k = ``retrieval.examples_k``. Steps and brute-force calls alternate in
chunks of 25. Wall times are ``time.perf_counter`` medians; "cpu" columns are medians of
``time.process_time`` (CPU time of the whole process, BLAS worker threads included), which
a loaded machine disturbs less than wall time.

With ``--shapes 1`` (the default) every branch serves the same output shape, so the shape
guard excludes none and example retrieval scans all N rows: the core's worst case against
the brute force. "rows scanned" reports the episodic rows the core's retrieval multiplied:
with other branches eligible, every row of the bank's episodic index (one product over all
stored episodes, ineligible rows masked afterwards), else the routed branch's rows.

State memory is measured with ``tracemalloc``: the bytes allocated while folding the
build events that are still held once the build returns (the state alone; the generated
vectors are allocated before tracing starts). "matrices" is the part of it that is the
episodic, anti-pattern and context embedding storage (allocated capacity, float32), and
"index" the part of it that is the bank-level episodic index (a second copy of every
episode row, plus two int64 per row).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
import tracemalloc
from typing import NamedTuple

import attrs
import numpy as np

from rizz.core import Label, Policy, Rizz, StepInput, Verdict, compile_prompt, events as ev, prompt_blocks, rizz
from rizz.core.apply import fold
from rizz.core.records import AdaptiveState, AntiPattern, ContextItem, Episode, QuarantinedItem, Rule, StepRecord, Turn

FAMILIES = (
    ("classify", ("stance-detection-chinese", "monetary-policy-stance", "sentiment-reviews", "topic-news")),
    ("solve-math", ("arithmetic-word-problems", "algebra-equations", "unit-conversion")),
    ("summarize", ("meeting-transcripts", "news-articles", "dialogue-turns")),
    ("answer-question", ("multi-hop-wikipedia", "long-conversation-memory", "science-exams")),
    ("write-code", ("python-functions", "sql-queries")),
)
SHAPES = ("label", "number", "text", "span", "code")
SESSIONS = 40


def count_tokens(text: str) -> int:
    """Cheap deterministic stand-in for a tokenizer: 4 characters per token."""
    return len(text) // 4


class World(NamedTuple):
    """The synthetic task families: one cluster centre per branch, shared by build and queries."""

    labels: list[Label]
    shapes: list[str]
    centres: np.ndarray  # (B, d) float32, unit rows
    label_vecs: np.ndarray  # (B, d) float32, unit rows: stand-in for ψ(application)
    weights: np.ndarray  # (B,) float64, share of traffic per branch (uneven)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def make_world(branches: int, dim: int, n_shapes: int, rng: np.random.Generator) -> World:
    fam_centres = _unit(rng.standard_normal((len(FAMILIES), dim)))
    labels, shapes, centres = [], [], []
    for i in range(branches):
        f = i % len(FAMILIES)
        fn, apps = FAMILIES[f]
        app = apps[(i // len(FAMILIES)) % len(apps)]
        labels.append(Label(fn, f"{app}-{i}"))
        shapes.append(SHAPES[f % n_shapes])
        centres.append(fam_centres[f] + 1.2 * _unit(rng.standard_normal(dim)))
    weights = 1.0 / np.arange(1, branches + 1) ** 0.8  # Zipf-like: a few busy branches
    rng.shuffle(weights)
    return World(labels, shapes, _unit(np.stack(centres)), _unit(rng.standard_normal((branches, dim))), weights / weights.sum())


def members(world: World, branch: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n, d) unit vectors near the given branches' centres (cosine ≈ 0.75)."""
    noise = rng.standard_normal((len(branch), world.centres.shape[1]), dtype=np.float32)
    noise *= 0.9 / np.sqrt(world.centres.shape[1])
    return _unit(world.centres[branch] + noise)


class Layout(NamedTuple):
    """What the synthetic history holds, drawn before the build: kind and branch of each step."""

    kinds: np.ndarray  # (T,) int8: 0 episode, 1 anti-pattern, 2 context
    where: np.ndarray  # (T,) int64 branch index
    vecs: np.ndarray  # (T, d) float32 unit rows
    rule_vecs: np.ndarray  # (8·B, d) float32 unit rows


def make_layout(world: World, n: int, rng: np.random.Generator) -> Layout:
    B = len(world.labels)
    n_fail, n_ctx = n // 20, n // 50
    rest = np.concatenate([np.zeros(n - B, np.int8), np.ones(n_fail, np.int8), np.full(n_ctx, 2, np.int8)])
    rng.shuffle(rest)
    kinds = np.concatenate([np.zeros(B, np.int8), rest])  # every branch is spawned by an episode
    where = rng.choice(B, size=len(kinds), p=world.weights)
    where[:B] = np.arange(B)
    return Layout(kinds, where, members(world, where, rng), members(world, np.repeat(np.arange(B), 8), rng))


def build_events(world: World, lay: Layout) -> list[object]:
    """The past-tense events of a synthetic history (what N steps would have folded)."""
    B = len(world.labels)
    out: list[object] = []
    spawned: set[int] = set()
    for t, (k, b) in enumerate(zip(lay.kinds.tolist(), lay.where.tolist())):
        bid, label, shape, v = f"b{b}", world.labels[b], world.shapes[b], lay.vecs[t].tobytes()
        if b not in spawned:
            spawned.add(b)
            out.append(ev.BranchSpawned(bid, label, v, world.label_vecs[b].tobytes(), shape, t))
        text = f"{label.application} item {t}: what is the answer to question number {t}?"
        if k == 2:
            scope = f"session-{t % SESSIONS}"
            out.append(ev.Routed(bid, 1.0, t, None, False, None))
            out.append(ev.ContextStored(bid, ContextItem(f"c{t}", f"context note {t} for {scope}", scope, t), v))
        else:
            reward = 1.0 if k == 0 else 0.0
            out.append(ev.Routed(bid, 1.3, t, shape, True, reward))
            if k == 0:
                out.append(ev.EpisodeWritten(bid, Episode(f"e{t}", text, f"answer {t}", 1.0, None, t), v))
            else:
                out.append(ev.AntiPatternWritten(bid, AntiPattern(f"f{t}", text, f"wrong {t}", 0.0, t), v))
            out.append(ev.TurnRemembered(Turn(t, bid, text, "answer", reward), 8))
        out.append(ev.StepRecorded(StepRecord(t, f"item-{t}", bid, 1.3, t < B, None, 900, 20, 0)))
    t = len(lay.kinds)
    for b in range(B):
        bid, label = f"b{b}", world.labels[b]
        for j in range(8):
            rid = f"r{b}-{j}"
            rule = Rule(rid, f"the input is a {label.application} item of kind {j}", f"apply strategy {j} step by step",
                        lay.rule_vecs[b * 8 + j].tobytes(), bid, label.function, t)
            out.append(ev.RuleAdded(bid, rule))
            if j < 4:  # half the rules earned activation
                out += [ev.RuleCountersMoved(rid, 1, 0, bid), ev.RuleCountersMoved(rid, 1, 0, bid), ev.RuleActivated(rid)]
            if j == 0 and b % 3 == 0:
                out += [ev.RuleCountersMoved(rid, 1, 0, f"b{(b + 1) % B}"), ev.RulePromoted(rid, "family", label.function)]
            if j == 0 and b % 12 == 0:
                out.append(ev.RulePromoted(rid, "global", label.function))
        out.append(ev.Quarantined(bid, QuarantinedItem(f"q{b}", "far input", "answer", 0.5, "middling-reward", t)))
    return out


class Timed(NamedTuple):
    step_s: list[float]  # wall time, seconds (time.perf_counter)
    brute_s: list[float]
    step_cpu: list[float]  # CPU time of the process, seconds (time.process_time)
    brute_cpu: list[float]
    rows: int


CHUNK = 25  # timed steps and brute-force calls alternate in chunks of this many


def run(r: Rizz, state: AdaptiveState, world: World, brute: np.ndarray, repeats: int, rng: np.random.Generator) -> tuple[Timed, AdaptiveState]:
    """Time ``repeats`` steps and as many brute-force top-k calls on the same queries.

    They alternate in chunks of :data:`CHUNK` rather than call by call: after a threaded
    BLAS call the library's worker threads keep spinning for a while, and on a 2-core
    machine that steals the core from whatever runs next. The first five of each are warm-up.
    """
    policy = r.policy
    k = policy.retrieval.examples_k
    where = rng.choice(len(world.labels), size=repeats + 5, p=world.weights).tolist()
    vecs = members(world, np.asarray(where), rng)
    verdict = Verdict(1.0, "exact_match")
    timed = Timed([], [], [], [], 0)
    rows = 0
    for lo in range(0, len(where), CHUNK):
        chunk = range(lo, min(lo + CHUNK, len(where)))
        for i in chunk:
            b = where[i]
            label = world.labels[b]
            x = StepInput(
                step=state.steps,  # the run continues where the history left off
                item_id=f"bench-{i}",
                text=f"{label.application} bench question {i}: what is the answer?",
                embedding=vecs[i].tobytes(),
                instruction="Answer with the label only.",
                scope=f"session-{i % SESSIONS}" if i % 2 else None,
                shape=world.shapes[b],
                label=label,
                label_embedding=world.label_vecs[b].tobytes(),
                answer=f"bench answer {i}",
            )
            c0, t0 = time.process_time(), time.perf_counter()
            plan = r.plan(state, x)
            blocks = prompt_blocks(plan.retrieved, x.text, x.instruction, x.evidence)
            prompt = compile_prompt(blocks, policy.compiler, count_tokens, policy.compiler.token_budget)
            x = attrs.evolve(
                x,
                prompt_rule_ids=prompt.item_ids("rules"),
                prompt_episode_keys=prompt.item_ids("examples"),
                prompt_tokens=prompt.token_count,
                completion_tokens=8,
                dropped=len(prompt.dropped),
            )
            state = r.step(state, x, verdict)
            t1, c1 = time.perf_counter(), time.process_time()
            if i >= 5:
                timed.step_s.append(t1 - t0)
                timed.step_cpu.append(c1 - c0)
            if i == 5:
                rows = _scanned(state, world, b)
        for i in chunk:
            q = vecs[i]
            c2, t2 = time.process_time(), time.perf_counter()
            top = np.argpartition(-(brute @ q), k)[:k]
            t3, c3 = time.perf_counter(), time.process_time()
            assert len(top) == k
            if i >= 5:
                timed.brute_s.append(t3 - t2)
                timed.brute_cpu.append(c3 - c2)
    return timed._replace(rows=rows), state


def _scanned(state: AdaptiveState, world: World, b: int) -> int:
    """Episodic rows example retrieval multiplies for a query of branch ``b`` (see the docstring)."""
    eligible = [br for br in state.active_branches() if len(br.episodes) and br.shape in (None, world.shapes[b])]
    others = [br for br in eligible if br.id != f"b{b}"]
    return len(state.episode_index) if others else sum(len(br.episodes) for br in eligible)


def _index_bytes(state: AdaptiveState) -> int:
    idx = state.episode_index
    st = idx.matrix._st  # noqa: SLF001 - measuring allocated capacity
    return (st.data.nbytes if st is not None else 0) + idx._where._data.nbytes  # noqa: SLF001


def _matrix_bytes(state: AdaptiveState) -> int:
    total = _index_bytes(state)
    for b in state.branches.values():
        for store in (b.episodes, b.anti_patterns, b.context):
            st = store.matrix._st  # noqa: SLF001 - measuring allocated capacity
            total += st.data.nbytes if st is not None else 0
    return total


def blas_summary() -> str:
    try:
        from threadpoolctl import threadpool_info

        info = threadpool_info()
        return "; ".join(f"{i.get('internal_api')} {i.get('version')} ({i.get('threading_layer')}, {i.get('architecture')}), "
                         f"{i.get('num_threads')} threads" for i in info) or "no BLAS pool found"
    except ImportError:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name')} {blas.get('version')} (threadpoolctl not installed)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated numbers of episodic memories")
    ap.add_argument("--repeats", type=int, default=200, help="timed steps per size (after 5 warm-up steps)")
    ap.add_argument("--branches", type=int, default=24, help="branches (≤ the policy's 31 active)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shapes", type=int, default=1, help="distinct output shapes among branches (1: every branch is scanned)")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="limit BLAS threads (threadpoolctl) for the whole run; default: numpy's own setting")
    ap.add_argument("--no-memory", action="store_true", help="skip tracemalloc (builds ~3x faster; memory columns show '-')")
    ap.add_argument("--policy", default=None, help="a shipped policy name or YAML file (default: the Python record's defaults, Policy())")
    args = ap.parse_args()
    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.blas_threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.policy is None:
        r = rizz(Policy())
    else:
        from rizz.formats.policy_file import load_policy

        r = rizz(load_policy(args.policy))
    print(f"policy {args.policy or 'Policy()'}: write.supersede {r.policy.write.supersede}, "
          f"retrieval.examples_cross_scope {r.policy.retrieval.examples_cross_scope}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, cpus {len(os.sched_getaffinity(0))}, "
          f"load average {os.getloadavg()[0]:.2f}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"BLAS: {blas_summary()}")
    print(f"branches {args.branches}, dim {args.dim}, shapes {args.shapes}, repeats {args.repeats}, seed {args.seed}, "
          f"examples_k {r.policy.retrieval.examples_k}, budget {r.policy.compiler.token_budget} tokens (count = len(text)//4)")
    header = (
        f"{'memories':>9} {'rows scanned':>12} {'step p50 ms':>11} {'brute p50 ms':>12} {'ratio':>6} {'step p90 ms':>11} "
        f"{'step cpu ms':>11} {'brute cpu ms':>12} {'cpu ratio':>9} {'state MiB':>9} {'matrices MiB':>12} {'index MiB':>9} {'build s':>7}"
    )
    print(header)
    print("-" * len(header))
    for n in sizes:
        rng = np.random.default_rng([args.seed, n])
        world = make_world(args.branches, args.dim, args.shapes, rng)
        lay = make_layout(world, n, rng)
        brute = np.ascontiguousarray(lay.vecs[lay.kinds == 0])  # (n, d) float32: the same episodic rows
        gc.collect()
        if not args.no_memory:
            tracemalloc.start()
        t0 = time.perf_counter()
        events = build_events(world, lay)
        state = fold(r.init(), events)
        build_s = time.perf_counter() - t0
        del events
        gc.collect()
        state_mib = f"{tracemalloc.get_traced_memory()[0] / 2**20:>9.1f}" if not args.no_memory else f"{'-':>9}"
        tracemalloc.stop()
        del lay
        assert sum(len(b.episodes) for b in state.branches.values()) == n, "build lost episodes"
        assert len(state.branches) == args.branches
        timed, after = run(r, state, world, brute, args.repeats, rng)
        assert sum(len(b.episodes) for b in after.branches.values()) == n + args.repeats + 5, "a timed step did not write"
        step, brute = statistics.median(timed.step_s), statistics.median(timed.brute_s)
        step_c, brute_c = statistics.median(timed.step_cpu), statistics.median(timed.brute_cpu)
        p90 = statistics.quantiles(timed.step_s, n=10)[-1]
        print(f"{n:>9,} {timed.rows:>12,} {step * 1e3:>11.3f} {brute * 1e3:>12.3f} {step / brute:>6.2f} {p90 * 1e3:>11.3f} "
              f"{step_c * 1e3:>11.3f} {brute_c * 1e3:>12.3f} {step_c / brute_c:>9.2f} "
              f"{state_mib} {_matrix_bytes(state) / 2**20:>12.1f} {_index_bytes(state) / 2**20:>9.1f} {build_s:>7.1f}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
