"""The import graph of ``rizz/``, read from the source with ``ast`` (issue #26 item 1).

Usage::

    python benchmarks/import_graph.py                  # this checkout's rizz/
    python benchmarks/import_graph.py --rev 63997fb    # rizz/ at a commit (git archive), e.g. before the layers
    python benchmarks/import_graph.py --trace          # also the files one `rizz run` element passes through
    python benchmarks/import_graph.py --json           # every figure and list as JSON

Prints, for the ``.py`` files under ``rizz/``:

* **files per layer** (``rizz/<layer>/``; ``ground`` is ``rizz.core``, ``rizz.errors`` and
  ``rizz.extras``; ``top`` is ``rizz/__init__.py`` and ``rizz/__main__.py``). With ``--rev``
  the files of that commit are put in the layer of the file git pairs them with now (its rename
  detection, ``git diff -M``), so "upward imports" is measured against today's layers;
* **loose modules**: files beside subfolders in a folder that has subfolders;
* **circles**: sets of modules that import each other, directly or through others (the
  strongly connected components of the module graph with more than one module);
* **floors**: the longest chain of imports, counting a circle as one floor;
* **folder loops**: circles among folders (a folder stands for the modules directly in it;
  imports between a folder and its own subfolders are left out);
* **upward imports**: imports of a module in a higher layer (the order is ``LAYERS``);
* **private imports**: a ``_name`` imported from another module, or a module ``_m`` imported
  from outside its package;
* **function-level imports**: ``rizz`` imports inside a function, and how many of them carry a
  ``# lazy:`` comment saying which heavy optional dependency they defer;
* ``--trace``: the ``rizz/`` files whose functions run while ``rizz run`` handles one element
  (the 2nd of ``data/trace-mini/test.jsonl``, policy ``default``, a scripted stand-in model and
  a hash embedder; setup, the 1st element and the summary are left out), by layer.

Every import statement counts: at module level or inside a function, under ``if
TYPE_CHECKING`` or ``try`` alike. ``from P import n`` is an import of the module ``P.n`` when
there is one, else of ``P``. ``tests/test_layers.py`` uses :func:`read_modules`,
:func:`imports_of` and :func:`circles` to hold the contract; ``pyproject.toml``'s
``[tool.importlinter]`` holds the layers.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
#: Bottom to top: each layer imports only the layers before it.
LAYERS = ("ground", "formats", "store", "adapters", "engine", "lab", "apps", "top")
GROUND = ("rizz.core", "rizz.errors", "rizz.extras")
TOP = ("rizz", "rizz.__main__")


class Import(NamedTuple):
    importer: str  # module name
    target: str  # module name (the module itself, or the package/module a name comes from)
    names: tuple[str, ...]  # names taken from ``target`` ("" for ``import target``)
    line: int
    function_level: bool
    lazy: bool  # a "# lazy:" comment on its line or the line above


def module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_modules(root: Path) -> dict[str, Path]:
    """``module name -> file`` for every ``.py`` under ``root/rizz``."""
    return {module_name(f.relative_to(root)): f for f in sorted((root / "rizz").rglob("*.py"))
            if "__pycache__" not in f.parts}


def _resolve(importer: str, is_package: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str, path: Path, modules: Iterable[str]) -> list[Import]:
    """Every import of a ``rizz`` module in ``path`` (module ``name``)."""
    known = set(modules)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out: list[Import] = []

    def lazy(node: ast.stmt) -> bool:
        """A ``# lazy:`` comment on the statement's line, or above the block of imports it is in."""
        if "# lazy:" in lines[node.lineno - 1]:
            return True
        k = node.lineno - 2  # up through the imports (and their continuation lines) above it
        while k >= 0 and (lines[k].strip().startswith(("from ", "import ")) or lines[k].strip() == ")"
                          or lines[k].rstrip().endswith(",")):
            k -= 1
        return k >= 0 and lines[k].strip().startswith("# lazy:")

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "rizz" or alias.name.startswith("rizz."):
                        out.append(Import(name, alias.name, ("",), child.lineno, in_function, lazy(child)))
            elif isinstance(child, ast.ImportFrom):
                src = _resolve(name, path.name == "__init__.py", child.module, child.level)
                if src == "rizz" or src.startswith("rizz."):
                    plain: list[str] = []
                    for alias in child.names:
                        sub = f"{src}.{alias.name}"
                        if sub in known:  # `from pkg import module`
                            out.append(Import(name, sub, ("",), child.lineno, in_function, lazy(child)))
                        else:
                            plain.append(alias.name)
                    if plain:
                        out.append(Import(name, src, tuple(plain), child.lineno, in_function, lazy(child)))
            visit(child, nested)

    visit(ast.parse(text), False)
    return out


