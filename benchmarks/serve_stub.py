"""``rizz serve`` with the scripted stub model, for load and crash tests (so the server is what is measured).

Usage::

    python benchmarks/serve_stub.py --data DIR --port N [--policy default] [--latency 0.0] [--keys FILE]

The same build as ``rizz serve`` (:func:`rizz.apps.serve.run.serve`: real live Sessions, the
real embedder, the fair model queue), with :class:`stub_model.StubModel` as the model. Loopback only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stub_model import StubModel  # noqa: E402

from rizz.apps.serve.run import serve  # noqa: E402
from rizz.formats.policy_file import load_policy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--policy", default="default")
    ap.add_argument("--latency", type=float, default=0.0, help="stub model seconds per call")
    ap.add_argument("--keys", default=None)
    a = ap.parse_args()
    serve(a.data, load_policy(a.policy), StubModel(a.latency), host="127.0.0.1", port=a.port, keys_file=a.keys)


if __name__ == "__main__":
    main()
