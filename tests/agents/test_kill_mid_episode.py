"""kill -9 in the middle of an episode: the rerun continues to the uninterrupted run's digest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rizz.formats.streams import read_stream, write_stream

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("kill_child.py")
pytestmark = pytest.mark.slow


def test_kill_9_mid_episode_then_resume_equals_uninterrupted(tmp_path) -> None:
    stream = tmp_path / "s.jsonl"
    write_stream(stream, read_stream(ROOT / "data" / "tau-bench-mini" / "test.jsonl").elements[:3])
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    full = subprocess.run([sys.executable, str(CHILD), str(stream), str(tmp_path / "full")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert full.returncode == 0, full.stderr[-2000:]
    out, mark = tmp_path / "killed", tmp_path / "mark"
    proc = subprocess.Popen([sys.executable, str(CHILD), str(stream), str(out), str(mark)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while not mark.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert mark.exists(), "the child never reached the middle of the second episode"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert (out / "log.jsonl").read_text().count("\n") == 1  # the first episode only; none half-written
    done = subprocess.run([sys.executable, str(CHILD), str(stream), str(out)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == full.stdout.strip()
    recs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 1, 2] and all(r["verdict"]["reward"] == 1.0 for r in recs)