def graph(modules: dict[str, Path]) -> tuple[list[Import], dict[str, set[str]]]:
    """All imports, and ``module -> modules it imports`` (targets that are no file are dropped)."""
    imps = [i for m, p in modules.items() for i in imports_of(m, p, modules)]
    g: dict[str, set[str]] = {m: set() for m in modules}
    for i in imps:
        if i.target in modules and i.target != i.importer:
            g[i.importer].add(i.target)
    return imps, g


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def floors(g: dict[str, set[str]]) -> int:
    """Length of the longest import chain, a circle counting as one floor."""
    comp_of = {m: m for m in g}
    for c in circles(g):
        for m in c:
            comp_of[m] = c[0]
    dag: dict[str, set[str]] = defaultdict(set)
    for a, bs in g.items():
        for b in bs:
            if comp_of[a] != comp_of[b]:
                dag[comp_of[a]].add(comp_of[b])
    memo: dict[str, int] = {}

    def depth(c: str) -> int:
        if c not in memo:
            memo[c] = 1 + max((depth(d) for d in dag[c]), default=0)
        return memo[c]

    sys.setrecursionlimit(10_000)
    return max((depth(c) for c in set(comp_of.values())), default=0)


def folder_of(module: str, modules: dict[str, Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def folder_loops(g: dict[str, set[str]], modules: dict[str, Path]) -> list[list[str]]:
    fg: dict[str, set[str]] = defaultdict(set)
    for a, bs in g.items():
        fa = folder_of(a, modules)
        fg[fa]
        for b in bs:
            fb = folder_of(b, modules)
            if fa != fb and not fa.startswith(fb + ".") and not fb.startswith(fa + "."):
                fg[fa].add(fb)
    return circles(dict(fg))


def layer_of(module: str, renamed: dict[str, str] | None = None) -> str:
    if renamed is not None:
        module = renamed.get(module, module)
    if module in TOP:
        return "top"
    if any(module == g or module.startswith(g + ".") for g in GROUND):
        return "ground"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "?"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(imps: list[Import], modules: dict[str, Path]) -> list[str]:
    """``importer: target.name`` for each private name imported from another module, and each
    private module imported from outside its package."""
    out = []
    for i in imps:
        for n in i.names:
            if n and is_private(n) and i.target != i.importer:
                out.append(f"{i.importer}:{i.line}: {i.target}.{n}")
        parts = i.target.split(".")
        for k, part in enumerate(parts):
            if is_private(part):
                package = ".".join(parts[:k])
                if not (i.importer == package or i.importer.startswith(package + ".")):
                    out.append(f"{i.importer}:{i.line}: {i.target}")
                break
    return sorted(set(out))


def loose_modules(modules: dict[str, Path]) -> list[str]:
    folders = {folder_of(m, modules) for m in modules}
    with_sub = {f.rpartition(".")[0] for f in folders if "." in f}
    return sorted(m for m in modules if modules[m].name != "__init__.py" and folder_of(m, modules) in with_sub
                  and m not in TOP)


def _renames(rev: str) -> dict[str, str]:
    """``old module -> module now`` from git's rename detection between ``rev`` and the work tree
    (a deleted file git pairs with nothing: the one module now with its last name, if any)."""
    res = subprocess.run(["git", "diff", "-M", "--name-status", rev, "--", "rizz"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    out, gone = {}, []
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R") and parts[1].endswith(".py") and parts[2].endswith(".py"):
            out[module_name(Path(parts[1]))] = module_name(Path(parts[2]))
        elif parts[0] == "D" and parts[1].endswith(".py"):
            gone.append(module_name(Path(parts[1])))
    now = read_modules(ROOT)
    for old in gone:  # too changed for git to pair it: the one module now of the same last name, if any
        same = [m for m in now if m.rpartition(".")[2] == old.rpartition(".")[2] and m not in out.values()]
        if len(same) == 1:
            out[old] = same[0]
    return out


def _checkout(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", rev, "rizz", "data/trace-mini", "policies"], cwd=ROOT,
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(root: Path, renamed: dict[str, str] | None = None) -> dict[str, Any]:
    modules = read_modules(root)
    imps, g = graph(modules)
    now = read_modules(ROOT)
    layer = {m: layer_of(m, renamed) for m in modules}
    if renamed is not None:  # a file that stayed where it is keeps its module name
        layer = {m: (layer_of(m) if m in now and m not in renamed else layer[m]) for m in modules}
    rank = {n: k for k, n in enumerate(LAYERS)}
    upward = sorted({f"{i.importer} -> {i.target}" for i in imps
                     if i.target in modules and layer[i.importer] in rank and layer[i.target] in rank
                     and rank[layer[i.target]] > rank[layer[i.importer]]})
    fl = [i for i in imps if i.function_level]
    per_layer = Counter(layer.values())
    return {
        "files": len(modules),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules.values()),
        "files_per_layer": {k: per_layer[k] for k in (*LAYERS, "?") if per_layer[k]},
        "loose_modules": loose_modules(modules),
        "circles": circles(g),
        "floors": floors(g),
        "folder_loops": folder_loops(g, modules),
        "upward_imports": upward,
        "private_imports": private_imports(imps, modules),
        "function_level_imports": len(fl),
        "function_level_lazy": sum(i.lazy for i in fl),
        "function_level": sorted({f"{i.importer}:{i.line} -> {i.target}" for i in fl}),
    }


# -- the files one `rizz run` element passes through ------------------------------------------
_TRACE = r'''
import hashlib, json, os, sys, tempfile
from pathlib import Path
import numpy as np
root = Path(sys.argv[1]).resolve()
try:
    from rizz.adapters.models.base import Generation
    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy
except ImportError:  # before the layers: the same three from the old shell package (spelled so no rewrite moves them)
    import importlib
    old = "rizz." + "shell"
    Generation = importlib.import_module(old + ".models.base").Generation
    run_stream = importlib.import_module(old + ".run").run_stream
    load_policy = importlib.import_module(old + ".policy_file").load_policy

class Model:
    name, context_window, temperature = "stub:trace", 8192, 0.0
    def count_tokens(self, text): return len(text.split())
    def generate(self, messages, *, max_tokens, stop=(), rendering="chat"):
        text = messages[-1].content
        reply = ('{"function": "classify", "application": "stance"}' if "function" in text.split("\n")[0].lower()
                 or '"function"' in text else "A")
        return Generation(reply, len(text.split()), 1, 0.0, None, self.name, "stop")

class Embedder:
    name, dim = "hash-embedder", 16
    def embed(self, texts):
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8).astype(np.float32) + 1 for t in texts]
        return np.stack([r / np.linalg.norm(r) for r in rows]).astype(np.float32)

seen, on = set(), [False]
def prof(frame, event, arg):
    if on[0] and event == "call":
        seen.add(frame.f_code.co_filename)
def on_step(record, session):
    on[0] = record["step"] == 0  # after the 1st element: trace the 2nd
stream = root / "data" / "trace-mini" / "test.jsonl"
for warm in (True, False):  # the first run imports everything; the second is traced
    seen.clear(); on[0] = False
    with tempfile.TemporaryDirectory() as d:
        sys.setprofile(None if warm else prof)
        run_stream(stream, load_policy("default"), "default", Path(d) / "run", Model(), Embedder(), limit=2,
                   durability="os", on_step=on_step, log=lambda m: None)
        sys.setprofile(None)
pkg = (root / "rizz").resolve()
print(json.dumps(sorted(str(Path(f).resolve().relative_to(root)) for f in seen
                        if Path(f).resolve().is_relative_to(pkg))))
'''


def trace(root: Path, renamed: dict[str, str] | None) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(root))
    res = subprocess.run([sys.executable, "-c", _TRACE, str(root)], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    if res.returncode:
        raise SystemExit(f"trace failed:\n{res.stderr}")
    files = json.loads(res.stdout)
    mods = [module_name(Path(f)) for f in files]
    now = read_modules(ROOT)
    layers = Counter(layer_of(m) if (renamed is None or (m in now and m not in renamed)) else layer_of(m, renamed)
                     for m in mods)
    return {"files": len(files), "by_layer": {k: layers[k] for k in (*LAYERS, "?") if layers[k]}, "list": files}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="measure rizz/ at this commit (layers: where git's rename detection puts its files now)")
    ap.add_argument("--trace", action="store_true", help="also trace one `rizz run` element (a stand-in model, ~10 s)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--list", action="store_true", help="list every circle, upward, private and function-level import")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root, renamed = (ROOT, None) if not args.rev else (_checkout(args.rev, Path(tmp)), _renames(args.rev))
        out = measure(root, renamed)
        if args.trace:
            out["trace"] = trace(root, renamed)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"rizz/ at {args.rev or 'the work tree'}: {out['files']} files, {out['lines']} lines")
    print("files per layer:      " + ", ".join(f"{k} {v}" for k, v in out["files_per_layer"].items()))
    print(f"loose modules:        {len(out['loose_modules'])} (files beside subfolders)")
    print(f"circles:              {len(out['circles'])} ({sum(map(len, out['circles']))} modules)")
    print(f"floors:               {out['floors']}")
    print(f"folder loops:         {len(out['folder_loops'])}")
    print(f"upward imports:       {len(out['upward_imports'])}")
    print(f"private imports:      {len(out['private_imports'])}")
    print(f"function-level rizz imports: {out['function_level_imports']} ({out['function_level_lazy']} marked `# lazy:`)")
    if "trace" in out:
        t = out["trace"]
        print(f"one `rizz run` element passes through {t['files']} files: "
              + ", ".join(f"{k} {v}" for k, v in t["by_layer"].items()))
    if args.list:
        for key in ("circles", "folder_loops", "upward_imports", "private_imports", "function_level"):
            print(f"\n{key}:")
            for item in out[key]:
                print(f"  {' <-> '.join(item) if isinstance(item, list) else item}")
        if "trace" in out:
            print("\ntrace:\n  " + "\n  ".join(out["trace"]["list"]))


if __name__ == "__main__":
    main()
