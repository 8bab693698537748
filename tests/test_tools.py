"""The habits kept by tools (issue #26 item 6; docs/development.md "The habits"): ``ruff check``
over the repository and ``mypy`` over ``rizz/`` (strict on ``rizz/core``), with the settings of
``pyproject.toml``, fail the default test run on any finding. Without the tools (the `test` extra
brings them) the tests skip, except under CI, which must have them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    exe = BIN / name
    if not exe.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is missing from {BIN}; pip install -e '.[test]'")
        pytest.skip(f"{name} not installed in {BIN}; pip install -e '.[test]'")
    return str(exe)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    r = _run(_tool("ruff"), "check", "--no-cache", ".")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    r = _run(_tool("mypy"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout, r.stdout
