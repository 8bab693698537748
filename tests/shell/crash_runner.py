"""``python tests/shell/crash_runner.py STREAM OUT [SNAPSHOT_EVERY]``: one resumable run with the stubs.

What ``rizz run`` does (same ``run_stream``, RUN_DIR, response cache and embedding store),
with the deterministic stubs of ``stubs.py`` so a process starts in about a second. The
crash tests start it under ``RIZZ_FAULT`` (``rizz/store/durable.py``) and kill it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stubs import ArithmeticModel, HashEmbedder  # noqa: E402

from rizz.adapters.models.cache import CachedModel, ResponseCache  # noqa: E402
from rizz.engine.run import run_stream  # noqa: E402
from rizz.formats.policy_file import load_policy  # noqa: E402

if __name__ == "__main__":
    stream, out = Path(sys.argv[1]), Path(sys.argv[2])
    every = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    out.mkdir(parents=True, exist_ok=True)
    model = CachedModel(ArithmeticModel(), ResponseCache(out / "responses.sqlite"))
    summary = run_stream(stream, load_policy("default"), "default", out, model, HashEmbedder(),
                         snapshot_every=every, rendering="chat")
    print(json.dumps({"steps": summary["steps"], "state_digest": summary["state_digest"]}))
