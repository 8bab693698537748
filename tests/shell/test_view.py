"""``rizz view`` (issue #28) without a browser: the refolded view data, the folder kinds, the file.

The browser test (tests/shell/test_view_browser.py) opens the same pages in headless Chromium.
"""

from __future__ import annotations

import json
import re
import sys
from html import unescape
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from viewkit import HOSTILE, add_fake_peer, family_stream, make_bench, make_run, make_session, view_policy  # noqa: E402

from rizz.lab.view import view_data, write_view  # noqa: E402
from rizz.lab.view.page import embed_json  # noqa: E402
from rizz.store.runlog import RunDir  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("view") / "run", 48)


@pytest.fixture(scope="module")
def view(run_dir) -> dict:
    return view_data(run_dir)["runs"][0]


def _logged(run_dir: Path) -> list[dict]:
    return list(RunDir(run_dir).records())


def test_every_prompt_is_rebuilt_block_by_block_exactly_and_the_refold_digest_is_the_runs(run_dir, view):
    steps = [s for s in view["steps"] if s["prompt"]]
    assert len(steps) > 30 and all(s["prompt"]["exact"] for s in steps)
    assert view["kind"] == "run" and view["digest_ok"] is True
    assert view["summary"]["state_digest"] == json.loads((run_dir / "summary.json").read_text())["state_digest"]
    blocks = {b for s in steps for b, _ in s["prompt"]["sections"]}
    assert {"scoped_context", "rules", "examples", "mistakes", "input"} <= blocks
    # every memory item of a prompt names its source branch; a rule also its counters at that step
    for s in steps:
        for block, items in s["prompt"]["sections"]:
            for it in items:
                if block in ("examples", "rules", "mistakes", "scoped_context"):
                    assert it["m"] is not None and it["b"] in {b["id"] for b in view["branches"]}
                if block == "rules":
                    h, a, status = it["c"]
                    assert h >= 0 and a >= 0 and status in ("candidate", "active")


def test_memory_items_list_the_later_prompts_the_log_says_used_them(run_dir, view):
    items = view["items"]
    by_key = {(it["kind"], it["key"]): it for it in items}
    seen = 0
    for rec in _logged(run_dir):
        p = rec.get("prompt")
        if not p:
            continue
        for key in p["episode_keys"]:
            assert rec["step"] in by_key[("episode", key)]["uses"]
            seen += 1
        for rid in p["rule_ids"]:
            assert rec["step"] in by_key[("rule", rid)]["uses"]
    assert seen > 20
    for it in items:
        if it["written"] is not None and it["kind"] != "turn":
            assert all(u > it["written"] for u in it["uses"]), it  # used only after it was written
    kinds = {it["kind"] for it in items}
    assert {"episode", "rule", "anti_pattern", "context"} <= kinds


def test_the_branch_tree_has_spawns_merges_and_prunes_with_traffic_and_reward(view):
    ends = {b["id"]: b["end"] for b in view["branches"]}
    assert any(e and e["how"] == "merged" for e in ends.values())
    assert any(e and e["how"] == "pruned" for e in ends.values())
    routed = {}
    for s in view["steps"]:
        routed[s["branch"]] = routed.get(s["branch"], 0) + 1
    for b in view["branches"]:
        assert b["label"] and b["spawned"] is not None
        if b["end"] is None:
            assert b["active"] is True and b["traffic"] >= routed.get(b["id"], 0)
        else:
            assert b["active"] is False and b["traffic"] == routed.get(b["id"], 0)
        if b["answered"]:
            assert 0.0 <= b["mean_reward"] <= 1.0
    pruned = next(b for b in view["branches"] if b["end"] and b["end"]["how"] == "pruned")
    assert all(view["items"][i]["retired"] for i in pruned["items"])  # its memory left with it


#: The judge's label differs from the branch it routes to (no snapping): a candidate's score is the input label's.
UNSNAPPED = "extends: default\nrouting: {judge: always, snap_enabled: false, jaccard_enabled: false}\n"


