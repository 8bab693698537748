"""Stream builders: shipped slices parse and regenerate byte-identically; builder semantics.

The shipped-slice checks run on a fresh clone. The rest needs the benchmark data
(``$RIZZ_DATA_ROOT`` or ``../shared/data`` next to the repo) and is skipped without it.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rizz.apps.cli_streams import app, resolve_data_root
from rizz.formats.streams import read_stream
from rizz.lab.builders import BuildError, BuildOptions, build, interleave, prompt_chars

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"
SLICES = {
    "trace-mini/test.jsonl": {"FOMC": 40, "ScienceQA": 40, "NumGLUE-cm": 40, "20Minuten": 40,
                              "C-STANCE": 40, "NumGLUE-ds": 40},
    "trace-mini/train.jsonl": {"C-STANCE": 20, "FOMC": 20, "ScienceQA": 20, "NumGLUE-cm": 20,
                               "NumGLUE-ds": 20, "20Minuten": 20},
    "streambench-mini/test.jsonl": {"HotpotQA": 15, "HumanEval": 15, "FOMC": 15, "C-STANCE": 15},
    "locomo-mini/test.jsonl": {"LoCoMo": 52},
    "interference-mini/test.jsonl": {t: 10 for t in ("C-STANCE", "HumanEval", "ScienceQA", "FOMC", "Py150", "NumGLUE-cm", "NumGLUE-ds")},
    "interference-mini/train.jsonl": {t: 10 for t in ("C-STANCE", "HumanEval", "ScienceQA", "FOMC", "Py150", "NumGLUE-cm", "NumGLUE-ds")},
}


def _data_root() -> Path | None:
    for cand in (os.environ.get("RIZZ_DATA_ROOT"), REPO.parent / "shared" / "data"):
        if cand and Path(cand, "trace").is_dir():
            return Path(cand)
    return None


ROOT = _data_root()
needs_data = pytest.mark.skipif(ROOT is None, reason="benchmark data (../shared/data) not present")


def _commands() -> list[list[str]]:
    cmds = []
    for source in sorted(DATA.glob("*/SOURCE.md")):
        for line in source.read_text(encoding="utf-8").splitlines():
            if line.startswith("rizz streams build "):
                cmds.append(shlex.split(line)[2:])  # from "build" on
    return cmds


@pytest.mark.parametrize("rel", sorted(SLICES))
def test_shipped_slice_parses(rel: str) -> None:
    path = DATA / rel
    elements = read_stream(path).elements
    counts: dict[str, int] = {}
    for el in elements:
        counts[el.task] = counts.get(el.task, 0) + 1
    assert counts == SLICES[rel]
    assert path.stat().st_size < 1_000_000
    assert max(prompt_chars(el) for el in elements) < 10_000


def test_shipped_data_is_small() -> None:
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 5_000_000


def test_source_md_names_every_slice() -> None:
    outs = sorted(args[args.index("--out") + 1] for args in _commands())
    assert outs == sorted(f"data/{rel}" for rel in SLICES)


def test_locomo_slice_context_precedes_questions() -> None:
    elements = read_stream(DATA / "locomo-mini/test.jsonl").elements
    flags = [el.context_only for el in elements]
    assert flags == [True] * 32 + [False] * 20
    assert {el.scope for el in elements} == {"conv-41"}
    assert all(el.verifier is None and el.reference is None for el in elements[:32])
    assert all(el.verifier == "token_f1" and el.shape == "span" for el in elements[32:])
    assert elements[0].metadata["time"] == "2022-12-17T11:01:00"  # "11:01 am on 17 December, 2022" in the source
    assert elements[0].input.split("\n")[0].endswith("session 1, 11:01 am on 17 December, 2022")


def test_locomo_times_become_iso_8601() -> None:
    from rizz.lab.builders._common import BuildError
    from rizz.lab.builders.locomo import iso_time

    assert iso_time("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
    assert iso_time("12:05 am on 1 January, 2020") == "2020-01-01T00:05:00"
    assert iso_time("12:30 pm on 3 March, 2021") == "2021-03-03T12:30:00"
    with pytest.raises(BuildError, match="not of the form"):
        iso_time("8 May 2023")


@needs_data
@pytest.mark.parametrize("args", _commands(), ids=lambda a: a[a.index("--out") + 1])
def test_shipped_slice_regenerates_byte_identically(tmp_path, args: list[str]) -> None:
    i = args.index("--out")
    shipped = REPO / args[i + 1]
    args = args[:i + 1] + [str(tmp_path / "out.jsonl")] + args[i + 2:] + ["--data-root", str(ROOT)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.jsonl").read_bytes() == shipped.read_bytes()


def test_interleave_keeps_group_order_and_is_seeded() -> None:
    groups = [["a0", "a1", "a2"], ["b0", "b1"], ["c0"]]
    mixed = interleave(groups, seed=0)
    assert sorted(mixed) == sorted(x for g in groups for x in g)
    for g in groups:
        assert [x for x in mixed if x in g] == g
    assert mixed == interleave(groups, seed=0)
    assert any(interleave(groups, seed=s) != mixed for s in range(1, 6))


def test_missing_data_root_is_a_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("RIZZ_DATA_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BuildError, match="only needed to build full-size streams.*data/"):
        resolve_data_root(None)
    result = CliRunner().invoke(app, ["build", "trace", "--out", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert not (tmp_path / "x.jsonl").exists()


def test_bad_options_rejected() -> None:
    with pytest.raises(BuildError, match="--split"):
        BuildOptions(split="validation")
    with pytest.raises(BuildError, match="--split dev: only tau-bench"):
        build("humaneval", Path("."), BuildOptions(split="dev"))
    with pytest.raises(BuildError, match="--domain is for tau-bench only"):
        build("humaneval", Path("."), BuildOptions(domain="retail"))
    with pytest.raises(BuildError, match="--per-task"):
        BuildOptions(per_task=0)
    with pytest.raises(BuildError, match="unknown benchmark"):
        build("mmlu", Path("."), BuildOptions())


@needs_data
def test_trace_sequential_follows_trace_order() -> None:
    res = build("trace", ROOT, BuildOptions(split="test", per_task=3))
    tasks = [el.task for el in res.elements]
    assert tasks == [t for t in ("C-STANCE", "FOMC", "MeetingBank", "Py150", "ScienceQA",
                                 "NumGLUE-cm", "NumGLUE-ds", "20Minuten") for _ in range(3)]
    by_task = {el.task: el for el in res.elements}
    assert (by_task["FOMC"].shape, by_task["FOMC"].verifier) == ("letter", "exact_match")
    assert (by_task["ScienceQA"].shape, by_task["ScienceQA"].verifier) == ("letter", "first_char")
    assert (by_task["Py150"].shape, by_task["Py150"].verifier) == ("text", "fuzzy_ratio")
    assert (by_task["MeetingBank"].shape, by_task["MeetingBank"].verifier) == ("text", "rouge_l")
    assert (by_task["NumGLUE-ds"].shape, by_task["NumGLUE-ds"].verifier) == ("number", "exact_match")
    minuten = by_task["20Minuten"]
    assert minuten.verifier == "sari" and minuten.metadata["source"] in minuten.input
    assert minuten.input.endswith("\n\nSimplification:") and minuten.instruction is None
    assert res.elements[0].id == "c-stance-test-0000" and res.elements[0].reference == "B"


@needs_data
def test_trace_long_inputs_reported_never_cut() -> None:
    full = build("trace", ROOT, BuildOptions(tasks=("MeetingBank",)))
    assert any("exceed 24000 prompt chars (kept, not cut)" in n for n in full.notes)
    assert max(prompt_chars(el) for el in full.elements) == 163532
    capped = build("trace", ROOT, BuildOptions(tasks=("MeetingBank",), max_input_chars=24000))
    dropped = len(full.elements) - len(capped.elements)
    assert dropped == 14
    assert any(f"dropped {dropped} of 75 elements longer than --max-input-chars 24000" in n
               for n in capped.notes)


@needs_data
def test_trace_train_dedupes_and_skips_meetingbank() -> None:
    res = build("trace", ROOT, BuildOptions(split="train"))
    counts = res.per_task()
    assert "MeetingBank" not in counts and counts["NumGLUE-cm"] == 256
    kept = build("trace", ROOT, BuildOptions(split="train", tasks=("NumGLUE-cm",), keep_duplicates=True))
    assert len(kept.elements) == 500


@needs_data
def test_hotpotqa_humaneval_splits_and_fields() -> None:
    sizes = {s: len(build("hotpotqa", ROOT, BuildOptions(split=s)).elements) for s in ("train", "eval", "test")}
    assert sizes == {"train": 16, "eval": 8, "test": 59}
    el = build("hotpotqa", ROOT, BuildOptions(split="train", per_task=1)).elements[0]
    assert el.id == "hotpotqa-5a8b57f25542995d1e6f1371" and el.reference == "yes"
    assert len(el.evidence) == 10 and el.evidence[0].startswith("Title: Ed Wood (film)\nParagraph: Ed Wood is")
    he = build("humaneval", ROOT, BuildOptions(split="test")).elements
    assert (len(he), he[0].id, he[-1].id) == (93, "humaneval-039", "humaneval-131")
    assert he[0].verifier == "code_exec" and "def check(candidate)" in he[0].metadata["tests"]
    assert he[0].input.endswith(he[0].metadata["prompt"]) and he[0].shape == "code"


@needs_data
def test_streambench_mix_is_seeded() -> None:
    a = build("streambench", ROOT, BuildOptions(per_task=5, seed=1))
    b = build("streambench", ROOT, BuildOptions(per_task=5, seed=2))
    assert a.per_task() == {t: 5 for t in a.per_task()} and len(a.per_task()) == 4
    assert [e.id for e in a.elements] != [e.id for e in b.elements]
    assert sorted(e.id for e in a.elements) == sorted(e.id for e in b.elements)


@needs_data
def test_interference_test_split_is_held_out_from_the_trace_slice() -> None:
    trace_ids = {el.id for el in read_stream(DATA / "trace-mini/test.jsonl").elements}
    built = build("interference", ROOT, BuildOptions(split="test", per_task=5, tasks=("numbers", "letters")))
    ids = [el.id for el in built.elements]
    assert len(ids) == 25 and not trace_ids & set(ids)
    assert {el.task for el in built.elements} == {"NumGLUE-cm", "NumGLUE-ds", "C-STANCE", "FOMC", "ScienceQA"}
    assert min(int(i.rsplit("-", 1)[1]) for i in ids if i.startswith("fomc")) >= 40


@needs_data
def test_interference_unknown_group_is_named() -> None:
    with pytest.raises(BuildError, match="unknown interference group 'nums'"):
        build("interference", ROOT, BuildOptions(split="test", tasks=("nums",)))
