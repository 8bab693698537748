"""The documentation site (docs/, mkdocs.yml): it builds with warnings as errors, its Python
examples run as written, and the repository's Markdown links and `results/` citations resolve.

A Python block in ``docs/*.md`` runs in a fresh directory. A block that needs a real model is
marked by an HTML comment on the line before it, ``<!-- docs-test: model -->``: the default
run swaps the test stand-ins in for ``model="embedded"`` (as tests/test_readme.py does) or
skips the block, and the run marked ``model`` runs it as written. ``<!-- docs-test: skip -->``
marks a fragment that is never run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"(?:<!-- docs-test: (?P<mark>[a-z]+) -->\n)?```python\n(?P<code>.*?)```", re.S)
_STANDIN = 'model="embedded"'


def _blocks() -> list[tuple[str, int, str, str]]:
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        for i, m in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            out.append((str(page.relative_to(ROOT)), i, m.group("mark") or "", m.group("code")))
    return out


BLOCKS = _blocks()
_IDS = [f"{name}[{i}]" for name, i, _, _ in BLOCKS]


def _run(name: str, i: int, code: str, globs: dict) -> None:
    exec(compile(code, f"{name}[{i}]", "exec"), {"__name__": "__docs__", **globs})


def _mkdocs_or_skip() -> None:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError as e:  # the `test` extra brings them; CI must have them
        if os.environ.get("CI"):
            pytest.fail(f"the docs build needs the test extra's mkdocs packages: {e}")
        pytest.skip(f"mkdocs not installed ({e}); pip install -e '.[test]'")


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, a page missing from the nav or a docstring the
    API reference cannot render fails the build."""
    _mkdocs_or_skip()
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-5000:]
    assert "WARNING" not in log, log[-5000:]
    for page in ("index.html", "reference/core/index.html", "reference/session/index.html",
                 "reference/policy/index.html", "reference/verifiers/index.html", "reference/models/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    core = (tmp_path / "site" / "reference/core/index.html").read_text(encoding="utf-8")
    assert "step_with_events" in core and "StepInput" in core  # the reference is generated, not empty


def test_the_docs_have_python_examples() -> None:
    names = {name for name, *_ in BLOCKS}
    assert {"docs/live-sessions.md", "docs/concepts.md", "docs/policies.md"} <= names, names
    assert any(mark == "model" for *_, mark, _ in BLOCKS)


@pytest.mark.parametrize("name,i,mark,code", BLOCKS, ids=_IDS)
def test_docs_example_runs(name: str, i: int, mark: str, code: str, tmp_path: Path, monkeypatch, capsys) -> None:
    if mark == "skip":
        pytest.skip("marked <!-- docs-test: skip -->")
    monkeypatch.chdir(tmp_path)
    globs: dict = {}
    if mark == "model":
        if _STANDIN not in code:
            pytest.skip("needs a real model (run with -m model)")
        sys.path.insert(0, str(ROOT / "tests" / "shell"))
        from livekit import HashEmbedder, StubModel

        code = code.replace(_STANDIN, "model=StubModel(), embedder=HashEmbedder()")
        globs = {"StubModel": StubModel, "HashEmbedder": HashEmbedder}
    _run(name, i, code, globs)
    capsys.readouterr()


@pytest.mark.model
@pytest.mark.parametrize("name,i,code", [(n, i, c) for n, i, m, c in BLOCKS if m == "model"],
                         ids=[f"{n}[{i}]" for n, i, m, _ in BLOCKS if m == "model"])
def test_docs_model_example_runs_as_written(name: str, i: int, code: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _run(name, i, code, {})


def test_the_live_session_example_prints_what_the_page_says(tmp_path: Path, monkeypatch, capsys) -> None:
    (name, i, _, code), = [b for b in BLOCKS if b[0] == "docs/live-sessions.md" and "Session.open(" in b[3] and "state_at(" not in b[3]]
    sys.path.insert(0, str(ROOT / "tests" / "shell"))
    from livekit import HashEmbedder, StubModel

    monkeypatch.chdir(tmp_path)
    _run(name, i, code.replace(_STANDIN, "model=StubModel(), embedder=HashEmbedder()"),
         {"StubModel": StubModel, "HashEmbedder": HashEmbedder})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("q1 ") and out[0].endswith("['q1', 'q2']") and out[-1] == "[] True"


def test_the_state_at_example_agrees_with_its_diff_as_the_page_says(tmp_path: Path, monkeypatch, capsys) -> None:
    """docs/live-sessions.md's state_at / diff_run / branch_rows example (stand-ins for the model
    and the embedder): its verdicts check the answers, the diff's written item is the one the
    states' branch rows gained, the RUN_DIR's last state is the session's, and the output the page
    shows (the real model's) ends as the page says, in the lines the example prints."""
    (name, i, _, code), = [b for b in BLOCKS if b[0] == "docs/live-sessions.md" and "state_at(" in b[3]]
    sys.path.insert(0, str(ROOT / "tests" / "shell"))
    from livekit import HashEmbedder, StubModel

    from rizz.core import digest
    from rizz.engine.run import replay

    monkeypatch.chdir(tmp_path)
    globs = {"StubModel": StubModel, "HashEmbedder": HashEmbedder}
    code = code.replace(_STANDIN, "model=StubModel(), embedder=HashEmbedder()")
    exec(compile(code, f"{name}[{i}]", "exec"), globs)
    out = capsys.readouterr().out.splitlines()
    row = re.compile(r"b0 episodes (\d+) -> (\d+) anti-patterns (\d+) -> (\d+)")
    before, after, app = globs["before"], globs["after"], globs["app"]
    b0, a0 = before.branches["b0"], after.branches["b0"]
    m = row.fullmatch(out[-1])
    assert m and tuple(map(int, m.groups())) == (len(b0.episodes), len(a0.episodes), len(b0.anti_patterns), len(a0.anti_patterns))
    # the stand-in answers a letter: the check fails it, and the diff and the rows say an anti-pattern was written
    assert any(line.startswith("  + anti-pattern in b0: What is 7 + 5? ⇏ ") for line in out[:-1])
    assert not any("episode written" in line for line in out)
    assert len(a0.anti_patterns) == len(b0.anti_patterns) + 1 and len(a0.episodes) == len(b0.episodes)
    assert "after step 1: 1 branch (1 active)" in out
    assert digest(after) == replay(app, write_summary=False)["state_digest"]
    page = (DOCS / "live-sessions.md").read_text(encoding="utf-8")
    (said,) = re.findall(r"It ends `([^`]+)`", page)
    shown = page[page.index("```text\nstep 1 [What is 7 + 5?]"):].split("```")[1].splitlines()[1:]
    assert shown[-1] == said and row.fullmatch(said)
    assert [ln.split(" ")[0] for ln in shown] == [ln.split(" ")[0] for ln in out]


def test_own_policy_example_checks_as_the_page_says(tmp_path: Path, monkeypatch) -> None:
    """docs/policies.md's 3-line policy file and its `rizz policy check` line, run as written."""
    from typer.testing import CliRunner

    from rizz.apps import cli
    from rizz.formats.policy_file import load_policy

    page = (DOCS / "policies.md").read_text(encoding="utf-8")
    (yaml_text,) = [b for b in re.findall(r"```yaml\n(.*?)```", page, flags=re.S) if "extends: default" in b]
    assert len(yaml_text.splitlines()) == 3
    (line,) = [l for l in page.splitlines() if l.startswith("rizz policy check my-policy.yaml ") and "prints" in l]
    command, _, comment = line.partition("#")
    (tmp_path / "my-policy.yaml").write_text(yaml_text)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli.app, command.split()[1:])
    assert res.exit_code == 0 and f'prints "{res.output.strip()}", exit 0' == comment.strip()
    pol = load_policy(tmp_path / "my-policy.yaml")
    assert (pol.name, pol.routing.snap_threshold) == ("my-policy", 0.85)
    assert pol.routing.jaccard_threshold == load_policy("default").routing.jaccard_threshold  # the rest is default's


# --- links outside the site: README, CHANGELOG, results/, specs/ -------------------------------

_MD_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+?)(?:#[^)]*)?\)")
_RESULTS = re.compile(r"results/(20\d\d-\d\d-\d\d-[A-Za-z0-9.*-]+?\.md)")
_TEXT = ("*.md", "*.py", "*.yaml", "*.json", "Makefile", "*.toml")


def _repo_text_files() -> list[Path]:
    skip = {".git", ".venv", ".venv-peers", "runs", "site", "node_modules", "data", "__pycache__"}
    out = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".venv")]
        out += [Path(top) / f for f in files if any(Path(f).match(pat) for pat in _TEXT)]
    return sorted(out)


