"""Issue #27 §2: incremental snapshots — large parts of the state as content-addressed chunks,
written once and reused while unchanged, loaded back to an equal state (same digest)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest

from rizz.core import Policy, Verdict, digest, rizz
from rizz.core.apply import fold
from rizz.core.serialize import to_data
from rizz.store import durable
from rizz.store.runstore import RunStore
from rizz.store.snapchunks import BLOCK_MAX, MIN_BLOCK, ChunkError, SnapshotChunks, blocks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from core_overhead import build_events, make_layout, make_world, members  # noqa: E402


@pytest.mark.parametrize("n", [0, 15, 16, 17, 63, 64, 1023, 1024, 1500, 5000])
def test_blocks_cover_the_sequence_in_powers_of_two_and_an_append_keeps_all_but_the_smallest(n):
    got = blocks(n)
    end = 0
    for start, size in got:
        assert start == end and MIN_BLOCK <= size <= BLOCK_MAX and size & (size - 1) == 0
        end += size
    assert 0 <= n - end < MIN_BLOCK
    later = blocks(n + 1)
    kept = [b for b in got if b in later]
    assert kept == got[: len(kept)] and len(got) - len(kept) <= max(1, len(got))
    if (n + 1) % MIN_BLOCK:  # no carry: every block stays
        assert later == got


def _state(n: int, seed: int = 0):
    r = rizz(Policy())
    rng = np.random.default_rng([seed, n])
    world = make_world(6, 32, 1, rng)
    return r, world, rng, fold(r.init(), build_events(world, make_layout(world, n, rng)))


def _steps(r, world, rng, state, k: int):
    from rizz.core import StepInput

    where = rng.choice(len(world.labels), size=k, p=world.weights)
    vecs = members(world, where, rng)
    for i, b in enumerate(where.tolist()):
        lab = world.labels[b]
        x = StepInput(step=state.steps, item_id=f"x{state.steps}", text=f"{lab.application} item {state.steps}",
                      embedding=vecs[i].astype(np.float32).tobytes(), shape=world.shapes[b], label=lab,
                      label_embedding=world.label_vecs[b].astype(np.float32).tobytes(), answer="a", scope="session-1" if i % 2 else None)
        state = r.step(state, x, Verdict(1.0, "exact_match"))
    return state


def test_a_chunked_snapshot_loads_to_an_equal_state_and_the_next_writes_only_what_changed(tmp_path):
    r, world, rng, state = _state(3000)
    store = RunStore(tmp_path / "store.sqlite")
    chunks = SnapshotChunks(store)
    tree, refs, written = chunks.tree(state)
    store.flush()
    full = len(durable._state_json(to_data(state)))
    head = len(durable._state_json(tree))
    assert refs and written > 0 and head < full / 10, (head, full)  # the file holds little beyond chunk names
    back = SnapshotChunks(store).load(json.loads(json.dumps(tree)))
    assert back == state and digest(back) == digest(state)
    assert len(back.history.records) == len(state.history.records) >= 3000

    state2 = _steps(r, world, rng, state, 3)
    tree2, refs2, written2 = chunks.tree(state2)
    store.flush()
    assert 0 < written2 < written / 20, (written2, written)  # three steps: a few small blocks and the branches they touched
    assert len(refs & refs2) > len(refs) // 2  # most chunks are reused
    fresh = SnapshotChunks(store)
    back2 = fresh.load(tree2)
    assert back2 == state2 and digest(back2) == digest(state2)
    # a writer that has only loaded the snapshot reuses its chunks: nothing new to write
    tree3, refs3, written3 = fresh.tree(back2)
    assert tree3 == tree2 and refs3 == refs2 and written3 == 0
    # and the state it loaded grows like any other
    assert digest(_steps(r, world, np.random.default_rng(5), back2, 4)) == digest(_steps(r, world, np.random.default_rng(5), state2, 4))


def test_a_missing_or_damaged_chunk_is_an_error_that_names_it(tmp_path):
    _, _, _, state = _state(1200)
    store = RunStore(tmp_path / "store.sqlite")
    tree, refs, _ = SnapshotChunks(store).tree(state)
    store.flush()
    victim = sorted(refs)[0]
    db = store._conn(create=True)
    db.execute("UPDATE chunks SET data = ? WHERE sha256 = ?", (b"x" + store.chunk(victim)[1:], victim))
    with pytest.raises(ChunkError, match=f"{victim[:12]}… is damaged"):
        SnapshotChunks(store).load(tree)
    db.execute("DELETE FROM chunks WHERE sha256 = ?", (victim,))
    with pytest.raises(ChunkError, match="is missing"):
        SnapshotChunks(store).load(tree)


def test_a_memory_store_whose_keys_are_not_its_records_is_written_whole(tmp_path):
    """``keys`` / ``scopes`` are left out only when the records imply them; otherwise they are kept."""
    _, _, _, state = _state(1200)
    bid, b = max(state.branches.items(), key=lambda kv: len(kv[1].episodes))
    odd = attrs.evolve(b.episodes, keys=b.episodes.keys.add("not-a-record-key"))
    state = attrs.evolve(state, branches=state.branches.set(bid, attrs.evolve(b, episodes=odd)))
    store = RunStore(tmp_path / "store.sqlite")
    tree, _, _ = SnapshotChunks(store).tree(state)
    store.flush()
    back = SnapshotChunks(store).load(tree)
    assert "not-a-record-key" in back.branches[bid].episodes.keys and back == state


def test_a_run_snapshots_incrementally_keeps_three_and_its_store_only_their_chunks(tmp_path):
    from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream

    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.engine.run import replay, run_stream
    from rizz.formats.policy_file import load_policy

    stream = arithmetic_stream(tmp_path / "s.jsonl", 160)
    out = tmp_path / "r"
    out.mkdir()
    with ResponseCache(out / "responses.sqlite") as cache:
        summary = run_stream(stream, load_policy("default"), "default", out, CachedModel(ArithmeticModel(), cache), HashEmbedder(),
                             snapshot_every=10, rendering="chat", log=lambda m: None)
    names = sorted(p.name for p in (out / "snapshots").iterdir())
    assert len([n for n in names if not n.endswith(".inflight.json")]) == 3, names
    heads = [durable.snapshot_header(out / "snapshots" / n) for n in names if not n.endswith(".inflight.json")]
    assert heads[-1]["format"] == durable.CHUNKED_SNAPSHOT_FORMAT and heads[-1]["chunks"]
    store = RunStore(out / "store.sqlite")
    assert store.chunk_shas() == set().union(*(h["chunks"] for h in heads))  # the others' chunks were dropped
    # a resume from the newest snapshot reaches the run's digest, and so does a replay without snapshots
    from rizz.engine.logfold import restore_fold
    from rizz.store.runlog import RunDir

    fold_, _ = restore_fold(RunDir(out), load_policy("default"))
    assert digest(fold_.state) == summary["state_digest"] == replay(out, write_summary=False)["state_digest"]


def test_snapshots_are_never_further_apart_than_the_tail_cap():
    """A first snapshot writes every chunk (~200 MB at 10^5 memories): the bytes rule alone would
    space the next one ~25,000 records away; SNAPSHOT_TAIL_MAX bounds a resume's refold tail."""
    from rizz.engine import session as session_mod

    s = session_mod.Session(Policy(), None, None, rendering="chat", snapshot_every=50)
    assert s._interval(200 * 2**20) == 1000 == session_mod.SNAPSHOT_TAIL_MAX
    assert s._interval(50 * session_mod.SNAPSHOT_RECORD_BYTES * 3) == 150  # below the cap: the bytes rule
    s = session_mod.Session(Policy(), None, None, rendering="chat", snapshot_every=300)
    assert s._interval(200 * 2**20) == 1200  # rounded up to a multiple of snapshot_every


