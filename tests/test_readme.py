"""The README's Python examples run as written."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_the_two_examples():
    assert len(BLOCKS) == 2 and "Session(" in BLOCKS[0] and "rizz(Policy())" in BLOCKS[1]


def test_pure_core_example_runs(capsys):
    exec(compile(BLOCKS[1], "README.md[core]", "exec"), {})
    out = capsys.readouterr().out
    assert "['BranchSpawned', 'Routed', 'EpisodeWritten'" in out and "sha256:" in out


@pytest.mark.model
def test_session_example_runs(capsys):
    exec(compile(BLOCKS[0], "README.md[session]", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "1 branch(es)"
