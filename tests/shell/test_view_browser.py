"""``rizz view`` in a real browser (issue #28): headless Chromium, driven by Playwright, opens the
file, and the tests read the rendered page, click through it and save screenshots.

Chromium is Debian's ``chromium`` package (``make test`` installs it as root; ``$RIZZ_CHROMIUM``
names another); Playwright only drives it (its own browser download is not used). Without a
browser or Playwright these tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from viewkit import HOSTILE, add_fake_peer, find_chromium, make_bench, make_run, make_session  # noqa: E402

from rizz.lab.view import view_data, write_view  # noqa: E402

CHROMIUM = find_chromium()


def _missing() -> str | None:
    if CHROMIUM is None:
        return "no Chromium (apt-get install chromium, as `make test` does as root; or set RIZZ_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright (pip install -e '.[test]')"
    return None


if _missing():
    if os.environ.get("CI") == "true":
        pytest.fail(f"the browser test of rizz view needs a browser under CI: {_missing()}", pytrace=False)
    pytest.skip(_missing(), allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """A run (48 steps), a bench (frozen vs default) and a live session, with their views."""
    root = tmp_path_factory.mktemp("viewb")
    run = make_run(root / "run", 48)
    bench = make_bench(root / "bench", 24, ("frozen", "default"))
    add_fake_peer(bench)
    make_session(root / "live", 16)
    return {k: (d, write_view(d, root / f"{k}.html")) for k, d in (("run", run), ("bench", bench), ("live", root / "live"))}


@pytest.fixture
def open_page(browser, tmp_path):
    opened = []

    def go(html: Path, hash_: str = ""):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: errors.append(f"request {r.url}") if not r.url.startswith(("file:", "data:")) else None)
        page.goto(html.as_uri() + hash_)
        page.wait_for_selector("body[data-ready='1']")
        opened.append((page, errors))
        return page

    yield go
    for page, errors in opened:
        assert errors == [], errors  # no script error, no request off the file
        page.close()


def _shot(page, tmp_path: Path, name: str) -> Path:
    out = tmp_path / f"{name}.png"
    page.screenshot(path=str(out), full_page=True)
    assert out.stat().st_size > 10_000
    return out


def test_the_branch_tree_shows_every_branch_with_label_traffic_reward_merges_and_prunes(pages, open_page, tmp_path):
    run_dir, html = pages["run"]
    data = view_data(run_dir)["runs"][0]
    page = open_page(html)
    lanes = page.locator("[data-testid=branch-lane]")
    assert lanes.count() == len(data["branches"]) > 3
    for b in data["branches"]:
        lane = page.locator(f"[data-testid=branch-lane][data-branch='{b['id']}']")
        assert f"{b['id']} · {b['label']}" in lane.text_content()
        assert f"{b['traffic']} · " in lane.text_content()
    assert page.locator("svg.tree path.merge").count() == sum(1 for b in data["branches"] if b["end"] and b["end"]["how"] == "merged")
    assert page.locator("svg.tree text.prune").count() >= 1
    assert page.locator("[data-testid=branch-table] tbody tr").count() == len(data["branches"])
    _shot(page, tmp_path, "tree")


def test_a_short_runs_tree_labels_each_step_once_over_the_middle_of_its_cells(open_page, tmp_path):
    run_dir = make_run(tmp_path / "short", 4)
    page = open_page(write_view(run_dir, tmp_path / "short.html"))
    labels = page.locator("svg.tree text.axis").all_text_contents()
    steps = [t for t in labels if t.startswith("step ")]
    assert steps == ["step 0", "step 1", "step 2", "step 3"]  # 6 ticks over 4 steps: each once
    centres = page.evaluate("""() => {
      const out = {};
      for (const t of document.querySelectorAll('svg.tree text.axis')) if (t.textContent.startsWith('step ')) out[t.textContent] = +t.getAttribute('x');
      return out; }""")
    cells = page.evaluate("""() => [...document.querySelectorAll('svg.tree rect.cell')].map((r) => [+r.getAttribute('x'), +r.getAttribute('width')])""")
    assert cells and all(any(abs(x + w / 2 - c) < 0.5 for c in centres.values()) for x, w in cells)  # every cell under a tick
    assert not page.locator("#summary").text_content().startswith("run · run")


def test_a_step_shows_its_route_prompt_blocks_with_sources_and_clicks_through_to_its_branch(pages, open_page, tmp_path):
    run_dir, html = pages["run"]
    data = view_data(run_dir)["runs"][0]
    st = next(s for s in reversed(data["steps"]) if s["prompt"] and {"examples", "rules", "mistakes"} <= {b for b, _ in s["prompt"]["sections"]})
    page = open_page(html)
    page.click("[data-testid=tab-button-steps]")
    page.fill("[data-testid=step-jump]", str(st["step"]))
    page.press("[data-testid=step-jump]", "Enter")
    detail = page.locator("[data-testid=step-detail]")
    assert detail.get_attribute("data-step") == str(st["step"])
    assert page.locator("[data-testid=prompt-exact]").text_content().startswith("rebuilt = logged prompt")
    blocks = page.locator("[data-testid=prompt-block]")
    assert [blocks.nth(i).get_attribute("data-block") for i in range(blocks.count())] == [b for b, _ in st["prompt"]["sections"]]
    examples = page.locator("[data-testid=prompt-block][data-block=examples] [data-testid=prompt-item]")
    n_ex = len(dict(st["prompt"]["sections"])["examples"])
    assert examples.count() == n_ex
    first = dict(st["prompt"]["sections"])["examples"][0]
    item = data["items"][first["m"]]
    src = examples.nth(0).locator("[data-testid=item-source]").text_content()
    assert f"key {item['key'][:12]}" in src and f"from branch {first['b']}" in src and f"written at step {item['written']}" in src
    assert item["input"] in examples.nth(0).locator("pre").text_content()
    rule = page.locator("[data-testid=prompt-block][data-block=rules] [data-testid=item-source]").nth(0).text_content()
    assert "helpful " in rule and "harmful " in rule
    assert page.locator("[data-testid=candidates] tbody tr").count() == len(st["cands"])
    assert page.locator("[data-testid=verdict]").text_content().startswith(f"Verdict: reward {st['verdict']['reward']:.3f}")
    _shot(page, tmp_path, "step")
    # from the step to its branch
    page.locator(f"[data-testid=step-detail] p >> [data-testid=branch-link][data-branch='{st['branch']}']").first.click()
    panel = page.locator("[data-testid=branch-panel]")
    assert panel.get_attribute("data-branch") == st["branch"]
    assert f"Branch {st['branch']}" in panel.locator("h2").text_content()
    assert page.locator("[data-testid=tab-button-memory]").get_attribute("class") == "on"
    _shot(page, tmp_path, "branch")


def test_the_memory_browser_lists_an_items_later_uses_and_links_back_to_them(pages, open_page, tmp_path):
    run_dir, html = pages["run"]
    data = view_data(run_dir)["runs"][0]
    i, it = max(((i, it) for i, it in enumerate(data["items"]) if it["kind"] == "episode" and it["branch"]), key=lambda p: len(p[1]["uses"]))
    assert len(it["uses"]) >= 3
    page = open_page(html, f"#tab=memory&branch={it['branch']}&item={i}")
    card = page.locator(f"[data-testid=memory-item][data-item-index='{i}']")
    uses = card.locator("[data-testid=item-uses]")
    assert uses.get_attribute("data-count") == str(len(it["uses"]))
    assert f"Used by {len(it['uses'])} later prompts" in uses.text_content()
    links = uses.locator("a")
    assert [int(links.nth(k).text_content()) for k in range(links.count())] == it["uses"][:40]
    _shot(page, tmp_path, "memory")
    links.nth(links.count() - 1).click()  # to the last prompt that used it: the item is in its prompt
    detail = page.locator("[data-testid=step-detail]")
    assert detail.get_attribute("data-step") == str(it["uses"][:40][-1])
    assert page.locator(f"[data-testid=prompt-item] [data-item='{i}']").count() == 1


def test_stream_text_with_html_or_script_shows_as_text_and_never_runs(pages, open_page, tmp_path):
    run_dir, html = pages["run"]
    data = view_data(run_dir)["runs"][0]
    st = next(s for s in data["steps"] if HOSTILE in s["input"])
    cap = next(s for s in data["steps"] if s["answer"] and HOSTILE in (s["answer"]["raw"] or ""))
    page = open_page(html, f"#tab=steps&step={st['step']}")
    assert HOSTILE in page.locator("[data-testid=step-detail] pre.input").text_content()
    page.goto(html.as_uri() + f"#tab=steps&step={cap['step']}")
    page.wait_for_selector("body[data-ready='1']")
    page.locator("[data-testid=step-detail] details summary").first.click()
    assert HOSTILE in page.locator("[data-testid=step-detail] details pre").first.text_content()
    page.goto(html.as_uri() + "#tab=memory")  # the hostile answer is an anti-pattern of the capitals' branch
    page.wait_for_selector("body[data-ready='1']")
    for b in data["branches"]:
        page.locator(f"[data-testid=branch-list] a[data-branch='{b['id']}']").click()
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.scripts.length") == 2
    _shot(page, tmp_path, "hostile")


def test_a_bench_shows_policies_side_by_side_and_two_prompts_of_one_step(pages, open_page, tmp_path):
    bench, html = pages["bench"]
    data = view_data(bench)
    page = open_page(html, "#tab=compare")
    assert page.locator("[data-testid=chart-reward] polyline").count() == 3  # frozen, default and the peer
    assert page.locator("[data-testid=chart-tokens] polyline").count() == 3
    assert page.locator("[data-testid=per-task] thead th").count() == 4
    page.select_option("[data-testid=compare-task]", "stance")  # the charts of one task
    assert "task stance" in page.locator("[data-testid=tab-compare] figcaption").first.text_content()
    assert page.locator("[data-testid=chart-reward] polyline").count() == 3
    page.fill("[data-testid=compare-step]", "20")
    page.press("[data-testid=compare-step]", "Enter")
    cols = page.locator("[data-testid=compare-col]")
    assert [cols.nth(k).get_attribute("data-run") for k in range(2)] == ["frozen", "default"]
    default = next(r for r in data["runs"] if r["name"] == "default")
    st = default["steps"][20]
    blocks = cols.nth(1).locator("[data-testid=prompt-block]")
    assert [blocks.nth(k).get_attribute("data-block") for k in range(blocks.count())] == [b for b, _ in st["prompt"]["sections"]]
    assert cols.nth(0).locator("[data-testid=prompt-block][data-block=examples]").count() == 0  # frozen has no memory
    _shot(page, tmp_path, "compare")
    page.select_option("[data-testid=compare-b]", "2")  # default beside the peer, whose prompt is the one it sent
    cols = page.locator("[data-testid=compare-col]")
    assert cols.nth(1).get_attribute("data-run") == "peer:mem0"
    assert "The answer prompt as the peer sent it" in cols.nth(1).text_content()
    assert "Memories:" in cols.nth(1).locator("pre.logged").text_content()
    page.select_option("[data-testid=run-select]", "1")
    assert "default" in page.locator("#summary").text_content()


def test_a_bench_opens_on_its_first_policy_that_writes_memory_and_frozen_stays_a_choice(pages, open_page):
    """It opened on frozen, the baseline with no memory to look at."""
    bench, html = pages["bench"]
    assert [r["name"] for r in view_data(bench)["runs"]][:2] == ["frozen", "default"]
    page = open_page(html)
    assert page.locator("[data-testid=run-select]").input_value() == "1" and "policy default" in page.locator("#summary").text_content()
    assert page.locator("[data-testid=branch-lane]").count() > 0
    page.select_option("[data-testid=run-select]", "0")
    assert "policy frozen" in page.locator("#summary").text_content() and "run=0" in page.evaluate("location.hash")
    page.select_option("[data-testid=run-select]", "1")
    assert "policy default" in page.locator("#summary").text_content() and "run=" not in page.evaluate("location.hash")


def test_a_live_session_opens_with_pending_and_expired_steps(pages, open_page, tmp_path):
    live, html = pages["live"]
    r = view_data(live)["runs"][0]
    exp = next(s for s in r["steps"] if s["expired"])
    page = open_page(html, f"#tab=steps&step={exp['step']}")
    assert "Expired before a verdict came" in page.locator("[data-testid=step-detail]").text_content()
    pend = [s for s in r["steps"] if not s["context_only"] and not s["verdict"] and not s["expired"]][-1]
    page.goto(html.as_uri() + f"#tab=steps&step={pend['step']}")
    page.wait_for_selector("body[data-ready='1']")
    assert "No verdict in the log yet" in page.locator("[data-testid=step-detail]").text_content()
    _shot(page, tmp_path, "live")


def test_a_fallback_label_names_the_words_its_runs_policy_read(open_page, tmp_path):
    """The route said "fallback from the input's words" whatever the policy's
    routing.fallback_application; under the default it is the input's task line."""
    run_dir = make_run(tmp_path / "run", 12, policy="default")
    html = write_view(run_dir, tmp_path / "run.html")
    data = view_data(run_dir)["runs"][0]
    st = next(s for s in data["steps"] if s["judge"] and s["judge"]["fallback"] and not s["judge"]["raw"])
    assert data["fallback_label"] == "made from the input's task line (its instruction, else its first line) with no model call (routing.judge: local)"
    page = open_page(html)
    page.click("[data-testid=tab-button-steps]")
    page.fill("[data-testid=step-jump]", str(st["step"]))
    page.press("[data-testid=step-jump]", "Enter")
    text = page.locator("[data-testid=step-detail]").text_content()
    assert f"label {st['judge']['function']}/{st['judge']['application']} {data['fallback_label']}" in text, text[:800]


