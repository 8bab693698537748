"""The layers of ``rizz/`` and their import contract (issue #26 item 1; docs/development.md).

Two checks of the same rule, each failing the build on its own:

* import-linter's contracts in ``pyproject.toml`` (``[tool.importlinter]``): the layers
  (``apps > lab > engine > adapters > store > formats > core | extras > errors``), the order
  inside the adapters, the lab's independent parts, no cycle among the modules or folders of any
  folder, and no extra's package in the base install;
* the import graph read here with ``ast`` (``benchmarks/import_graph.py``, which also prints the
  figures of ``results/2026-12-02-layers.md``): no circle of modules, no upward import (the
  top package ``rizz`` counts as the top layer), no ``_private`` name imported from another
  module (tests may; the rule is for ``rizz/``), and a function-level import of ``rizz`` only
  where a ``# lazy:`` comment says which heavy optional dependency it defers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import import_graph as ig  # noqa: E402


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], list[ig.Import], dict[str, set[str]]]:
    modules = ig.read_modules(ROOT)
    imports, g = ig.graph(modules)
    return modules, imports, g


def test_import_linter_contracts_are_kept() -> None:
    """In a child process: ``lint_imports`` configures logging with ``logging.config.dictConfig``,
    which closes every handler of the process (pytest's log capture and log file among them) and
    disables every existing logger; in pytest's own process that crashed a later report
    ("I/O operation on closed file", "lost sys.stderr") after the shell tests had run."""
    try:
        import importlinter  # noqa: F401
    except ImportError as e:  # the `test` extra brings it; CI must have it
        if os.environ.get("CI"):
            pytest.fail(f"the layers' contracts need the test extra's import-linter: {e}")
        pytest.skip(f"import-linter not installed ({e}); pip install -e '.[test]'")
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, no_logo=True))")
    # cwd ROOT: lint_imports puts the working directory first on sys.path, so this checkout's rizz
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_every_module_is_in_a_layer(graph) -> None:
    modules, _, _ = graph
    assert [m for m in modules if ig.layer_of(m) == "?"] == []
    assert not (ROOT / "rizz" / "shell").exists()


def test_no_circle_of_imports(graph) -> None:
    _, _, g = graph
    assert ig.circles(g) == []
    assert ig.folder_loops(g, graph[0]) == []


def test_no_upward_import(graph) -> None:
    _, imports, _ = graph
    rank = {name: k for k, name in enumerate(ig.LAYERS)}
    up = [f"{i.importer}:{i.line} -> {i.target}" for i in imports
          if rank[ig.layer_of(i.target)] > rank[ig.layer_of(i.importer)]]
    assert up == []


def test_no_private_name_crosses_a_module(graph) -> None:
    modules, imports, _ = graph
    assert ig.private_imports(imports, modules) == []


def test_a_function_level_import_says_what_heavy_dependency_it_defers(graph) -> None:
    _, imports, _ = graph
    unmarked = [f"{i.importer}:{i.line} -> {i.target}" for i in imports if i.function_level and not i.lazy]
    assert unmarked == [], "hoist these to the module's top, or say '# lazy: <the heavy optional dependency>' above them"


def test_the_graph_reader_sees_function_level_and_private_imports(tmp_path: Path) -> None:
    """The checks above would pass on nothing: the reader must see what they forbid."""
    pkg = tmp_path / "rizz"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "store").mkdir()
    for f in ("__init__.py", "engine/__init__.py", "store/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "engine" / "fold.py").write_text("from rizz.store.log import RunDir\n_x = 1\n")
    (pkg / "store" / "log.py").write_text(
        "class RunDir:\n    pass\n\n\ndef f():\n    from rizz.engine.fold import _x\n    return _x\n")
    modules = ig.read_modules(tmp_path)
    imports, g = ig.graph(modules)
    assert ig.circles(g) == [["rizz.engine.fold", "rizz.store.log"]]
    assert ig.private_imports(imports, modules) == ["rizz.store.log:6: rizz.engine.fold._x"]
    (fl,) = [i for i in imports if i.function_level]
    assert (fl.importer, fl.target, fl.lazy) == ("rizz.store.log", "rizz.engine.fold", False)
    assert ig.layer_of("rizz.store.log") == "store" and ig.layer_of("rizz.engine.fold") == "engine"
