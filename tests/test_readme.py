"""The README's Python examples run as written."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_the_two_examples():
    assert len(BLOCKS) == 2 and "Session.open(" in BLOCKS[0] and "rizz(Policy())" in BLOCKS[1]


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


def test_own_policy_example_checks_as_the_readme_says(tmp_path, monkeypatch):
    """The README's 3-line policy file and its `rizz policy check` line, run as written."""
    from typer.testing import CliRunner

    from rizz.shell import cli
    from rizz.shell.policy_file import load_policy

    (yaml_text,) = [b for b in re.findall(r"```yaml\n(.*?)```", README, flags=re.S) if "extends: default" in b]
    assert len(yaml_text.splitlines()) == 3
    (line,) = [l for l in README.splitlines() if l.startswith("rizz policy check my-policy.yaml ") and "prints" in l]
    command, _, comment = line.partition("#")
    (tmp_path / "my-policy.yaml").write_text(yaml_text)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli.app, command.split()[1:])
    assert res.exit_code == 0 and f'prints "{res.output.strip()}", exit 0' == comment.strip()
    pol = load_policy(tmp_path / "my-policy.yaml")
    assert (pol.name, pol.routing.snap_threshold) == ("my-policy", 0.85)
    assert pol.routing.jaccard_threshold == load_policy("default").routing.jaccard_threshold  # the rest is default's
