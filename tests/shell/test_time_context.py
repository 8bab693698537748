"""Issue #12 §4: time-aware scoped context (``metadata.time``).

In scope ``bo`` the newer fact arrives first and the older second; the prompt for the question
must show each item's time and order them by the actual instant, identically under any host
``TZ``; an unparseable time is refused when the stream is read, with ``file:line``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rizz.core import Policy
from rizz.engine.session import Session
from rizz.formats.streams import StreamElement, StreamError, read_stream, write_stream
from tests.shell.stubs import StubBackend  # by package path: the TZ test imports this module in a child
from tests.shell.test_walls import BowEmbedder

ROOT = Path(__file__).resolve().parents[2]


class _Echo(StubBackend):
    """Minimal backend: labels every input answer-question/work-history and answers "6"."""

    name = "fake:echo"

    def reply(self, messages) -> str:
        return '{"function": "answer-question", "application": "work-history"}' if '"function"' in messages[-1].content else "6"


def _ctx(i: str, text: str, time, scope: str = "bo") -> StreamElement:
    return StreamElement(i, text, metadata={"scope": scope, "time": time}, context_only=True)


BO = [
    _ctx("c1", "Bo: As of today I have worked at Initech for 6 years.", "2026-05-24"),
    _ctx("c2", "Bo: I have worked at Initech for 5 years.", "2025-05-24"),
]
# the same evening in three spellings: +02:00 01:00 is 23:00 UTC the day before, naive is UTC
ZONES = [
    _ctx("z1", "Zed: note written in Berlin.", "2026-05-24T01:00:00+02:00", "zed"),
    _ctx("z2", "Zed: note written in London.", "2026-05-23T23:30:00Z", "zed"),
    _ctx("z3", "Zed: note with no offset.", "2026-05-23T23:15", "zed"),
    _ctx("z4", "Zed: note as a Unix time.", 1779577200, "zed"),  # 2026-05-23T23:00:00 UTC, ties z1 by instant
]


def question_prompt(context: list[StreamElement], question: str, scope: str) -> str:
    s = Session(Policy(), _Echo(), BowEmbedder())
    for el in context:
        s.answer(el)  # context-only: stored when answered
    p = s.answer(StreamElement("q", question, metadata={"scope": scope, "shape": "number"}, reference="6", verifier="exact_match"))
    return p.prompt.text


def test_bo_prompt_shows_times_in_the_order_of_the_instants() -> None:
    text = question_prompt(BO, "How many years has Bo worked at Initech?", "bo")
    assert text.startswith(
        "Context:\n[2025-05-24] Bo: I have worked at Initech for 5 years.\n\n"
        "[2026-05-24] Bo: As of today I have worked at Initech for 6 years.\n\n"
    ), text


def test_time_zones_are_honoured_and_naive_times_are_utc() -> None:
    text = question_prompt(ZONES, "What did Zed note?", "zed")
    order = [line for line in text.split("\n") if line.startswith("[")]
    assert order == [
        "[2026-05-24T01:00:00+02:00] Zed: note written in Berlin.",
        "[2026-05-23T23:00:00+00:00] Zed: note as a Unix time.",
        "[2026-05-23T23:15:00] Zed: note with no offset.",
        "[2026-05-23T23:30:00+00:00] Zed: note written in London.",
    ], text


def test_prompts_are_identical_under_any_host_tz() -> None:
    code = (
        "from tests.shell.test_time_context import question_prompt, BO, ZONES\n"
        "print(question_prompt(BO, 'How many years has Bo worked at Initech?', 'bo'))\n"
        "print(question_prompt(ZONES, 'What did Zed note?', 'zed'))\n"
    )
    outs = []
    for tz in ("UTC", "Pacific/Kiritimati", "America/Los_Angeles"):
        env = dict(os.environ, TZ=tz, PYTHONPATH=str(ROOT))
        outs.append(subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    assert outs[0] == outs[1] == outs[2] and "[2025-05-24] Bo:" in outs[0]


@pytest.mark.parametrize("bad", ["11:01 am on 17 December, 2022", "2026-13-01", "yesterday", "2026-05-24T25:00"])
def test_an_unparseable_time_is_refused_at_read_time_with_file_and_line(tmp_path, bad) -> None:
    path = tmp_path / "s.jsonl"
    write_stream(path, BO)
    lines = path.read_text().splitlines()
    lines.append(lines[0].replace('"c1"', '"c3"').replace('"2026-05-24"', f'"{bad}"'))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(StreamError) as err:
        read_stream(path)
    assert str(err.value).startswith(f"{path}:3: field 'metadata.time': expected an ISO 8601 date")
    assert err.value.line == 3 and err.value.field == "metadata.time"


def test_untimed_context_keeps_todays_prompt() -> None:
    plain = [StreamElement(e.id, e.input, metadata={"scope": "bo"}, context_only=True) for e in BO]
    text = question_prompt(plain, "How many years has Bo worked at Initech?", "bo")
    assert "[" not in text.split("\n\n")[0] and "6 years" in text and "5 years" in text


def _timed_stream(path: Path, n: int) -> Path:
    """The arithmetic stream with a time on every element (context lines restated out of order)."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import arithmetic_stream

    lines = [json.loads(x) for x in arithmetic_stream(path, n).read_text().splitlines()]
    for i, x in enumerate(lines):
        x["metadata"]["time"] = f"2026-05-{24 - i % 5:02d}T09:00:00+02:00"
        if i % 3 == 2:
            x.update(id=f"c{i}", input=f"Note: the user likes {i % 4}.", context_only=True)
            x.pop("reference", None), x.pop("verifier", None)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_snapshot_written_before_instants_is_rebuilt_from_the_log(tmp_path) -> None:
    """The core cannot parse a time, so a snapshot whose context items carry a time but no
    ``instant_us`` (written before the shell parsed instants) is ignored and rebuilt from the
    log, and the run reaches the uninterrupted digest (the instant is not in the digest)."""

    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy
    from rizz.store import durable

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stubs import ArithmeticModel, HashEmbedder

    def run(out: Path, log=lambda m: None) -> dict:
        out.mkdir(parents=True, exist_ok=True)
        model = CachedModel(ArithmeticModel(), ResponseCache(out / "responses.sqlite"))
        return run_stream(stream, load_policy("default"), "default", out, model, HashEmbedder(), snapshot_every=3,
                          rendering="chat", log=log)

    stream = _timed_stream(tmp_path / "s.jsonl", 12)
    full = run(tmp_path / "full")
    out = tmp_path / "r"
    run(out)
    snap = out / "snapshots" / "00000009.json"
    state, why = durable.read_snapshot(snap)
    assert why is None and b'"instant_us":1779606000000000' in snap.read_bytes()  # 2026-05-24T09:00+02:00

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "instant_us"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    snap.write_bytes(durable.snapshot_bytes(strip(state)))
    assert b"instant_us" not in snap.read_bytes() and b'"time"' in snap.read_bytes()
    for side in (out / "snapshots").glob("*.json"):  # the newest snapshot is the one to resume from
        if side.name > snap.name:
            side.unlink()
    lines = (out / "log.jsonl").read_bytes().splitlines(keepends=True)
    (out / "log.jsonl").write_bytes(b"".join(lines[:10]))  # as if killed after step 10
    (out / "summary.json").unlink()
    msgs: list[str] = []
    again = run(out, log=msgs.append)
    assert again["state_digest"] == full["state_digest"]
    assert any("00000009.json: not readable by this version" in m and "needs its instant_us" in m for m in msgs), msgs
    assert b'"instant_us":1779606000000000' in snap.read_bytes()  # rewritten with its instants


