"""Per-step progress for long runs: one ``rich`` bar per run, or a plain line every 10 steps
when stderr is not a terminal (CI logs, ``nohup``), so a long bench is never silent.

``RIZZ_PROGRESS=1`` forces the bar on without a terminal.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

__all__ = ["new_progress", "StepProgress"]

#: Steps between plain progress lines when no terminal shows the bar.
LINE_EVERY = 10


def new_progress() -> Any:
    """A ``rich.progress.Progress`` (disabled when stderr is not a TTY and RIZZ_PROGRESS≠1)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), TextColumn("{task.fields[info]}"), transient=False,
                    disable=not sys.stderr.isatty() and os.environ.get("RIZZ_PROGRESS") != "1")


class StepProgress:
    """The ``on_step`` (and ``on_resume``) callback of :func:`rizz.shell.run.run_stream` for one run.

    Keeps the running mean reward (over answered steps) and prompt tokens (all calls) of the
    whole run, the steps a resumed run had finished included (:meth:`resume`), so the figures
    equal ``summary.json``'s ``mean_reward`` and ``prompt_tokens``; shows them with the branch
    count on ``progress``'s bar ``label``; without a terminal it calls ``echo`` with
    ``"<label> N/T steps done: reward … | branches … | tokens …"`` every ``LINE_EVERY`` steps
    (a count: ``rizz diff`` numbers steps from 0, so N steps done are steps 0..N-1).
    """

    def __init__(self, progress: Any, label: str, total: int | None,
                 echo: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)) -> None:
        self.progress, self.label, self.total, self.echo = progress, label, total, echo
        self.task = progress.add_task(label, total=total, info="") if progress is not None else None
        self.reward_sum, self.answered, self.tokens = 0.0, 0, 0

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
        :func:`rizz.shell.logfold.views` joins them) and start the bar there; its time
        estimate then uses only the steps run from now on."""
        for rec in records:
            self._count(rec)
        if self.progress is not None:
            info = f"reward {self.mean_reward:.3f} | branches – | tokens {self.tokens}" if records else ""
            self.progress.reset(self.task, completed=len(records), info=info)

    def __call__(self, rec: dict[str, Any], session: Any) -> None:
        self._count(rec)
        info = f"reward {self.mean_reward:.3f} | branches {len(session.state.branches) if session is not None else '–'} | tokens {self.tokens}"
        done = rec["step"] + 1
        if self.progress is None:
            return
        self.progress.update(self.task, completed=done, info=info)
        if self.progress.disable and done % LINE_EVERY == 0:
            of = f"/{self.total}" if self.total is not None else ""
            self.echo(f"{self.label.strip()} {done}{of} steps done: {info}")

    def finish(self, steps: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=steps)
