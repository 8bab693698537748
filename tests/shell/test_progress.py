"""StepProgress: running figures on the bar, and plain lines (after the first step, then every 10, and a minute
after the last line) without a TTY."""

from types import SimpleNamespace

from rizz.lab.progress import LINE_EVERY, StepProgress, new_progress


def _rec(step: int, reward: float | None, tokens: int) -> dict:
    rec = {"step": step, "calls": [{"prompt_tokens": tokens}]}
    if reward is not None:
        rec["verdict"] = {"reward": reward}
    return rec


def test_lines_without_a_terminal_carry_the_running_mean(monkeypatch):
    monkeypatch.delenv("RIZZ_PROGRESS", raising=False)
    said: list[str] = []
    session = SimpleNamespace(state=SimpleNamespace(branches={"b0": 0, "b1": 1}))
    with new_progress() as prog:  # pytest captures stderr: not a TTY, so the bar is disabled
        assert prog.disable
        now = [100.0]
        sp = StepProgress(prog, "  default", 25, echo=said.append, clock=lambda: now[0])
        for i in range(25):
            now[0] += 3.0  # each step takes 3 s
            # every 5th step is context-only (no verdict); rewards alternate 1, 0
            sp(_rec(i, None if i % 5 == 4 else float(i % 2 == 0), 100), session)
        sp.finish(25)
    assert len(said) == 2 + 25 // LINE_EVERY == 4  # after the first step, the third (the first ETA), then every 10
    assert said.pop(0) == "default 1/25 steps done: mean reward 1.000 | branches 2 | prompt tokens 100"  # no ETA from one step
    assert said.pop(0) == "default 3/25 steps done: mean reward 0.667 | branches 2 | prompt tokens 300 | ETA 0:01:06"  # 22 steps × 3 s
    # steps 0..9: answered 0,1,2,3,5,6,7,8 → rewards 1,0,1,0,0,1,0,1 → 4/8
    assert said[0] == "default 10/25 steps done: mean reward 0.500 | branches 2 | prompt tokens 1000 | ETA 0:00:45"  # 15 steps × 3 s
    assert said[1].startswith("default 20/25 steps done: mean reward ") and said[1].endswith("| prompt tokens 2000 | ETA 0:00:15")
    assert sp.answered == 20 and abs(sp.mean_reward - sum(float(i % 2 == 0) for i in range(25) if i % 5 != 4) / 20) < 1e-12


def test_no_progress_object_is_silent():
    said: list[str] = []
    sp = StepProgress(None, "x", None, echo=said.append)
    for i in range(30):
        sp(_rec(i, 1.0, 1), SimpleNamespace(state=SimpleNamespace(branches={})))
    assert said == [] and sp.mean_reward == 1.0 and sp.tokens == 30


def test_after_a_resume_the_figures_are_the_whole_runs_as_in_the_summary(tmp_path, monkeypatch):
    """Issue #29 §5: at 20/20 a resumed run said "reward 0.103" (its resumed steps only) while
    summary.json said 0.083093."""
    from pathlib import Path

    from conftest import FakeModel
    from livekit import HashEmbedder
    from test_run import _answer

    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    monkeypatch.delenv("RIZZ_PROGRESS", raising=False)
    src = Path(__file__).resolve().parents[2] / "data" / "trace-mini" / "test.jsonl"
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(src.read_text().splitlines()[:20]) + "\n")
    out, emb = tmp_path / "run", HashEmbedder()
    first = run_stream(stream, load_policy("default"), "default", out, FakeModel(_answer), emb, limit=10, log=lambda m: None)
    said: list[str] = []
    with new_progress() as prog:
        sp = StepProgress(prog, "default", 20, echo=said.append)
        summary = run_stream(stream, load_policy("default"), "default", out, FakeModel(_answer), emb, on_step=sp, on_resume=sp.resume,
                             log=lambda m: None)
    assert first["mean_reward"] != summary["mean_reward"]  # the resumed half differs, so a partial mean would show
    assert said[-1] == (f"default 20/20 steps done: mean reward {summary['mean_reward']:.3f} | branches {summary['branches']['total']}"
                        f" | prompt tokens {summary['prompt_tokens']} | ETA 0:00:00"), (said, summary["mean_reward"])
    assert sp.answered == summary["answered"] and abs(sp.mean_reward - summary["mean_reward"]) < 1e-6


