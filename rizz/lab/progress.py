"""Per-step progress for long runs: one ``rich`` bar per run, or a plain line every 10 steps
when stderr is not a terminal (CI logs, ``nohup``), and at the first step to end a minute or
more after the last line, so a long bench (or a slow model's) is never silent for long.

``RIZZ_PROGRESS=1`` forces the bar on without a terminal.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from rizz.extras import extra_needed

__all__ = ["BUSY_SLOWDOWN", "ETA_AFTER", "LINE_EVERY", "LINE_SECONDS", "busy_cores", "clock_text", "new_progress", "nothing_left",
           "StepProgress", "time_estimate"]

#: Steps between plain progress lines when no terminal shows the bar.
LINE_EVERY = 10
#: Seconds after which the next step to end says a plain line too, however few steps it is
#: since the last one (a slow model's 10 steps can take many minutes); a fast run is not
#: slowed to more than one such line a minute.
LINE_SECONDS = 60.0
#: Steps a session runs before its time remaining is shown (on the bar and the lines). The first
#: step also pays for warming up (the model's first call, the embedder's first batch), so the
#: rate leaves it out, and two steps after it are the fewest it is taken from.
ETA_AFTER = 3


def new_progress() -> Any:
    """A ``rich.progress.Progress`` (disabled when stderr is not a TTY and RIZZ_PROGRESS≠1). Its
    time-remaining column shows ``-:--:--`` on a :class:`StepProgress` bar until that session has
    run :data:`ETA_AFTER` steps, then StepProgress's estimate (the lines' ETA), counting down
    between steps (rich's own rate, over a 30-second window, dropped to ``-:--:--`` whenever one
    step took longer). The running figures (mean reward, branches, prompt tokens) take the width the counts
    and times leave and are cut with ``…`` on a narrow terminal."""
    with extra_needed("cli", "the progress bar"):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.text import Text

    from rich.table import Column

    class Remaining(TimeRemainingColumn):
        def render(self, task: Any) -> Any:
            if not task.finished and task.fields.get("steps_run", ETA_AFTER) < ETA_AFTER:
                return Text("-:--:--", style="progress.remaining")
            if not task.finished and "eta_s" in task.fields:  # StepProgress's estimate, counting down between steps
                left = task.fields["eta_s"] - (task.get_time() - task.fields["eta_at"])
                return Text(clock_text(max(0.0, left)), style="progress.remaining")
            return super().render(task)

    class Figures(TextColumn):  # one line, cut with "…" to the width the other columns leave
        def render(self, task: Any) -> Any:
            text = super().render(task)
            text.no_wrap, text.overflow = True, "ellipsis"
            return text

    # the counts and times keep their width (no_wrap); the running figures' column is the one the table
    # narrows on a small terminal (a column that may wrap), and the text in it is cut with "…"
    return Progress(TextColumn("{task.description}", table_column=Column(no_wrap=True, min_width=6)),
                    BarColumn(bar_width=20), MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=9)),
                    TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
                    Remaining(table_column=Column(no_wrap=True, min_width=7)),
                    Figures("{task.fields[info]}", table_column=Column(overflow="ellipsis", ratio=1, min_width=1)),
                    transient=False, disable=not sys.stderr.isatty() and os.environ.get("RIZZ_PROGRESS") != "1")


class StepProgress:
    """The ``on_step`` (and ``on_resume``) callback of :func:`rizz.engine.run.run_stream` for one run.

    Keeps the running mean reward (over answered steps) and prompt tokens (all calls) of the
    whole run, the steps a resumed run had finished included (:meth:`resume`), so the figures
    equal ``summary.json``'s ``mean_reward`` and ``prompt_tokens``; shows them with the branch
    count on ``progress``'s bar ``label`` (whose columns give elapsed and remaining time); without
    a terminal it calls ``echo`` with ``"<label> N/T steps done: mean reward … | branches … | prompt tokens …
    | ETA h:mm:ss"`` after this session's first step, after its ``ETA_AFTER``-th (the first
    with an ETA), every ``LINE_EVERY`` steps (a count: ``rizz diff`` numbers steps from 0, so N
    steps done are steps 0..N-1), and after any step that ends ``LINE_SECONDS`` or more after
    the last line (a step under way says nothing until it ends). The ETA is the mean time of this
    session's steps after its first (which also warms the model up) that called the model, times
    the steps left; it is left out until ``ETA_AFTER`` − 1 such steps have run. A step whose
    every call came from the response cache is not counted: ``default`` after ``frozen`` answers
    a branch's first steps from ``frozen``'s replies in no time, which made its ETA a few seconds
    for a run of minutes. ``clock``: seconds, monotonic (tests pass their own).
    """

    def __init__(self, progress: Any, label: str, total: int | None,
                 echo: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
                 clock: Callable[[], float] | None = None) -> None:
        if clock is None:  # the bar's own clock, which its time-remaining column reads
            clock = progress.get_time if progress is not None else time.monotonic
        self.progress, self.label, self.total, self.echo, self.clock = progress, label, total, echo, clock
        self.task = progress.add_task(label, total=total, info="", steps_run=0) if progress is not None else None
        self.reward_sum, self.answered, self.tokens = 0.0, 0, 0
        self.done0 = 0  # the steps finished before this session
        self.last: float | None = None  # when this session's previous step ended
        self.model_s, self.model_steps = 0.0, 0  # this session's steps after its first that called the model, and their time
        self.said_at: float | None = None  # when the last plain line was said

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.answered if self.answered else 0.0

    def _count(self, rec: dict[str, Any]) -> None:
        if "verdict" in rec:
            self.reward_sum += rec["verdict"]["reward"]
            self.answered += 1
        self.tokens += sum(c["prompt_tokens"] for c in rec["calls"])

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Count the steps a resumed run had finished (one record per element, as
        :func:`rizz.engine.logfold.views` joins them) and start the bar there; its time
        estimate then uses only the steps run from now on."""
        for rec in records:
            self._count(rec)
        self.done0, self.last, self.model_s, self.model_steps = len(records), None, 0.0, 0
        if self.progress is not None:
            info = f"mean reward {self.mean_reward:.3f} | branches – | prompt tokens {self.tokens}" if records else ""
            self.progress.reset(self.task, completed=len(records), info=info, steps_run=0)

    def __call__(self, rec: dict[str, Any], session: Any) -> None:
        self._count(rec)
        branches = len(session.state.branches) if session is not None else "–"
        info = f"mean reward {self.mean_reward:.3f} | branches {branches} | prompt tokens {self.tokens}"
        done = rec["step"] + 1
        run = done - self.done0  # this session's steps
        now = self.clock()
        if run > 1 and self.last is not None and any(not c.get("cached") for c in rec["calls"]):
            self.model_s, self.model_steps = self.model_s + (now - self.last), self.model_steps + 1
        self.last = now
        if self.progress is None:
            return
        eta_s = None
        if self.total is not None and self.model_steps >= ETA_AFTER - 1:
            eta_s = self.model_s / self.model_steps * max(0, self.total - done)
        fields = {"eta_s": eta_s, "eta_at": now} if eta_s is not None else {}
        self.progress.update(self.task, completed=done, info=info, steps_run=run, **fields)
        # the first, the first with an ETA, every LINE_EVERY, and the first a minute after the last line
        if self.progress.disable and (done % LINE_EVERY == 0 or run in (1, ETA_AFTER)
                                      or (self.said_at is not None and now - self.said_at >= LINE_SECONDS)):
            self.said_at = now
            of = f"/{self.total}" if self.total is not None else ""
            eta = f" | ETA {clock_text(eta_s)}" if eta_s is not None else ""
            self.echo(f"{self.label.strip()} {done}{of} steps done: {info}{eta}")

    def finish(self, steps: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=steps)