def test_a_run_whose_newest_snapshot_lost_a_chunk_resumes_from_the_log_to_the_same_digest(tmp_path):
    from stubs import ArithmeticModel, HashEmbedder, arithmetic_stream

    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    stream = arithmetic_stream(tmp_path / "s.jsonl", 150)

    def run(out: Path, log=lambda m: None) -> dict:
        out.mkdir(exist_ok=True)
        with ResponseCache(out / "responses.sqlite") as cache:
            return run_stream(stream, load_policy("default"), "default", out, CachedModel(ArithmeticModel(), cache), HashEmbedder(),
                              snapshot_every=10, rendering="chat", log=log)

    want = run(tmp_path / "full")["state_digest"]
    out = tmp_path / "r"
    run(out)
    snaps = sorted(p for p in (out / "snapshots").glob("*.json") if p.stem.isdigit())
    newest = durable.snapshot_header(snaps[-1])
    assert newest["format"] == durable.CHUNKED_SNAPSHOT_FORMAT
    store = RunStore(out / "store.sqlite")
    victim = sorted(newest["chunks"])[0]
    store._conn(create=True).execute("DELETE FROM chunks WHERE sha256 = ?", (victim,))
    store.close()
    n = int(snaps[-1].stem)
    lines = (out / "log.jsonl").read_bytes().splitlines(keepends=True)
    (out / "log.jsonl").write_bytes(b"".join(lines[: n + 2]))  # as if killed two records after that snapshot
    (out / "summary.json").unlink()
    msgs: list[str] = []
    assert run(out, log=msgs.append)["state_digest"] == want
    assert any(f"{n:08d}.json: snapshot chunk {victim[:12]}… is missing in the store; ignored and rebuilt" in m for m in msgs), msgs