_SLOW_RUN = """
import sys, time
sys.path.insert(0, {shell!r})
from livekit import HashEmbedder, StubModel
class Slow(StubModel):
    name = "fake:slow"
    def generate(self, messages, **kw):
        time.sleep(3600)  # until the test's Ctrl-C (never returns: a loaded machine may show the bar late)
import rizz.adapters.models, rizz.adapters.embedder
rizz.adapters.models.load_model = lambda spec, **kw: Slow()
rizz.adapters.embedder.Embedder = HashEmbedder
from rizz.apps.cli import main
sys.argv = ["rizz", "run", {stream!r}, "--out", {out!r}, "--policy", "frozen"]
main()
"""


def test_ctrl_c_before_the_first_step_says_so_on_its_own_line(tmp_path):
    """Issue #29 §6: Ctrl-C before the first step said "every finished step is in runs/…/log.jsonl"
    (a file that did not exist yet), appended to the progress bar's line. Run in a terminal (a pty)."""
    import os
    import pty
    import re
    import select
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join((root / "data" / "trace-mini" / "test.jsonl").read_text().splitlines()[:3]) + "\n")
    code = _SLOW_RUN.format(shell=str(Path(__file__).resolve().parent), stream=str(stream), out=str(tmp_path / "run"))
    master, slave = pty.openpty()  # the slave stays open here too, so no output is lost when the child exits
    child = subprocess.Popen([sys.executable, "-c", code], stdin=slave, stdout=slave, stderr=slave,
                             env=dict(os.environ, COLUMNS="100", PYTHONPATH=str(root)))
    seen, deadline, sent = b"", time.time() + 300, False
    while time.time() < deadline:
        if not sent and b"0/3" in seen:  # the bar is up: the first step is running
            child.send_signal(signal.SIGINT)
            sent = True
        if select.select([master], [], [], 0.3)[0]:
            seen += os.read(master, 65536)
        elif child.poll() is not None:
            break
    if not sent:
        child.kill()  # the bar never came up: fail below on `sent`, not on a child left sleeping
    child.wait(timeout=30)
    os.close(master)
    os.close(slave)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))
    lines = [line.rstrip("\r").split("\r")[-1] for line in text.split("\n")]  # what each terminal line ends up showing
    said = [line for line in lines if "interrupted" in line]
    assert sent and child.returncode == 130, text[-500:]
    assert said == ["interrupted; no step had finished, so there is nothing to keep; run the same command again to start"], lines[-4:]
    assert not (tmp_path / "run" / "log.jsonl").exists()


def test_on_an_80_column_terminal_the_bar_keeps_its_count_and_times():
    """A newcomer's 80-column terminal showed `frozen ━╸━ 31/… 0:… 0:0… reward 0.230 | …`: the
    running figures took the room of the step count and the times."""
    import io

    from rich.console import Console

    now = [0.0]
    prog = new_progress()
    prog.get_time = lambda: now[0]
    sp = StepProgress(prog, f"{'frozen':>7}", 60)  # rizz bench pads its labels to the longest (here `default`)
    for i in range(31):
        now[0] += 20.0
        sp(_rec(i, 0.0 if i % 4 else 1.0, 200), None)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(prog.make_tasks_table(prog.tasks))
    shown = [ln for ln in out.getvalue().splitlines() if "frozen" in ln][-1]
    assert len(shown) <= 80 and " frozen " in shown and "31/60" in shown and "0:10:20" in shown and "0:09:40" in shown, shown
    assert "mean reward 0.258 | " in shown and shown.rstrip().endswith("…"), shown  # the running figures are what a narrower terminal cuts
    for width, label in ((60, "frozen"), (80, f"{'peer:mem0-infer':>22}")):  # narrower, or a long label: the counts and times stay whole
        prog.tasks[0].description = label
        out = io.StringIO()
        Console(file=out, width=width, color_system=None).print(prog.make_tasks_table(prog.tasks))
        shown = out.getvalue().splitlines()[0]
        assert len(shown) <= width and "31/60" in shown and "0:10:20 0:09:40" in shown, shown