def test_markdown_links_outside_the_site_resolve() -> None:
    bad = []
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "results").glob("*.md")),
             *sorted((ROOT / "specs").glob("*.md"))]
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in _MD_LINK.findall(text):
            if not (page.parent / target).exists():
                bad.append(f"{page.relative_to(ROOT)} -> {target}")
    assert bad == []


def test_every_cited_results_file_exists() -> None:
    """A `results/DATE-NAME.md` named anywhere (docs, specs, code, policies, tests) is a file."""
    names = {p.name for p in (ROOT / "results").glob("*.md")}
    bad = []
    for f in _repo_text_files():
        for cited in _RESULTS.findall(f.read_text(encoding="utf-8", errors="replace")):
            if "*" in cited:
                ok = any(re.fullmatch(cited.replace(".", r"\.").replace("*", ".*"), n) for n in names)
            else:
                ok = cited in names
            if not ok:
                bad.append(f"{f.relative_to(ROOT)}: results/{cited}")
    assert bad == []


def test_nothing_cites_the_removed_spec_pages() -> None:
    """specs/results.md and specs/benchmarks.md became results/ (results/README.md maps the old
    sections); CHANGELOG.md and results/ may name them as history."""
    bad = []
    for f in _repo_text_files():
        rel = f.relative_to(ROOT)
        if rel.parts[0] == "results" or rel.name in ("CHANGELOG.md", "test_docs.py"):
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if "specs/results.md" in line or "specs/benchmarks.md" in line:
                bad.append(f"{rel}:{n}")
    assert bad == []