@pytest.mark.parametrize("policy", ["view", "unsnapped"])
def test_route_candidates_carry_the_score_the_run_logged(run_dir, view, policy, tmp_path):
    if policy == "unsnapped":
        (tmp_path / "unsnapped.yaml").write_text(UNSNAPPED)
        run_dir = make_run(tmp_path / "run", 40, policy=tmp_path / "unsnapped.yaml")
        view = view_data(run_dir)["runs"][0]
        assert any(s["judge"] and s["label"] != f"{s['judge']['function']}/{s['judge']['application']}" for s in view["steps"])
    logged = {r["step"]: r["route"] for r in _logged(run_dir) if r.get("route")}
    checked = 0
    for s in view["steps"]:
        if s["spawned"] or s["context_only"] or not s["cands"]:
            continue
        chosen = [c for c in s["cands"] if c[0] == s["branch"]]
        assert chosen and chosen[0][2] == pytest.approx(logged[s["step"]]["score"], abs=1e-4)
        assert s["cands"][0][0] == s["branch"]  # best first
        checked += 1
    assert checked > 20


def test_what_a_step_changed_names_the_items_it_wrote(view):
    wrote = [c for s in view["steps"] for c in s["changes"] if c[0].startswith("+ episode written")]
    assert wrote and all(view["items"][c[1]]["kind"] == "episode" for c in wrote)
    assert any(c[0].startswith("+ anti-pattern") for s in view["steps"] for c in s["changes"])


def test_stream_text_with_markup_is_data_in_the_file_never_markup(run_dir, tmp_path):
    out = write_view(run_dir, tmp_path / "v.html")
    html = out.read_text(encoding="utf-8")
    assert HOSTILE not in html and "<img" not in html and "onerror=\"" not in html
    assert html.count("<script") == 2 and html.count("</script>") == 2  # the data block and the page's own script
    blob = re.search(r'<script type="application/json" id="rizz-data">(.*?)</script>', html, re.S).group(1)
    assert any(HOSTILE in s["input"] for s in json.loads(blob)["runs"][0]["steps"])
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert "connect-src 'none'" in unescape(csp) and "script-src 'sha256-" in unescape(csp)  # no network, no other script
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html  # nothing fetched