def test_the_eta_of_a_resumed_run_uses_only_its_own_steps():
    """Issue #29 §1: an ETA while it runs; a resumed run's finished steps took no time now."""
    said: list[str] = []
    now = [0.0]
    with new_progress() as prog:
        sp = StepProgress(prog, "frozen", 84, echo=said.append, clock=lambda: now[0])
        now[0] = 50.0  # refolding the log took a while
        sp.resume([_rec(i, 1.0, 10) for i in range(70)])
        for i in range(70, 80):
            now[0] += 2.0
            sp(_rec(i, 0.0, 10), None)
    assert said == ["frozen 71/84 steps done: mean reward 0.986 | branches – | prompt tokens 710",  # the session's first step: no ETA yet
                    "frozen 73/84 steps done: mean reward 0.959 | branches – | prompt tokens 730 | ETA 0:00:22",  # its third; 11 left × 2 s
                    "frozen 80/84 steps done: mean reward 0.875 | branches – | prompt tokens 800 | ETA 0:00:08"]  # 70 of 80 right; 4 left × 2 s


def test_the_first_eta_leaves_out_the_warm_up_and_waits_for_three_steps(monkeypatch):
    """A newcomer saw a first ETA far off: the first step also loads and warms the model up. The
    lines and the bar's time-remaining column show none until a session's third step, and the
    rate leaves the first step out."""
    from rich.progress import TimeRemainingColumn

    from rizz.lab.progress import ETA_AFTER

    said: list[str] = []
    now = [0.0]
    with new_progress() as prog:
        sp = StepProgress(prog, "default", 100, echo=said.append, clock=lambda: now[0])
        for i, seconds in enumerate([60.0, 2.0, 2.0]):  # a first step of 60 s (warm-up), then 2 s each
            now[0] += seconds
            sp(_rec(i, 1.0, 10), None)
    assert ETA_AFTER == 3 and said == ["default 1/100 steps done: mean reward 1.000 | branches – | prompt tokens 10",
                                       "default 3/100 steps done: mean reward 1.000 | branches – | prompt tokens 30 | ETA 0:03:14"]  # 97 × 2 s
    monkeypatch.setenv("RIZZ_PROGRESS", "1")  # the bar, as on a terminal
    with new_progress() as prog:
        prog.get_time = lambda: now[0]  # rich's clock, for its rate
        column = next(c for c in prog.columns if isinstance(c, TimeRemainingColumn))
        sp = StepProgress(prog, "default", 100, echo=said.append)
        shown = []
        for i in range(4):
            now[0] += 2.0
            sp(_rec(i, 1.0, 10), None)
            shown.append(str(column.render(prog.tasks[0])))
        # rich alone would show 0:03:16 after the second step (98 left at its rate of 1 step / 2 s)
        assert shown == ["-:--:--", "-:--:--", "0:03:14", "0:03:12"]
        now[0] += 45.0  # a long step under way: the estimate counts down (rich's rate, over 30 s, showed -:--:--)
        assert str(column.render(prog.tasks[0])) == "0:02:27"
        now[0] += 500.0
        assert str(column.render(prog.tasks[0])) == "0:00:00"
        sp.resume([_rec(i, 1.0, 10) for i in range(50)])  # a new session: no ETA until its own third step
        assert str(column.render(prog.tasks[0])) == "-:--:--"


