"""Steps that did not fit the prompt budget are said by `rizz run` and `rizz bench` and counted
in report.md (a bench of BFCL at --budget 2048 scored its multi-turn episodes 0 without a word:
their tools alone were ~5,000 tokens, and nothing told the reader they never reached the model)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rizz.apps import cli

LONG = " ".join(["word"] * 120)  # over --budget 64 (the stub counts words as tokens)


def _stream(path: Path, long: int = 2) -> Path:
    """4 short questions (task ``short``), then ``long`` elements too long for --budget 64 (task ``long``)."""
    els = [{"id": f"s{i}", "input": f"What is {i} + {i}?", "reference": str(2 * i), "verifier": "exact_match",
            "metadata": {"task": "short"}} for i in range(4)]
    els += [{"id": f"l{i}", "input": f"{LONG} {i}", "reference": "x", "verifier": "exact_match",
             "metadata": {"task": "long"}} for i in range(long)]
    path.write_text("".join(json.dumps(e) + "\n" for e in els))
    return path


def _err(res) -> str:
    return res.output + (res.stderr if res.stderr_bytes is not None else "")


RUN_LINE = ("frozen: 2 of 6 steps did not fit the prompt budget (--budget 64) and were scored 0 without their prompt "
            "being sent to the model (long: 2); a larger --budget (up to the model's window, 4096 tokens, less the reply's) "
            "may let them run")


def test_run_says_which_steps_overflowed_and_a_finished_run_says_it_again(tmp_path, cli_stub):
    stream = _stream(tmp_path / "s.jsonl")
    args = ["run", str(stream), "--policy", "frozen", "--out", str(tmp_path / "r"), "--model", "fake:scripted", "--budget", "64"]
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 0, _err(res)
    assert RUN_LINE in _err(res)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["overflow"] == 2 and summary["per_task"]["long"] == {"n": 2, "mean_reward": 0.0}  # scoring as before
    res = CliRunner().invoke(cli.app, args)  # already finished: said again, the window from run.json
    assert res.exit_code == 0 and "already finished" in _err(res)
    assert RUN_LINE in _err(res)
    assert json.loads((tmp_path / "r" / "run.json").read_text())["context_window"] == 4096


def test_one_overflowed_step_is_said_in_the_singular(tmp_path, cli_stub):
    stream = _stream(tmp_path / "s.jsonl", long=1)
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--policy", "frozen", "--out", str(tmp_path / "r"),
                                       "--model", "fake:scripted", "--budget", "64"])
    assert res.exit_code == 0, _err(res)
    assert ("frozen: 1 of 5 steps did not fit the prompt budget (--budget 64) and was scored 0 without its prompt "
            "being sent to the model (long: 1);") in _err(res)


def test_a_run_without_overflow_says_nothing_of_it(tmp_path, cli_stub):
    stream = _stream(tmp_path / "s.jsonl", long=0)
    res = CliRunner().invoke(cli.app, ["run", str(stream), "--policy", "frozen", "--out", str(tmp_path / "r"),
                                       "--model", "fake:scripted", "--budget", "64"])
    assert res.exit_code == 0, _err(res)
    said = _err(res).replace(str(tmp_path), "TMP")  # the test's folder is named after it
    assert "did not fit" not in said and "overflow" not in said


def test_bench_says_it_per_policy_and_the_report_counts_them(tmp_path, cli_stub):
    stream = _stream(tmp_path / "s.jsonl")
    out = tmp_path / "b"
    res = CliRunner().invoke(cli.app, ["bench", str(stream), "-P", "frozen,default", "--out", str(out),
                                       "--model", "fake:scripted", "--budget", "64"])
    assert res.exit_code == 0, _err(res)
    err = _err(res)
    for p in ("frozen", "default"):
        assert RUN_LINE.replace("frozen:", f"{p}:") in err, err
    assert err.index("did not fit") > err.index("overflowed steps") and err.index("did not fit") < err.index("report:")
    md = (out / "report.md").read_text()
    assert "| wall s | overflowed steps |\n" in md
    assert "**Steps that did not fit the prompt budget** (overflowed: not sent to the model, or refused by its server, scored 0 " \
           "and counted as 0 in every mean): frozen 2 of 6 (long: 2); default 2 of 6 (long: 2). A larger prompt budget " \
           "(`--budget`, up to the model's window) may let them run.\n" in md
    assert "overflow_refused" not in json.loads((out / "results.json").read_text())["results"]["frozen"]
    assert "| long | 0.000 (n=2, 2 overflowed) | 0.000 (n=2, 2 overflowed) |" in md
    assert "| short | " in md and "(n=4, " not in md
    assert "- *overflowed steps*: steps whose input" in md
    res_json = json.loads((out / "results.json").read_text())
    assert res_json["results"]["frozen"]["per_task"]["long"]["overflow"] == 2
    assert "overflow" not in res_json["results"]["frozen"]["per_task"]["short"]


def test_bench_without_overflow_reports_as_before(tmp_path, cli_stub):
    stream = _stream(tmp_path / "s.jsonl", long=0)
    out = tmp_path / "b"
    res = CliRunner().invoke(cli.app, ["bench", str(stream), "-P", "frozen", "--out", str(out), "--model", "fake:scripted"])
    assert res.exit_code == 0, _err(res)
    said = _err(res).replace(str(tmp_path), "TMP")  # the test's folder is named after it
    assert "did not fit" not in said and "overflow" not in said
    md = (out / "report.md").read_text().split("## Side by side")[1]  # (the command above it names this test's file)
    assert "overflow" not in md and "| branches total/active | wall s |\n" in md and "| short | " in md and "(n=4) |" in md
    assert all("overflow" not in t for t in json.loads((out / "results.json").read_text())["results"]["frozen"]["per_task"].values())