def test_embed_json_escapes_what_could_end_the_block():
    text = embed_json({"x": "</script><!-- \u2028 & >"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><!-- \u2028 & >"}


def test_cli_writes_the_view_into_the_run_dir_and_refuses_a_folder_without_runs(run_dir, tmp_path):
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, ["view", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert (run_dir / "view.html").stat().st_size > 10_000 and "view.html" in res.output
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(app, ["view", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no run.json" in res.output


def test_out_a_folder_writes_view_html_inside_it(run_dir, tmp_path):
    """`--out views/` (no such folder) wrote an extension-less file `views`, while an existing
    folder was refused: both write view.html inside the folder (created)."""
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    res = CliRunner().invoke(app, ["view", str(run_dir), "--out", str(tmp_path / "views") + "/"])
    assert res.exit_code == 0 and (tmp_path / "views" / "view.html").is_file(), res.output
    assert str(tmp_path / "views" / "view.html") in res.stdout
    res = CliRunner().invoke(app, ["view", str(run_dir), "--out", str(tmp_path)])  # an existing folder
    assert res.exit_code == 0 and (tmp_path / "view.html").is_file(), res.output
    res = CliRunner().invoke(app, ["view", str(run_dir), "--out", str(tmp_path / "v.html")])  # a file: as it is
    assert res.exit_code == 0 and (tmp_path / "v.html").is_file(), res.output


def test_a_bench_folder_gives_its_policies_in_the_reports_order(tmp_path):
    bench = make_bench(tmp_path / "bench", 24, ("default", "frozen"))
    data = view_data(bench)
    assert data["kind"] == "bench" and [r["name"] for r in data["runs"]] == ["default", "frozen"]
    a, b = data["runs"]
    assert [s["id"] for s in a["steps"]] == [s["id"] for s in b["steps"]]
    assert all(s["prompt"]["exact"] for r in data["runs"] for s in r["steps"] if s["prompt"])
    assert not b["items"] or all(not it["uses"] for it in b["items"])  # frozen shows no memory
    assert data["first_run"] == 0 and (a["writes"], b["writes"]) == (True, False)


def test_a_bench_view_opens_on_the_first_policy_that_writes_memory(tmp_path):
    """A newcomer's `rizz view BENCH_DIR` opened on frozen, which has no memory to look at."""
    from rizz.lab.view import first_run

    bench = make_bench(tmp_path / "bench", 12, ("frozen", "single-branch", "default"))
    add_fake_peer(bench)
    data = view_data(bench)
    assert [r["name"] for r in data["runs"]][:3] == ["frozen", "single-branch", "default"] and data["first_run"] == 1
    assert first_run([{"kind": "peer"}, {"writes": False}]) == 0 and first_run([]) == 0  # nothing writes: the first
    assert view_data(make_run(tmp_path / "run", 6))["first_run"] == 0


def test_a_peers_folder_in_a_bench_shows_its_answers_and_the_prompts_it_sent(tmp_path):
    bench = make_bench(tmp_path / "bench", 12, ("frozen", "default"))
    add_fake_peer(bench)
    data = view_data(bench)
    assert [r["name"] for r in data["runs"]] == ["frozen", "default", "peer:mem0"]
    peer, frozen = data["runs"][2], data["runs"][0]
    assert peer["kind"] == "peer" and peer["branches"] == [] and peer["items"] == []
    assert [s["verdict"] for s in peer["steps"]] == [s["verdict"] for s in frozen["steps"]]
    asked = [s for s in peer["steps"] if s["prompt"]]
    assert asked and all(s["prompt"]["text"].startswith("user: Memories:") and s["prompt"]["tokens"] == 40 for s in asked)


def test_a_live_session_shows_pending_expired_and_late_verdicts_and_refolds_to_its_digest(tmp_path):
    digest = make_session(tmp_path / "live", 20)
    r = view_data(tmp_path / "live")["runs"][0]
    assert r["kind"] == "live" and r["summary"]["state_digest"] == digest
    assert sum(1 for s in r["steps"] if s["expired"]) >= 2
    pending = [s for s in r["steps"] if not s["context_only"] and s["verdict"] is None and s["expired"] is None]
    assert len(pending) == 2
    late = [s for s in r["steps"] if s["verdict"] and s.get("verdict_at", s["step"]) > s["step"]]
    assert late and all(s["prompt"]["exact"] for s in r["steps"] if s["prompt"])


def test_a_serve_data_folder_shows_one_run_per_tenant(tmp_path):
    for t in ("alice", "bob"):
        make_session(tmp_path / "data" / t, 8)
    data = view_data(tmp_path / "data")
    assert data["kind"] == "tenants" and [r["name"] for r in data["runs"]] == ["alice", "bob"]


def test_a_sweep_folder_shows_every_cells_runs(run_dir, tmp_path):
    import shutil

    for cell in ("test", "test.1"):
        shutil.copytree(run_dir, tmp_path / "sweep" / "cells" / cell / "view-test")
    (tmp_path / "sweep" / "results.json").write_text("{}")
    data = view_data(tmp_path / "sweep")
    assert data["kind"] == "sweep" and [r["name"] for r in data["runs"]] == ["test/view-test", "test.1/view-test"]


def test_tenants_in_one_stream_get_walled_branch_keys(tmp_path):
    lines = [json.loads(x) for x in family_stream(tmp_path / "s.jsonl", 24, hostile=False).read_text().splitlines()]
    for i, el in enumerate(lines):
        el.setdefault("metadata", {})["tenant"] = "alice" if i % 2 else "bob"
    stream = tmp_path / "t.jsonl"
    stream.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = view_data(make_run(tmp_path / "run", stream=stream, policy=view_policy(tmp_path)))["runs"][0]
    assert {b["id"].split("/")[0] for b in r["branches"]} == {"alice", "bob"}
    assert all(s["branch"].startswith(s["tenant"] + "/") for s in r["steps"])
    assert all(s["prompt"]["exact"] for s in r["steps"] if s["prompt"]) and r["digest_ok"] is True
    for s in r["steps"]:  # no memory crosses the wall
        for _, items in (s["prompt"] or {"sections": []})["sections"]:
            assert all(it["b"].startswith(s["tenant"] + "/") for it in items if "b" in it)


def test_a_log_of_format_1_is_viewed_with_todays_refold(tmp_path):
    """tests/fixtures/v1-rundir's summary.json holds the digest of its time (tests/shell/test_live.py):
    the view says the refold differs from it, and shows the refold's, which replay gives."""
    from rizz.engine.run import replay

    r = view_data(FIXTURES / "v1-rundir")["runs"][0]
    assert r["digest_ok"] is False and r["summary"]["state_digest"] == replay(FIXTURES / "v1-rundir", write_summary=False)["state_digest"]
    assert len(r["steps"]) == json.loads((FIXTURES / "v1-rundir" / "summary.json").read_text())["steps"] and r["branches"]
    assert all(s["prompt"]["exact"] for s in r["steps"] if s["prompt"])


def test_a_log_that_does_not_fold_is_refused_with_its_line(run_dir, tmp_path):
    import shutil

    from typer.testing import CliRunner

    from rizz.apps.cli import app

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    lines = (bad / "log.jsonl").read_text().splitlines()
    lines.insert(3, json.dumps({"v": 2, "kind": "verdict", "step": 1, "id": "nobody", "verdict": {"reward": 1.0, "verifier": "exact_match"}}))
    (bad / "log.jsonl").write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["view", str(bad)])
    assert res.exit_code == 2 and "log.jsonl:4" in res.output and "no such answer is pending" in res.output


def test_a_read_only_run_dir_is_refused_in_one_line_naming_the_file_and_out(run_dir, tmp_path):
    """`rizz view RUN_DIR` on a read-only RUN_DIR ended in a traceback (OSError writing
    RUN_DIR/view.html): one line naming the file and --out; --out elsewhere works."""
    from test_readonly_rundir import _read_only
    from typer.testing import CliRunner

    from rizz.apps.cli import app

    with _read_only(run_dir) as ro:
        res = CliRunner().invoke(app, ["view", str(ro)])
        assert res.exit_code == 2, res.output
        said = res.stderr.strip()
        assert said.startswith(f"{ro / 'view.html'}: cannot write here (") and "--out FILE.html" in said and "\n" not in said, said
        res = CliRunner().invoke(app, ["view", str(ro), "--out", str(tmp_path / "v.html")])
        assert res.exit_code == 0 and (tmp_path / "v.html").is_file(), res.output


def test_a_summary_of_fewer_log_records_is_out_of_date_not_a_mismatch(tmp_path):
    """After an interrupted resume summary.json is of the shorter log: the view said the refold's
    digest differs from it. As rizz replay, it compares the digest where that summary ends, and
    says the summary is out of date; another digest there is still a mismatch."""
    import shutil

    from rizz.engine.run import replay

    out = make_run(tmp_path / "run", 12)
    records = (out / "log.jsonl").read_text().splitlines(keepends=True)
    starts = [i for i, line in enumerate(records) if json.loads(line).get("kind", "step") in ("step", "answer")]
    short = tmp_path / "short"  # the run as it was after 5 steps: its summary is the one an interrupted resume leaves
    shutil.copytree(out, short)
    (short / "log.jsonl").write_text("".join(records[:starts[5]]))
    first = replay(short, write_summary=False)
    assert first["steps"] == 5 and first["log_records"] == starts[5]
    (out / "summary.json").write_text(json.dumps(first))
    r = view_data(out)["runs"][0]
    assert r["digest_ok"] is True and r["summary_stale"] == "summary.json is from 5 steps; the log has 12"
    legacy = {k: v for k, v in first.items() if k != "log_records"}  # as an older rizz wrote it: placed by its steps
    (out / "summary.json").write_text(json.dumps(legacy))
    assert (view_data(out)["runs"][0]["digest_ok"], view_data(out)["runs"][0]["summary_stale"]) == (True, "summary.json is from 5 steps; the log has 12")
    (out / "summary.json").write_text(json.dumps(dict(first, state_digest="sha256:" + "0" * 64)))
    r = view_data(out)["runs"][0]
    assert r["digest_ok"] is False and r["summary_stale"] == "summary.json is from 5 steps; the log has 12"
    page = write_view(out, tmp_path / "v.html").read_text()
    assert "summary.json is from 5 steps; the log has 12" in page and "r.summary_stale" in page  # the header's chip says it