def test_answers_in_flight_saved_before_instants_are_refolded_from_the_log(tmp_path) -> None:
    """A live session's in-flight side file whose pending inputs carry a time but no
    ``instant_us`` (written before the shell parsed instants) cannot be built by the core: the
    session reopens by refolding its log, keeps every pending answer and its digest."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from livekit import HashEmbedder, StubModel, element

    from rizz import Session

    def open_(p):
        return Session.open(p, policy="default", model=StubModel(), embedder=HashEmbedder(), snapshot_every=4)

    app = tmp_path / "app"
    s = open_(app)
    for i in range(6):
        el = element(i)
        el["metadata"]["time"] = f"2026-05-2{i}T10:00:00-05:00"
        s.answer(el)
    s.fold("q0", 1.0)
    pending, d = sorted(s.pending_ids()), s.digest()
    s.close()
    (side,) = sorted(app.glob("snapshots/*.inflight.json"))[-1:]
    text = side.read_text()
    assert '"instant_us"' in text
    data = json.loads(text)

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "instant_us"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    side.write_text(json.dumps(strip(data)))
    s2 = open_(app)
    assert sorted(s2.pending_ids()) == pending and s2.digest() == d
    s2.fold("q3", 1.0)
    s2.close()
    assert '"instant_us"' in sorted(app.glob("snapshots/*.inflight.json"))[-1].read_text()