def test_demo_says_how_long_it_should_take_before_it_starts(tmp_path, monkeypatch):
    """Issue #29 §1: the demo took 31:50 on a loaded machine against the README's 6 min 41 s, with
    no estimate before it started."""
    import json
    import os

    from typer.testing import CliRunner

    from rizz.apps import cli

    ran = []
    monkeypatch.setattr(cli, "_bench", lambda *a, **kw: ran.append(a))
    # the arithmetic, on fixed figures (the shipped ones follow the README's measured table)
    monkeypatch.setattr(cli, "DEMO_STEP_SECONDS", {"frozen": 141.0 / 84, "default": 251.1 / 84})
    monkeypatch.delenv("RIZZ_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cli, "busy_cores", lambda: 0.1)
    out = tmp_path / "demo"
    res = CliRunner().invoke(cli.app, ["demo", "--out", str(out), "--limit", "84"])
    assert res.exit_code == 0 and len(ran) == 1, res.output
    assert res.output.splitlines()[0] == ("rizz demo: frozen, then default, over the first 84 elements of the shipped TRACE slice: "
                                          f"about 6.7 min on idle cores: model load {cli.DEMO_LOAD_SECONDS / 60:.1f} + frozen 2.4 + default 4.2 min;"
                                          " if another CPU-heavy job shares the cores, run it with RIZZ_THREADS=1")
    # a bench folder is not a RUN_DIR: the last line names one policy's run for inspect and diff
    assert res.output.splitlines()[-1] == f"look at it: rizz view {out}   rizz inspect {out / 'default'}   rizz diff {out / 'default'} --at 10"
    (out / "frozen").mkdir(parents=True)  # a resumed demo: frozen finished, default half done, the cores busy
    (out / "frozen" / "log.jsonl").write_text("".join(json.dumps({"step": i, "kind": "step"}) + "\n" for i in range(84)))
    (out / "default").mkdir()
    (out / "default" / "log.jsonl").write_text("".join(json.dumps({"step": i, "kind": kind}) + "\n" for i in range(42)
                                                       for kind in ("step", "distill")))
    monkeypatch.setattr(cli, "busy_cores", lambda: 2.0)
    line = CliRunner().invoke(cli.app, ["demo", "--out", str(out), "--limit", "84"]).output.splitlines()[0]
    assert line.endswith(": about 2.2 min on idle cores: model load 0.1 + default 2.1 min (frozen done); the cores are busy (2.0 of"
                         " 2 in use): expect 4–10 min (2.0–4.8×), as 2 llama.cpp threads lose far more than their share beside"
                         " another job; one (RIZZ_THREADS=1) holds up better: stop the demo and rerun it that way (it resumes)"), line
    (out / "default" / "log.jsonl").write_text("".join(json.dumps({"step": i, "kind": "step"}) + "\n" for i in range(84)))
    line = CliRunner().invoke(cli.app, ["demo", "--out", str(out), "--limit", "84"]).output.splitlines()[0]
    # a finished demo reprints its table: no model load, no advice (it said "about 5 s: model load 5 s")
    assert line.endswith("slice: nothing left to run (frozen, default done)"), line
    line = CliRunner().invoke(cli.app, ["demo", "--out", str(tmp_path / "d2"), "--model", "anthropic"]).output.splitlines()[0]
    assert line.endswith("; no time estimate for --model anthropic (the measured figures are the embedded model's)"), line
    # the default model named in full gets the estimate; the other shipped model does not
    line = CliRunner().invoke(cli.app, ["demo", "--out", str(tmp_path / "d3"), "--model",
                                        "embedded:qwen2.5-coder-1.5b-instruct"]).output.splitlines()[0]
    assert ": about 4.8 min on idle cores: model load 0.1 + frozen 1.7 + default 3.0 min; the cores are busy (" in line, line  # 60 steps
    line = CliRunner().invoke(cli.app, ["demo", "--out", str(tmp_path / "d4"), "--model",
                                        "embedded:qwen2.5-coder-0.5b-instruct"]).output.splitlines()[0]
    assert "no time estimate for --model embedded:qwen2.5-coder-0.5b-instruct" in line, line


def test_the_demo_estimate_on_busy_cores_is_a_range_up_to_the_measured_slowdown_and_its_parts_add_up(tmp_path, monkeypatch):
    """A newcomer's demo beside another CPU-heavy job was told "1.4×: 10 min" and took much longer
    (2 spinning llama.cpp threads lose far more than their share of the cores), with no word of
    RIZZ_THREADS=1; and "7 min (frozen 3, default 3)": the parts did not add up to the total."""
    import os
    import re

    from rizz.apps import cli
    from rizz.lab.progress import BUSY_SLOWDOWN

    monkeypatch.delenv("RIZZ_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cli, "busy_cores", lambda: 0.8)
    line = cli._demo_estimate(tmp_path / "demo", cli.DEMO_LIMIT, "embedded", cli.DEMO_BUDGET)  # the shipped figures
    said = re.search(r"about ([\d.]+) min on idle cores: model load ([\d.]+) \+ frozen ([\d.]+) \+ default ([\d.]+) min;", line)
    assert said, line
    total, *parts = (float(x) for x in said.groups())
    assert abs(total - sum(parts)) < 1e-9 and total == 7.0, line  # 0.1 + 3.5 + 3.4: 5.2 s + 209.0 s + 202.8 s
    span = re.search(r"expect (\d+)–(\d+) min \(1\.4–([\d.]+)×\)", line)
    assert span and int(span[2]) >= 4 * total and float(span[3]) == BUSY_SLOWDOWN[2] >= 4, line
    assert "one (RIZZ_THREADS=1) holds up better" in line and line.endswith(": stop the demo and rerun it that way (it resumes)"), line
    monkeypatch.setenv("RIZZ_THREADS", "1")  # already one thread: no advice to set it, and a narrower range
    line = cli._demo_estimate(tmp_path / "demo", cli.DEMO_LIMIT, "embedded", cli.DEMO_BUDGET)
    assert line.endswith("; the cores are busy (0.8 of 2 in use): expect 7–22 min (1.0–3.2×) with RIZZ_THREADS=1 (one llama.cpp thread)"), line
    assert "holds up better" not in line and "rerun" not in line, line


def test_the_demo_estimate_says_when_the_response_cache_already_holds_replies(tmp_path, monkeypatch):
    """A demo into a new folder holding a filled response cache (copied from an earlier demo) was
    told the full time, while most replies would come from the cache at no model time."""
    import json
    import os

    from rizz.adapters.models import Generation
    from rizz.adapters.models.cache import ResponseCache, replies_held
    from rizz.adapters.models.spec import backend_name
    from rizz.apps import cli

    monkeypatch.setattr(cli, "DEMO_STEP_SECONDS", {"frozen": 141.0 / 84, "default": 251.1 / 84})
    monkeypatch.delenv("RIZZ_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cli, "busy_cores", lambda: 0.1)
    plain = ("rizz demo: frozen, then default, over the first 84 elements of the shipped TRACE slice: "
             "about 6.7 min on idle cores: model load 0.1 + frozen 2.4 + default 4.2 min")
    tail = "; if another CPU-heavy job shares the cores, run it with RIZZ_THREADS=1"
    out = tmp_path / "demo2"
    assert cli._demo_estimate(out, 84, "embedded", cli.DEMO_BUDGET) == plain + tail and not out.exists()  # no cache: as before, nothing made
    name = backend_name("embedded")
    assert name is not None
    with ResponseCache(out / "responses.sqlite") as cache:
        assert cli._demo_estimate(out, 84, "embedded", cli.DEMO_BUDGET) == plain + tail  # an empty cache: as before
        for i in range(3):
            cache.put(f"k{i}", Generation(text="A", prompt_tokens=9, completion_tokens=1, latency_s=1.0, cost_usd=None, model=name, finish_reason="stop"))
        cache.put("other", Generation(text="B", prompt_tokens=9, completion_tokens=1, latency_s=1.0, cost_usd=None, model="anthropic:x", finish_reason="stop"))
    assert replies_held(out / "responses.sqlite", name) == 3 and replies_held(out / "responses.sqlite", "anthropic:x") == 1
    line = cli._demo_estimate(out, 84, "embedded", cli.DEMO_BUDGET)
    assert line == (f"{plain}; {out / 'responses.sqlite'} already holds 3 replies of this model, and a reply found there "
                    f"takes no model time: if they are this demo's, it takes much less{tail}"), line
    # a resumed demo's cache holds its own steps' replies, which the figures per step were measured with: no note
    (out / "frozen").mkdir()
    (out / "frozen" / "log.jsonl").write_text("".join(json.dumps({"step": i, "kind": "step"}) + "\n" for i in range(10)))
    assert "already holds" not in cli._demo_estimate(out, 84, "embedded", cli.DEMO_BUDGET)
    # another model's replies are not this model's
    other = tmp_path / "d3"
    with ResponseCache(other / "responses.sqlite") as cache:
        cache.put("x", Generation(text="B", prompt_tokens=9, completion_tokens=1, latency_s=1.0, cost_usd=None, model="anthropic:x", finish_reason="stop"))
    assert cli._demo_estimate(other, 84, "embedded", cli.DEMO_BUDGET) == plain + tail


def test_demo_refuses_a_bad_model_spec_before_any_time_estimate(tmp_path, monkeypatch):
    """`rizz demo --model embeded` (a typo) said "no time estimate for --model embeded" first, then
    the real error; a bad spec (and oracle, which the demo's data cannot use) is refused first."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    ran = []
    monkeypatch.setattr(cli, "_bench", lambda *a, **kw: ran.append(a))
    for spec, says in (("embeded", "--model: bad model spec 'embeded' (unknown kind 'embeded')"),
                       ("embedded:qwen9", "--model: bad model spec 'embedded:qwen9' (unknown embedded model 'qwen9'"),
                       ("oracle", "--model oracle replays each episode's gold actions")):
        res = CliRunner().invoke(cli.app, ["demo", "--out", str(tmp_path / "d"), "--model", spec])
        assert res.exit_code == 2 and res.output.startswith(says), (spec, res.output)
        assert "time estimate" not in res.output and "rizz demo:" not in res.output, res.output
    assert ran == [] and not (tmp_path / "d").exists()


def test_demo_reads_its_stream_once_and_hands_the_elements_to_the_bench(tmp_path, monkeypatch):
    """It read the shipped slice for its oracle check, then the bench read it again."""
    from typer.testing import CliRunner

    from rizz.apps import cli

    reads, ran = [], []
    real = cli.read_stream
    monkeypatch.setattr(cli, "read_stream", lambda *a, **kw: reads.append(a) or real(*a, **kw))
    monkeypatch.setattr(cli, "_bench", lambda *a, **kw: ran.append(kw))
    res = CliRunner().invoke(cli.app, ["demo", "--out", str(tmp_path / "d")])
    assert res.exit_code == 0 and len(reads) == 1, res.output
    assert [len(kw["elements"]) for kw in ran] == [240]  # the whole shipped slice; --limit applies in the bench


def test_ctrl_c_while_the_model_loads_is_said_and_leaves_no_run_dir(tmp_path, monkeypatch):
    """It exited 130 without a word (typer's default), before the bar even started."""
    from pathlib import Path

    from typer.testing import CliRunner

    from rizz.apps import cli

    def interrupted(spec, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr("rizz.apps.cli.load_model", interrupted)
    src = Path(__file__).resolve().parents[2] / "data" / "trace-mini" / "test.jsonl"
    res = CliRunner().invoke(cli.app, ["run", str(src), "--out", str(tmp_path / "run"), "--limit", "2"])
    assert res.exit_code == 130 and not (tmp_path / "run").exists()
    said = res.output.strip().splitlines()
    assert said[0].startswith("rizz run: 2 of 240 elements of ") and said[0].endswith("; loading the model embedded ...")
    assert said[1:] == ["interrupted; no step had finished, so there is nothing to keep; run the same command again to start"]


def test_bench_says_which_model_it_loads_before_loading_it(tmp_path, monkeypatch):
    """A newcomer's bench printed nothing while the model loaded (a minute for a local model)."""
    from pathlib import Path

    from typer.testing import CliRunner

    from rizz.apps import cli

    said_before_loading = []

    def loading(spec, **kw):
        said_before_loading.append(spec)
        raise KeyboardInterrupt  # Ctrl-C while it loads

    monkeypatch.setattr("rizz.apps.cli.load_model", loading)
    src = Path(__file__).resolve().parents[2] / "data" / "trace-mini" / "test.jsonl"
    out = tmp_path / "bench"
    res = CliRunner().invoke(cli.app, ["bench", str(src), "-P", "frozen,default", "--out", str(out), "--limit", "5",
                                       "--model", "embedded:qwen2.5-coder-1.5b-instruct"])
    said = res.output.strip().splitlines()
    assert said_before_loading == ["embedded:qwen2.5-coder-1.5b-instruct"]
    assert said[0] == (f"rizz bench: 2 policies (frozen, default) over 5 of 240 elements of {src}, into {out}; "
                       "loading the model embedded:qwen2.5-coder-1.5b-instruct ..."), said
    assert res.exit_code == 130 and not out.exists()  # and Ctrl-C then is said, leaving no folder behind
    assert said[1:] == ["interrupted; no step had finished, so there is nothing to keep; run the same command again to start"]


def test_run_and_bench_name_the_model_they_loaded(tmp_path, monkeypatch):
    """A newcomer saw only "loading the model embedded ...": which model plain embedded is, nowhere on the console."""
    from pathlib import Path

    from typer.testing import CliRunner

    from rizz.apps import cli

    class Named:
        name = "embedded:Some-Model.Q4"

    def stop(*a, **kw):
        raise ValueError("stopped here by the test")

    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: Named())
    monkeypatch.setattr("rizz.apps.cli.Embedder", stop)
    src = Path(__file__).resolve().parents[2] / "data" / "trace-mini" / "test.jsonl"
    for args in (["bench", str(src), "-P", "frozen", "--out", str(tmp_path / "b"), "--limit", "2"],
                 ["run", str(src), "--out", str(tmp_path / "r"), "--limit", "2"]):
        said = CliRunner().invoke(cli.app, args).output.strip().splitlines()
        assert said[0].endswith("; loading the model embedded ...") and said[1] == "model: embedded:Some-Model.Q4", said


def _lines(step_seconds: list[float], total: int) -> list[tuple[int, float]]:
    """(steps done, clock) of each plain line said by a run whose steps take ``step_seconds``."""
    from rizz.lab.progress import LINE_SECONDS

    assert LINE_SECONDS == 60.0
    said: list[tuple[int, float]] = []
    now = [0.0]
    with new_progress() as prog:  # not a TTY under pytest: plain lines
        assert prog.disable
        sp = StepProgress(prog, "default", total, echo=lambda m: said.append((int(m.split()[1].split("/")[0]), now[0])),
                          clock=lambda: now[0])
        for i, seconds in enumerate(step_seconds):
            now[0] += seconds
            sp(_rec(i, 1.0, 10), None)
    return said


def test_a_slow_run_says_a_line_at_the_first_step_a_minute_after_the_last(monkeypatch):
    """A slow model (45 s a step) went 10 steps (7.5 min) between lines without a terminal:
    now the first step to end 60 s or more after the last line says one too."""
    monkeypatch.delenv("RIZZ_PROGRESS", raising=False)
    said = _lines([45.0] * 25, 25)
    assert [n for n, _ in said] == [1, 3, 5, 7, 9, 10, 12, 14, 16, 18, 20, 22, 24]  # the counted ones (1, 3, 10, 20) among them
    assert max(b - a for (_, a), (_, b) in zip(said, said[1:])) <= 60.0 + 45.0  # never more than a minute and a step apart


def test_a_fast_run_says_only_its_counted_lines(monkeypatch):
    monkeypatch.delenv("RIZZ_PROGRESS", raising=False)
    assert [n for n, _ in _lines([3.0] * 100, 100)] == [1, 3, *range(10, 101, 10)]
    # 7 s a step: 10 steps take 70 s, so one line a minute at most beside the counted ones
    said = _lines([7.0] * 60, 60)
    assert [n for n, _ in said] == [1, 3, 10, 19, 20, 29, 30, 39, 40, 49, 50, 59, 60]
    assert len(said) - len([1, 3, *range(10, 61, 10)]) <= 60 * 7.0 / 60  # the extra lines: at most one a minute


def test_a_long_first_step_and_a_long_step_later_are_each_followed_by_a_line(monkeypatch):
    monkeypatch.delenv("RIZZ_PROGRESS", raising=False)
    said = _lines([300.0, 2.0, 2.0, 2.0, 2.0, 600.0, 2.0, 2.0], 20)  # warm-up, then a step stuck for 10 min
    assert [n for n, _ in said] == [1, 3, 6]


def test_busy_cores_is_the_machines_cpu_use_now_in_cores(monkeypatch):
    """The demo's estimate reads how busy the cores are now (psutil over a short interval), not
    the 1-minute load average, which still counts setup's pip install for a minute after it ends."""
    import os

    import psutil

    from rizz.lab.progress import busy_cores

    n = psutil.cpu_count() or 1
    assert 0.0 <= busy_cores(0.05) <= n
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # a load average is not read
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval: 25.0)
    assert busy_cores() == 0.25 * n


def test_steps_answered_from_the_response_cache_do_not_make_the_eta(monkeypatch):
    """A newcomer's demo showed `default 10/60 steps done: … | ETA 0:00:02` for minutes of work
    left: default's first steps came from frozen's cached replies in no time. The ETA's rate
    counts only steps that called the model, and waits for two of them after the first step."""
    monkeypatch.delenv("RIZZ_PROGRESS", raising=False)
    said: list[str] = []
    now = [0.0]

    def rec(i: int, cached: bool) -> dict:
        return {"step": i, "calls": [{"prompt_tokens": 10, "cached": cached}], "verdict": {"reward": 1.0}}

    with new_progress() as prog:
        sp = StepProgress(prog, "default", 60, echo=said.append, clock=lambda: now[0])
        for i in range(10):  # the first ten steps: cached replies, 0.01 s each
            now[0] += 0.01
            sp(rec(i, True), None)
        for i in range(10, 13):  # then the model: 6 s a step
            now[0] += 6.0
            sp(rec(i, False), None)
        for i in range(13, 20):
            now[0] += 6.0
            sp(rec(i, False), None)
    assert [line.split(" | ETA ")[1] if " | ETA " in line else None for line in said] == [
        None,  # step 1
        None,  # step 3: no step has called the model yet (the old rate: 2 steps in 0.02 s, ETA 0:00:01)
        None,  # step 10: still none
        "0:04:00",  # step 20: 40 left × 6 s (10 model steps in 60 s)
    ]
