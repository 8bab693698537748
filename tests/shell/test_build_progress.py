"""`make setup`'s install shows the llama.cpp compile's progress (issue #29 §1: ten minutes of
silence, "still running…" nine times)."""

from __future__ import annotations

import sys

from rizz.apps.build_progress import Stages, run

# The shape of `pip install -v` around a source build (from a real llama-cpp-python 0.3.36 build, shortened).
PIP_V = """Collecting llama-cpp-python==0.3.36
  Downloading llama_cpp_python-0.3.36.tar.gz (76.6 MB)
Building wheels for collected packages: llama-cpp-python
  Building wheel for llama-cpp-python (pyproject.toml): started
  Running command Building wheel for llama-cpp-python (pyproject.toml)
  *** Building project with Ninja...
""" + "".join(f"  [{i}/140] /usr/bin/g++ -O3 -c vendor/llama.cpp/src/f{i}.cpp\n" for i in range(1, 141)) + """  *** Created llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl
  Building wheel for llama-cpp-python (pyproject.toml): finished with status 'done'
Successfully built llama-cpp-python
Successfully installed diskcache-5.6.3 llama-cpp-python-0.3.36 rizz-0.1.0
"""


def test_a_source_build_gets_a_line_per_ten_percent_with_its_time():
    now = [0.0]
    stages = Stages(clock=lambda: now[0])
    said = []
    for line in PIP_V.splitlines():
        now[0] += 4.0  # each line 4 s later
        shown = stages.line(line)
        if shown is not None:
            said.append(shown)
    assert said[0] == "building llama-cpp-python from source (it compiles llama.cpp: minutes; a line per 10% of the compile follows)"
    progress = said[1:-2]
    assert [p.split(":")[1].split("%")[0].strip() for p in progress] == [str(n) for n in range(10, 101, 10)]
    assert progress[0] == "  llama-cpp-python: 10% compiled (14/140 steps), 1 min 4 s"  # 16 lines after the start, 4 s each
    assert said[-2] == "built llama-cpp-python in 9 min 36 s" and said[-1] == "installed 3 packages"


def test_make_percentages_and_errors_pass_and_the_rest_stays_in_the_log():
    stages = Stages(clock=lambda: 0.0)
    assert stages.line("  [ 35%] Building CXX object ggml.cpp.o") is None  # not building: pip's own noise
    stages.line("  Building wheel for rouge-score (setup.py): started")
    assert stages.line("  [ 35%] Building CXX object x.o") == "  rouge-score: 35% compiled, 0 s"
    assert stages.line("  [ 38%] Building CXX object y.o") is None and stages.line("  [ 40%] Linking z") == "  rouge-score: 40% compiled, 0 s"
    assert stages.line("ERROR: No matching distribution found for nope") == "ERROR: No matching distribution found for nope"
    assert stages.line("  Collecting numpy") is None


def test_run_logs_everything_says_little_and_keeps_the_exit_status(tmp_path):
    script = tmp_path / "fake_pip.py"
    script.write_text(f"import sys, time\nsys.stdout.write({PIP_V!r})\nsys.stdout.flush()\ntime.sleep(1.5)\nprint('late line')\nsys.exit(3)\n")
    said: list[str] = []
    code = run([sys.executable, str(script)], tmp_path / "pip.log", say=said.append, quiet_s=1.0)
    assert code == 3
    log = (tmp_path / "pip.log").read_text()
    assert log == PIP_V + "late line\n"
    assert said[0].startswith("building llama-cpp-python from source") and "installed 3 packages" in said
    assert any(s.startswith("still installing: ") and s.endswith(f"(the whole output goes to {tmp_path / 'pip.log'})") for s in said), said
    i = said.index(f"the install failed (exit 3); the last 40 lines of {tmp_path / 'pip.log'}:")
    assert said[i + 1:] == log.splitlines()[-40:]
    assert i < 15  # ~150 lines of output, a few printed before the tail