def _round_steps(values: list[float]) -> bool:
    """Evenly spaced from a multiple of their step, and that step 1, 2 or 5 × 10^k."""
    import math

    if len(values) < 2:
        return False
    step = values[1] - values[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    return (any(math.isclose(mantissa, m) for m in (1, 2, 5)) and math.isclose(values[0] / step, round(values[0] / step), abs_tol=1e-9)
            and all(math.isclose(b - a, step) for a, b in zip(values, values[1:])))


def test_the_plots_tick_round_steps(pages, open_page):
    """The branch tree's step axis read 0, 10, 20, 30, 39, 49 on a 60-step run (the ticks split
    the steps in sixths and rounded): round steps now, 1, 2 or 5 × 10^k apart, in the charts too."""
    _, html = pages["run"]  # 48 steps: it read 0, 8, 16, 24, 31, 39, 47
    page = open_page(html)
    steps = [int(t.split()[1]) for t in page.locator("[data-testid=branch-tree] text.axis").all_text_contents() if t.startswith("step ")]
    assert steps == [0, 10, 20, 30, 40], steps
    bench, html = pages["bench"]  # 24 steps
    page = open_page(html, "#tab=compare")
    for chart in ("chart-reward", "chart-tokens"):
        xs = [float(t) for t in page.locator(f"[data-testid={chart}] [data-testid=x-tick]").all_text_contents()]
        assert xs == [0, 5, 10, 15, 20], (chart, xs)
        ys = [float(t) for t in page.locator(f"[data-testid={chart}] text[text-anchor=end]").all_text_contents()]
        assert _round_steps(ys) and ys[0] == 0, (chart, ys)
    most = max(st["prompt"]["tokens"] for r in view_data(bench)["runs"] for st in r["steps"] if st.get("prompt"))
    assert ys[-2] < most <= ys[-1], (most, ys)  # the grid's top is the first round tick above the data
    assert [float(t) for t in page.locator("[data-testid=chart-reward] text[text-anchor=end]").all_text_contents()] == [0, 0.2, 0.4, 0.6, 0.8, 1]
