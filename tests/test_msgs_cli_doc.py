"""docs/cli.md names every option of the commands it documents, as their ``--help`` lists them:
``rizz bench``'s ``--skip-bad``, ``--cache``, ``--snapshot-every`` and ``--durability`` and
``rizz streams check``'s ``--first`` were missing."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from rizz.apps.cli import app

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
#: The commands docs/cli.md documents (serve, sweep and --ray have pages of their own).
COMMANDS = ("run", "replay", "diff", "inspect", "convert", "bench", "demo", "view", "policy list", "policy check",
            "policy show", "policy diff", "streams build", "streams check")
ELSEWHERE = {("bench", "--ray"): "ray.md"}


def _command(path: str):
    cmd = typer.main.get_command(app)
    for name in path.split():
        cmd = cmd.commands[name]  # a group's (typer's click: not necessarily the click package's classes)
    return cmd


def _options(path: str) -> list[str]:
    return [max(p.opts, key=len) for p in _command(path).params
            if p.param_type_name == "option" and not p.hidden and p.name != "help"]


def test_every_option_of_the_documented_commands_is_in_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    said = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    missing = [(c, o) for c in COMMANDS for o in _options(c) if o not in said and (c, o) not in ELSEWHERE]
    assert missing == []
    for (c, o), page in ELSEWHERE.items():
        assert o in _options(c) and o in (DOC.parent / page).read_text(encoding="utf-8")


def test_the_bench_refusals_the_doc_quotes_are_the_bench_s() -> None:
    from rizz.lab.bench import refused_run_options

    why = refused_run_options("s.jsonl", ["frozen"], ray=True, skip_bad=False, snapshot_every=7, durability="os")
    assert why is not None and f"`{why}`" in " ".join(DOC.read_text(encoding="utf-8").split())
