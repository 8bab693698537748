"""``rizz streams check`` on a binary or other non-JSONL file printed an error line per line
(hundreds for a .png). It now prints at most ``ERRORS_SHOWN`` error lines a file, then one line
counting the rest that says when the file does not look like JSONL; ``--all`` prints every one."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rizz.apps.cli_streams import app as streams_app
from rizz.formats.stream_checks import ERRORS_SHOWN, not_jsonl


def _check(*args: str):
    return CliRunner().invoke(streams_app, ["check", *args])


def _binary(path: Path, lines: int) -> Path:
    """``lines`` lines of bytes that are neither UTF-8 nor JSON, with NUL bytes, as a .png has."""
    path.write_bytes(b"".join(b"\x89PNG\x00\x1a\xff" + bytes([i % 200 + 32]) + b"\n" for i in range(lines)))
    return path


def _element(i: int, **extra) -> str:
    return json.dumps({"id": f"q{i}", "input": "What is 2 + 2?", "reference": "4", "verifier": "exact_match", **extra})


def test_the_bound_is_twenty_and_help_says_it() -> None:
    assert ERRORS_SHOWN == 20
    shown = " ".join(_check("--help").output.replace("│", " ").replace("``", "").split())
    assert "up to 20 error lines a file (--all: every one)" in shown and "(default: the first 20 of a file, then" in shown


def test_a_binary_file_is_twenty_error_lines_and_one_summary_calling_it_not_jsonl(tmp_path: Path) -> None:
    path = _binary(tmp_path / "view.png", 300)
    res = _check(str(path))
    assert res.exit_code == 1
    err = res.stderr.splitlines()
    assert len(err) == ERRORS_SHOWN + 2, len(err)
    assert all(line.startswith(f"error: {path}:{i + 1}: not UTF-8 text at byte ") for i, line in enumerate(err[:ERRORS_SHOWN]))
    assert err[ERRORS_SHOWN] == (f"error: {path}: 280 more errors on 280 more lines not shown (the first 20 are; --all prints every one); "
                                 "the file does not look like JSONL: 300 of 300 non-blank lines are not JSON objects, "
                                 "and it holds NUL bytes (a binary file?)")
    assert err[-1] == f"error: {path}: no stream elements: all 300 non-blank lines are bad"
    every = _check("--all", str(path))
    assert every.exit_code == 1 and len(every.stderr.splitlines()) == 300 + 2
    assert every.stderr.splitlines()[300] == (f"error: {path}: the file does not look like JSONL: 300 of 300 non-blank lines are "
                                              "not JSON objects, and it holds NUL bytes (a binary file?)")


def test_an_ordinary_stream_keeps_every_error_of_each_line_up_to_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [_element(0)] + [_element(i, verifier="exact", context_only="no") for i in range(1, 16)]  # 15 lines, 2 errors each
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = _check(str(path))
    assert res.exit_code == 1
    err = res.stderr.splitlines()
    assert [line.split(": field ")[0] for line in err[:ERRORS_SHOWN]] == [f"error: {path}:{n}" for n in range(2, 12) for _ in (0, 1)]
    # the 11th bad line (line 12) and after: no verdict on the file's format, 20 of 30 errors shown
    assert err[ERRORS_SHOWN:] == [f"error: {path}: 10 more errors on 5 more lines not shown (the first 20 are; --all prints every one)"]
    assert res.stdout == f"{path}: 1 element ok, 15 bad (30 errors); - 1; longest 14 chars\n"
    every = _check("--all", str(path))
    assert every.exit_code == 1 and len(every.stderr.splitlines()) == 30 and "not shown" not in every.stderr


def test_a_bad_line_cut_at_the_bound_counts_only_its_errors_not_a_line_more(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    # 7 lines of 3 errors: the 7th line's first error is not shown, nor its others (one more line, 1 + 2 errors)
    bad = [_element(i, verifier="exact", context_only="no", answer="4") for i in range(7)]
    path.write_text("\n".join([_element(99), *bad]) + "\n", encoding="utf-8")
    err = _check(str(path)).stderr.splitlines()
    assert len(err) == ERRORS_SHOWN + 1
    assert err[-1] == f"error: {path}: 1 more error not shown (the first 20 are; --all prints every one)"


def test_a_text_file_of_other_lines_is_called_not_jsonl_below_the_bound_too_but_not_with_first(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b,c\n1,2,3\n" + _element(0) + "\n", encoding="utf-8")
    res = _check(str(path))
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == f"error: {path}: the file does not look like JSONL: 2 of 3 non-blank lines are not JSON objects"
    first = _check("--first", str(path))  # the rest of the file unread: no verdict on it
    assert first.exit_code == 1 and first.stderr.splitlines() == [f"error: {path}:1: invalid JSON at column 1: Expecting value"]


def test_half_the_lines_bad_is_not_called_not_jsonl() -> None:
    assert not_jsonl(4, 2) is None and not_jsonl(0, 0) is None
    assert not_jsonl(3, 2) == "the file does not look like JSONL: 2 of 3 non-blank lines are not JSON objects"


def test_a_one_line_stream_with_one_bad_byte_keeps_its_line_error_and_is_not_called_not_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_bytes(_element(0).replace("2 + 2", "2 \xff 2").encode("latin-1") + b"\n")  # one byte that is not UTF-8
    before = path.read_bytes()
    res = _check(str(path))
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [f"error: {path}:1: not UTF-8 text at byte 34 of the line",
                                       f"error: {path}: no stream elements: the only non-blank line is bad"]
    assert path.read_bytes() == before
    assert not_jsonl(1, 1) is None and not_jsonl(2, 2) is None  # too few lines to judge the file by
