"""``rizz sweep SPEC.yaml``: a grid over policy fields × streams × seeds, one report.

A sweep spec is YAML (paths relative to the spec file)::

    base: default                      # policy file or shipped name the grid varies
    grid:                              # dotted policy field -> values (every combination)
      retrieval.examples_k: [2, 4, 8]
      routing.snap_threshold: [0.88, 0.92]
    streams: [../data/trace-mini/test.jsonl]
    seeds: [0, 1]                      # optional: stream-order seeds (absent: file order)
    baselines: [frozen]                # optional: whole policies run on the same cells
    limit: 40                          # optional: first N elements of each stream
    budget: 2048                       # optional: prompt budget cap (tokens)
    model: embedded                    # optional; `rizz sweep --model` overrides

Every grid point is ``base`` with those fields set, validated like a policy file before
anything runs (a bad value fails with the grid key and the policy field's ``$.path``). A
*cell* is one (stream, seed): with a seed the first ``limit`` lines of the stream are put in
the order ``numpy.random.default_rng(seed).permutation`` gives and written to
``SWEEP/streams/<stem>.seed<k>.jsonl`` (so runs resume and replay from a real file; ``<stem>``
is the stream's file stem, or ``<folder>-<stem>`` when two streams share a file name). Each
cell is a bench folder ``SWEEP/cells/<cell>/`` with one RUN_DIR per policy and its own
report; with ``--ray`` every (policy, cell) run is one Ray task (:mod:`rizz.lab.ray_tasks`).

The sweep report (``SWEEP/results.json``, ``report.md``, ``sweep_rewards.png`` and one
``sweep_<field>.png`` per grid field) pools each policy's answered steps over all cells:
mean reward with a percentile-bootstrap 95% interval (:func:`rizz.lab.stats.bootstrap_ci`,
2000 resamples, seed 0), the paired Δ against the first baseline (none without baselines;
pairs are (cell, step id)), and each field's marginal (all steps of the grid points that
share the value).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import yaml

from rizz.adapters.embedder import Embedder
from rizz.engine.run import run_stream
from rizz.errors import RizzError
from rizz.formats.policy_file import PolicyError, load_policy, parse_policy, policy_data
from rizz.formats.wording import did_you_mean, plural
from rizz.lab.ray_tasks import RunSpec, driver_torch_threads, model_from_spec, pinned_embedder, run_specs_on_ray
from rizz.lab.report import build_report
from rizz.lab.sweep_report import write_sweep_report

__all__ = ["SweepError", "SweepSpec", "cell_stems", "expand", "load_sweep", "run_sweep"]

_KEYS = {"base", "grid", "streams", "seeds", "baselines", "limit", "budget", "model"}


class SweepError(ValueError, RizzError):
    """A bad sweep spec; the message names the file and the ``$.path`` of the field."""


@attrs.frozen
class SweepSpec:
    """A parsed sweep spec (see the module docstring); paths already resolved."""

    source: str
    base: str
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    streams: tuple[Path, ...]
    seeds: tuple[int | None, ...] = (None,)
    baselines: tuple[str, ...] = ()
    limit: int | None = None
    budget: int | None = None
    model: str = "embedded"


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec. Raises SweepError naming ``file: $.field``."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SweepError(f"{path}: cannot read the sweep spec ({e.strerror or e})") from None
    except yaml.YAMLError as e:  # name the file and line, not PyYAML's "<unicode string>"
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        what = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or type(e).__name__
        raise SweepError(f"{path}{where}: not valid YAML: {what}") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: $: expected a mapping with keys {', '.join(sorted(_KEYS))}")

    def bad(field: str, why: str) -> SweepError:
        return SweepError(f"{path}: $.{field}: {why}")

    for k in data:
        if k not in _KEYS:
            raise bad(str(k), f"unknown key{did_you_mean(str(k), _KEYS)} (allowed: {', '.join(sorted(_KEYS))})")
    for k in ("base", "grid", "streams"):
        if k not in data:
            raise bad(k, "required")
    grid = data["grid"]
    if not isinstance(grid, dict) or not grid:
        raise bad("grid", "expected a mapping of dotted policy field to a non-empty list of values")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise bad(f"grid.{k}", f"expected a non-empty list of values, got {v!r}")
    streams = data["streams"]
    if isinstance(streams, str):
        streams = [streams]
    if not isinstance(streams, list) or not streams or not all(isinstance(s, str) for s in streams):
        raise bad("streams", "expected a non-empty list of stream files")
    resolved = tuple((path.parent / s).resolve() if not Path(s).is_absolute() else Path(s) for s in streams)
    for i, s in enumerate(resolved):
        if not s.is_file():
            raise bad(f"streams[{i}]", f"stream file not found: {s}")
    if len(set(cell_stems(resolved))) != len(resolved):
        raise bad("streams", "two stream files share a folder name and a file name (the pair names the cells): "
                  + ", ".join(str(s) for s in resolved))
    seeds = data.get("seeds")
    if seeds is not None and (not isinstance(seeds, list) or not seeds or not all(type(x) is int and x >= 0 for x in seeds)):
        raise bad("seeds", f"expected a non-empty list of integers >= 0, got {seeds!r}")
    baselines = data.get("baselines") or []
    if not isinstance(baselines, list) or not all(isinstance(b, str) for b in baselines):
        raise bad("baselines", "expected a list of policy files or shipped names")
    for k in ("limit", "budget"):
        if data.get(k) is not None and (type(data[k]) is not int or data[k] < 1):
            raise bad(k, f"expected an integer >= 1, got {data[k]!r}")

    def policy_ref(p: str) -> str:
        q = path.parent / p
        return str(q) if q.exists() else p

    return SweepSpec(str(path), policy_ref(str(data["base"])), tuple((str(k), tuple(v)) for k, v in grid.items()), resolved,
                     tuple(seeds) if seeds else (None,), tuple(policy_ref(b) for b in baselines), data.get("limit"),
                     data.get("budget"), str(data.get("model") or "embedded"))


def _fmt_value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def expand(spec: SweepSpec) -> list[tuple[str, Any, dict[str, Any]]]:
    """Grid points and baselines as ``[(source, Policy, fields)]``, all validated first.

    A grid point's policy ``name`` is ``field=value,field=value`` (dotted fields, grid order).
    Raises SweepError (unknown field, bad value: the grid key and the policy's ``$.path``) or
    PolicyError (a bad base or baseline policy file).
    """
    base = load_policy(spec.base)
    base_data = policy_data(base)
    out: list[tuple[str, Any, dict[str, Any]]] = []
    keys = [k for k, _ in spec.grid]
    for values in itertools.product(*(v for _, v in spec.grid)):
        data = yaml.safe_load(yaml.safe_dump(base_data))  # a deep copy of plain data
        fields = dict(zip(keys, values))
        for key, value in fields.items():
            node = data
            parts = key.split(".")
            for part in parts[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict) or parts[-1] not in node:
                hint = did_you_mean(parts[-1], sorted(node)) if isinstance(node, dict) else ""
                raise SweepError(f"{spec.source}: $.grid.{key}: no such policy field ($.{key}){hint}")
            node[parts[-1]] = value
        data["name"] = ",".join(f"{k}={_fmt_value(v)}" for k, v in fields.items())
        try:
            pol = parse_policy(data, f"{spec.source}: grid point {data['name']}")
        except PolicyError as e:
            raise SweepError(str(e)) from None
        out.append((f"{spec.base} + {data['name']}", pol, fields))
    for b in spec.baselines:
        out.append((b, load_policy(b), {}))
    names = [p.name for _, p, _ in out]
    if len(set(names)) != len(names):
        raise SweepError(f"{spec.source}: policy names must differ (they name run folders): {names}")
    return out


def cell_stems(streams: tuple[Path, ...] | list[Path]) -> list[str]:
    """The name each stream gives its cells: its file stem (``test`` for ``…/test.jsonl``), or,
    where two streams share a stem, ``<folder>-<stem>`` (``trace-mini-test``) for each of those."""
    stems = [s.stem for s in streams]
    return [f"{s.parent.name}-{stem}" if stems.count(stem) > 1 else stem for s, stem in zip(streams, stems)]


def _cells(spec: SweepSpec, out: Path) -> list[tuple[str, Path, int | None]]:
    """``[(cell name, stream file, limit to pass)]``; seeded streams are written under ``out/streams``."""
    cells = []
    for stream, stem in zip(spec.streams, cell_stems(spec.streams)):
        for seed in spec.seeds:
            if seed is None:
                cells.append((stem, stream, spec.limit))
                continue
            lines = [l for l in stream.read_text(encoding="utf-8").splitlines() if l.strip()][: spec.limit]
            order = np.random.default_rng(seed).permutation(len(lines))
            target = out / "streams" / f"{stem}.seed{seed}.jsonl"
            text = "".join(lines[i] + "\n" for i in order)
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            cells.append((target.stem, target, None))
    return cells


def run_sweep(spec: SweepSpec, out: str | Path, *, model: str | None = None, model_factory: Callable[[str], Any] | None = None,
              embedder_factory: Callable[[], Any] | None = None, ray_address: str | None = None, num_cpus: int | None = None,
              command: str = "", log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict[str, Any]:
    """Run every (policy, cell) of ``spec`` into ``out`` and write the sweep report; returns results.json.

    ``model`` (a ``--model`` spec) overrides the spec's; ``model_factory`` (``cache_path ->
    backend``) overrides both (tests, benchmarks). Serial runs share ``out/responses.sqlite``;
    Ray tasks merge their caches into it. Rerunning resumes. Raises SweepError, PolicyError,
    StreamError, RunDirBusy, RunDirMismatch, ModelError.
    """
    from functools import partial

    out = Path(out)
    policies = expand(spec)
    out.mkdir(parents=True, exist_ok=True)
    cells = _cells(spec, out)
    factory = model_factory or partial(model_from_spec, model or spec.model)
    runs = [RunSpec(f"{cell}/{pol.name}", stream, pol, source, out / "cells" / cell / pol.name, limit, None, spec.budget)
            for cell, stream, limit in cells for source, pol, _ in policies]
    log(f"sweep: {plural(len(policies), 'policy', 'policies')} x {plural(len(cells), 'cell')} = {plural(len(runs), 'run')}")
    if ray_address is not None:
        run_specs_on_ray(runs, out / "responses.sqlite", model_factory=factory,
                         embedder_factory=embedder_factory or partial(pinned_embedder, driver_torch_threads()),
                         address=ray_address, num_cpus=num_cpus, log=log)
    else:
        backend = factory(str(out / "responses.sqlite"))
        embedder = embedder_factory() if embedder_factory else Embedder()
        for r in runs:
            s = run_stream(r.stream, r.policy, r.policy_source, r.out, backend, embedder, limit=r.limit, budget=r.budget, log=log)
            log(f"{r.label}: {plural(s['steps'], 'step')}, mean reward {s['mean_reward']:.3f}")
    names = [pol.name for _, pol, _ in policies]
    for cell, _, _ in cells:
        build_report(out / "cells" / cell, names, title=f"rizz sweep cell {cell}", command=command)
    return write_sweep_report(out, spec, policies, [c for c, _, _ in cells], command=command)
