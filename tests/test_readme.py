"""The README's Python examples run as written (the policy-file example moved to docs/policies.md:
tests/test_docs.py runs it, with every other Python block of docs/)."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_the_two_examples():
    assert len(BLOCKS) == 2 and "Session.open(" in BLOCKS[0] and "rizz(load_policy(\"default\"))" in BLOCKS[1]


def test_session_example_runs_with_a_stub_model(capsys):
    """The live example exactly as written, but with the test stand-ins for model and embedder."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "shell"))
    from livekit import HashEmbedder, StubModel

    code = BLOCKS[0].replace('model="embedded"', "model=StubModel(), embedder=HashEmbedder()")
    assert code.count("StubModel()") == 2
    exec(compile(code, "README.md[session, stub]", "exec"), {"StubModel": StubModel, "HashEmbedder": HashEmbedder})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("q1 ") and out[0].endswith("['q1', 'q2']")
    assert out[-1] == "[] True"


def test_pure_core_example_runs(capsys):
    exec(compile(BLOCKS[1], "README.md[core]", "exec"), {})
    out = capsys.readouterr().out
    assert "['BranchSpawned', 'Routed', 'EpisodeWritten'" in out and "sha256:" in out


@pytest.mark.model
def test_session_example_runs(capsys):
    exec(compile(BLOCKS[0], "README.md[session]", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("['q1', 'q2']") and out[-1] == "[] True"
