"""``make setup``'s ``pip install``, with a line per build stage instead of a silent compile.

Usage (the Makefile's; standard library only, since it runs before rizz is installed)::

    python rizz/apps/build_progress.py LOG -- pip install -v -e '.[test,peers]'

Runs the command, writes its whole output to ``LOG`` and prints only:

- a line when a package starts building from source (llama-cpp-python compiles llama.cpp),
  then one each time its compile passes another :data:`STEP_PERCENT` % (``[56/140]`` from
  Ninja, ``[ 40%]`` from Make) with the time since the build started, and one when it is built;
- pip's errors (``ERROR: …``) and its closing ``Successfully installed …`` (as a count);
- ``still installing: 4 min 0 s …`` after :data:`QUIET_S` seconds without another line.

When the command fails, the last :data:`TAIL_LINES` lines of ``LOG`` follow; the exit status is
the command's.
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["QUIET_S", "STEP_PERCENT", "TAIL_LINES", "Stages", "main"]

#: A compile's progress is said each time it passes another this many percent.
STEP_PERCENT = 10
#: Seconds without a printed line before a "still installing" line.
QUIET_S = 60.0
#: Lines of the log shown when the command fails.
TAIL_LINES = 40

_BUILD_START = re.compile(r"^\s*Building wheel for (\S+) \((?:pyproject\.toml|setup\.py)\): started")
_BUILD_END = re.compile(r"^\s*Building wheel for (\S+) \((?:pyproject\.toml|setup\.py)\): finished with status '(\w+)'")
_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\] ")
_MAKE = re.compile(r"^\s*\[\s*(\d+)%\] ")
_INSTALLED = re.compile(r"^Successfully installed (.+)$")


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


class Stages:
    """Turns the command's output lines into the few lines worth printing (:meth:`line`).

    ``clock``: seconds, monotonic (tests pass their own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.building: str | None = None  # the package being built from source
        self.started = 0.0  # when its build started
        self.said = 0  # the last percentage said for it

    def line(self, text: str) -> str | None:
        """What to print for one output line (without its newline), or None."""
        if m := _BUILD_START.match(text):
            self.building, self.started, self.said = m.group(1), self.clock(), 0
            note = " (it compiles llama.cpp: minutes" if "llama" in self.building else " (if it compiles"
            return f"building {self.building} from source{note}; a line per {STEP_PERCENT}% of the compile follows)"
        if m := _BUILD_END.match(text):
            took = _duration(self.clock() - self.started)
            self.building = None
            return f"built {m.group(1)} in {took}" if m.group(2) == "done" else f"building {m.group(1)} failed after {took}"
        if self.building is not None and (m := _NINJA.match(text) or _MAKE.match(text)):
            pct = 100 * int(m.group(1)) // int(m.group(2)) if m.re is _NINJA else int(m.group(1))
            if pct >= self.said + STEP_PERCENT:
                self.said = pct - pct % STEP_PERCENT
                files = f" ({m.group(1)}/{m.group(2)} steps)" if m.re is _NINJA else ""
                return f"  {self.building}: {pct}% compiled{files}, {_duration(self.clock() - self.started)}"
            return None
        if text.startswith("ERROR:"):
            return text
        if m := _INSTALLED.match(text):
            return f"installed {len(m.group(1).split())} packages"
        return None


def run(command: list[str], log: Path, say: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
        quiet_s: float = QUIET_S) -> int:
    """Run ``command`` as the module docstring says; returns its exit status."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
    lines: queue.Queue[str | None] = queue.Queue()

    def read(stream: Iterable[str]) -> None:
        for text in stream:
            lines.put(text)
        lines.put(None)

    threading.Thread(target=read, args=(proc.stdout,), daemon=True).start()
    stages, t0 = Stages(clock), clock()
    last_said = t0
    with open(log, "w", encoding="utf-8") as out:
        while True:
            try:
                text = lines.get(timeout=1.0)
            except queue.Empty:
                text = ""
            if text is None:
                break
            if text:
                out.write(text)
                out.flush()
                shown = stages.line(text.rstrip("\n"))
                if shown is not None:
                    say(shown)
                    last_said = clock()
            if clock() - last_said >= quiet_s:
                say(f"still installing: {_duration(clock() - t0)} (the whole output goes to {log})")
                last_said = clock()
    code = proc.wait()
    if code != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
        say(f"the install failed (exit {code}); the last {len(tail)} lines of {log}:")
        for text in tail:
            say(text)
    return code


def main(argv: list[str]) -> int:
    """``LOG -- COMMAND...``."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python build_progress.py LOG -- COMMAND...", file=sys.stderr)
        return 2
    return run(argv[2:], Path(argv[0]), say=lambda m: print(m, flush=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