def clock_text(seconds: float) -> str:
    """``h:mm:ss`` (as rich's time columns show it).

    Example:
        >>> clock_text(0), clock_text(61.4), clock_text(3725)
        ('0:00:00', '0:01:01', '1:02:05')
    """
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _span(low: float, high: float) -> str:
    """``low``–``high`` seconds in one unit: ``10–48 min``, or ``20 s–2 min`` across 90 s."""
    if low >= 90:
        return f"{low / 60:.0f}–{high / 60:.0f} min"
    if high < 90:
        return f"{low:.0f}–{high:.0f} s"
    return f"{_minutes(low)}–{_minutes(high)}"


def busy_cores(seconds: float = 0.5) -> float:
    """Cores other processes keep busy now: the machine's CPU use over the next ``seconds``
    (psutil's ``cpu_percent``; the caller sleeps meanwhile) times its logical cores, in [0, cores].

    Not the 1-minute load average, which still counts for a minute what has just ended (under
    ``make demo``, setup's own pip install: it said 1.6 busy cores of 2 on an idle machine and
    foretold 18 minutes for a demo of 7)."""
    with extra_needed("cli", "the demo's time estimate"):
        import psutil

    return float(psutil.cpu_percent(interval=seconds)) / 100.0 * (psutil.cpu_count() or 1)


