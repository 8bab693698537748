"""bfcl-eval is installed at the pinned version (--no-deps) and what rizz imports from it works."""

from __future__ import annotations

from importlib.metadata import version

from rizz.adapters.agents.bfcl_env import BFCL_VERSION, CATEGORIES, ast_checker, bfcl_environment, load_category


def test_pinned_version_and_imports() -> None:
    assert version("bfcl-eval") == BFCL_VERSION
    assert callable(ast_checker())
    sizes = {c: len(load_category(c)) for c in CATEGORIES}
    assert sizes == {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "simple_java": 100,
                     "simple_javascript": 50, "live_simple": 258, "live_multiple": 1053, "live_parallel": 16,
                     "live_parallel_multiple": 24, "irrelevance": 240, "live_irrelevance": 884, "live_relevance": 16,
                     "multi_turn_base": 200, "multi_turn_miss_func": 200, "multi_turn_miss_param": 200,
                     "multi_turn_long_context": 200}
    entry, _ = load_category("multi_turn_base")[0]
    env = bfcl_environment(entry)
    assert env.call("cd", {"folder": "document"}) == '{"current_working_directory": "document"}'
