"""``rizz view`` of a long run: file size, build time, and time to open in headless Chromium.

Builds a run of N steps (default 10^4) with the test stand-ins of ``tests/shell/viewkit.py``
(no model: a scripted model and a hash embedder, the ``default`` policy, four task families),
writes its view, opens it in headless Chromium driven by Playwright (``make browser`` installs
Debian's chromium) and prints:

- ``view_s``: ``rizz view``'s own time (refold, rebuilt prompts, HTML), seconds;
- ``size_mb``: the HTML file, MB (10^6 bytes);
- ``open_s``: from navigation to the first drawing done (the branch tree; the JSON parsed once), seconds;
- ``step_s`` / ``memory_s``: drawing one step's details / the busiest branch's memory, seconds (medians of 5).

Usage::

    python benchmarks/view_load.py [--steps 10000] [--keep DIR] [--screenshot FILE.png]

``--keep DIR`` keeps (and reuses) the run there; ``--screenshot`` saves the step page at 1400 x 900.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "shell")]

from viewkit import find_chromium, make_run  # noqa: E402

from rizz.lab.view import view_data, write_view  # noqa: E402


def _timed(page, action: str, ready: str) -> float:
    t = time.perf_counter()
    page.evaluate(action)
    page.wait_for_selector(ready)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, default=None, help="Keep (and reuse) the run in this folder.")
    ap.add_argument("--screenshot", type=Path, default=None)
    args = ap.parse_args()
    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium: run `make browser` (as root) or set RIZZ_CHROMIUM")
    from playwright.sync_api import sync_playwright

    work = args.keep or Path(tempfile.mkdtemp(prefix="rizz-view-"))
    run = work / "run"
    t = time.perf_counter()
    if not (run / "summary.json").exists():
        make_run(run, args.steps, policy="default")
        print(f"made the run in {time.perf_counter() - t:.1f} s: {run}", file=sys.stderr)
    t = time.perf_counter()
    html = write_view(run, work / "view.html")
    view_s = time.perf_counter() - t
    data = view_data(run)["runs"][0] if args.screenshot else None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        t = time.perf_counter()
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        open_s = time.perf_counter() - t
        lanes = page.evaluate("document.querySelectorAll('[data-testid=branch-lane]').length")
        n = args.steps
        step_s = statistics.median(_timed(page, f"location.hash = 'tab=steps&step={k}'", f"[data-testid=step-detail][data-step='{k}']")
                                   for k in (n // 2, n // 2 + 1, n - 3, n - 2, n - 1))
        busiest = page.evaluate("(() => { const r = JSON.parse(document.getElementById('rizz-data').textContent).runs[0];"
                                " return r.branches.slice().sort((a, b) => b.items.length - a.items.length)[0].id; })()")
        memory_s = statistics.median(_timed(page, f"location.hash = 'tab=memory&branch={busiest}&x={k}'",
                                            f"[data-testid=branch-panel][data-branch='{busiest}']") for k in range(5))
        if args.screenshot:
            k = max((s for s in data["steps"] if s["prompt"]), key=lambda s: len(s["prompt"]["sections"]))["step"]
            page.evaluate(f"location.hash = 'tab=steps&step={k}'")
            page.wait_for_selector(f"[data-testid=step-detail][data-step='{k}']")
            page.screenshot(path=str(args.screenshot))
        browser.close()
    if errors:
        sys.exit(f"page errors: {errors}")
    print(f"steps {n}  branches {lanes}  view_s {view_s:.1f}  size_mb {html.stat().st_size / 1e6:.1f}  "
          f"open_s {open_s:.2f}  step_s {step_s:.3f}  memory_s {memory_s:.3f}")


if __name__ == "__main__":
    main()