#: How many times slower than on idle cores a run of ``n`` llama.cpp threads (2 or more, or 1)
#: can go beside another CPU-heavy process: llama.cpp's OpenMP threads spin-wait, so two of them
#: slow down far more than their share of the cores. Measured: ``rizz demo`` took 31 min 50 s on
#: a loaded machine against 6 min 41 s on a quiet one (4.8×, issue #29, SmolLM2-135M); that model
#: with 2 threads beside a busy process fell from ~260 to ~37 prompt tokens/s (7×) and from
#: 80–120 to ~9 generated tokens/s, while 1 thread kept ~82 and ~69 (3.2× and ~1.4× the idle
#: 2 threads' time; rizz/adapters/models/embedded.py's docstring).
BUSY_SLOWDOWN = {2: 4.8, 1: 3.2}


def nothing_left(steps_left: Mapping[str, int]) -> str | None:
    """``'nothing left to run (frozen, default done)'`` when no policy has a step left, else None.

    Example:
        >>> nothing_left({"frozen": 0, "default": 0})
        'nothing left to run (frozen, default done)'
    """
    if any(steps_left.values()):
        return None
    return f"nothing left to run ({', '.join(steps_left)} done)"


def time_estimate(steps_left: Mapping[str, int], seconds_per_step: Mapping[str, float], load: float, cores: int,
                  threads: int, start_seconds: float = 0.0) -> str:
    """A run's time, said before it starts: ``start_seconds`` (loading the model) plus
    ``steps_left`` per policy times its measured ``seconds_per_step`` (on ``cores`` idle cores),
    each part named, rounded so that the parts add up to the total shown (tenths of a minute, or
    seconds under 90 s). When other processes keep the cores busy (``load``: the cores in use
    now, :func:`busy_cores`, ≥ 0.5) it says so and gives a range: from ``(load + threads) /
    cores`` times that (the share of the cores the run's ``threads`` model threads get beside
    that load) to :data:`BUSY_SLOWDOWN` times it (what llama.cpp's spinning threads were measured
    to lose beside another job), and with 2 or more threads suggests ``RIZZ_THREADS=1``.

    Example:
        >>> time_estimate({"frozen": 84, "default": 84}, {"frozen": 1.7, "default": 3.0}, 0.1, 2, 2, 5.2)
        'about 6.7 min on idle cores: model load 0.1 + frozen 2.4 + default 4.2 min'
        >>> time_estimate({"frozen": 0, "default": 42}, {"frozen": 1.7, "default": 3.0}, 1.6, 2, 2, 5.2)
        'about 2.2 min on idle cores: model load 0.1 + default 2.1 min (frozen done); the cores are busy (1.6 of 2 in use): expect 4–10 min (1.8–4.8×), as 2 llama.cpp threads lose far more than their share beside another job; one (RIZZ_THREADS=1) holds up better'
        >>> time_estimate({"default": 42}, {"default": 3.0}, 1.6, 2, 1)
        'about 2.1 min on idle cores: default 2.1 min; the cores are busy (1.6 of 2 in use): expect 3–7 min (1.3–3.2×) with RIZZ_THREADS=1 (one llama.cpp thread)'
        >>> time_estimate({"frozen": 3}, {"frozen": 1.7}, 0.1, 2, 2)
        'about 5 s on idle cores: frozen 5 s'
        >>> time_estimate({"frozen": 0, "default": 0}, {"frozen": 1.7, "default": 3.0}, 1.6, 2, 2, 5.2)
        'nothing left to run (frozen, default done)'
    """  # noqa: E501 - a doctest's output is one line
    finished = nothing_left(steps_left)
    if finished is not None:  # a finished run: nothing is run, the model not loaded
        return finished
    per = {p: n * seconds_per_step[p] for p, n in steps_left.items() if n}
    done = [p for p, n in steps_left.items() if not n]
    parts = ({"model load": start_seconds} if start_seconds else {}) | per
    total = sum(parts.values())
    if total >= 90:  # each part rounded first, so that they add up to the total said
        shown = {k: round(v / 60, 1) for k, v in parts.items()}
        text = f"about {sum(shown.values()):.1f} min on idle cores: " + " + ".join(f"{k} {v:.1f}" for k, v in shown.items()) + " min"
    else:
        secs = {k: round(v) for k, v in parts.items()}
        text = f"about {sum(secs.values())} s on idle cores: " + " + ".join(f"{k} {v}" for k, v in secs.items()) + " s"
    if done:
        text += f" ({', '.join(done)} done)"
    if load >= 0.5:
        low = max(1.0, (load + threads) / cores)
        high = max(low, BUSY_SLOWDOWN[min(threads, 2)])
        text += f"; the cores are busy ({load:.1f} of {cores} in use): expect {_span(total * low, total * high)} ({low:.1f}–{high:.1f}×)"
        if threads >= 2:
            text += f", as {threads} llama.cpp threads lose far more than their share beside another job; one (RIZZ_THREADS=1) holds up better"
        else:
            text += " with RIZZ_THREADS=1 (one llama.cpp thread)"
    return text
