"""Steps that did not fit the prompt budget, said where a run's figures are read.

A step whose input (an agent episode's next prompt: its tools, the task, the transcript so far)
does not fit the prompt budget is not sent to the model: its record says ``"overflow": true``
(an episode's stop is ``overflow``) and it is scored 0, which counts in every mean as a wrong
answer would. A run with such steps is easy to misread as the model failing, so ``rizz run``
and ``rizz bench`` say so after the run (:func:`overflow_note`), and ``report.md`` counts them.

An agent episode also ends as ``overflow`` when an OpenAI-compatible server refuses a request
that fit the budget as too long for its context window: that prompt was sent (one of the
episode's model calls, a call marked ``"refused": true`` in the record), and the note says so
apart. A log written before refused calls were logged reads such a step as one over the budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rizz.engine.logfold import views
from rizz.formats.wording import plural
from rizz.store.runlog import RunDir

__all__ = ["overflow_by_task", "overflow_note", "overflow_tasks_text", "refused_by_server"]


def overflow_by_task(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """``{task: overflowed steps}`` (sorted by task; ``-`` for a step without one) over
    ``records``, one per element as :func:`~rizz.engine.logfold.views` joins them."""
    out: dict[str, int] = {}
    for r in records:
        if r.get("overflow"):
            task = r.get("task") or "-"
            out[task] = out.get(task, 0) + 1
    return dict(sorted(out.items()))


def refused_by_server(record: dict[str, Any]) -> bool:
    """Whether an overflowed step's prompt was sent and refused by an OpenAI-compatible server as
    too long for its window: its record holds a call marked ``refused``."""
    return any(c.get("refused") for c in record.get("calls") or ())


def overflow_tasks_text(by_task: dict[str, int]) -> str:
    """``multi_turn_base: 4, parallel: 1``: :func:`overflow_by_task` in words."""
    return ", ".join(f"{t}: {n}" for t, n in by_task.items())


def _limit(cap: int | None, policy_budget: int | None, window: int | None) -> tuple[str, str]:
    """Which limit the budget was (:func:`rizz.engine.answering.budget`: the smallest of
    ``--budget``, the policy's ``compiler.token_budget`` and the model's window less the
    reply's tokens), and what could let the steps run, in words. ``window`` None: not known
    here (an already finished run is reported without loading the model)."""
    inf = float("inf")
    win = inf if window is None else window
    if cap is not None and cap <= (inf if policy_budget is None else policy_budget) and cap < win:
        upto = "the model's window" if window is None else f"the model's window, {window} tokens, less the reply's"
        return f"--budget {cap}", f"a larger --budget (up to {upto}) may let them run"
    if policy_budget is not None and policy_budget < win and (cap is None or policy_budget <= cap):
        return (f"the policy's compiler.token_budget, {policy_budget}",
                "a policy with a larger compiler.token_budget may let them run")
    if window is not None:
        return f"the model's window, {window} tokens, less the reply's", "only a model with a larger window could run them"
    return "the model's window less the reply's", "only a model with a larger window could run them"


def overflow_note(run_dir: str | Path, summary: dict[str, Any], *, name: str | None = None, window: int | None = None) -> str | None:
    """One line saying how many of the run's steps overflowed the prompt budget, by task, and
    what could let them run; None when none did (``summary["overflow"]``, 0 or absent: the log
    is not read).

    ``summary``: the run's ``summary.json``; ``name``: the policy as the line names it
    (default: ``run.json``'s); ``window``: the model's context window in tokens, when known (else ``run.json``'s
    ``context_window``, recorded when the run started).

    Example line::

        default: 4 of 20 steps did not fit the prompt budget (--budget 2048) and were scored 0
        without their prompt being sent to the model (multi_turn_base: 4); a larger --budget (up
        to the model's window, 32768 tokens, less the reply's) may let them run

    Steps whose request the server refused (a call marked ``refused``) are said apart: all of
    them (``default: 2 of 20 steps were scored 0: the server refused their prompt as too long
    for its context window (multi_turn_base: 2); a larger context window on the server may let
    them run``), or some of them (``default: 4 of 20 steps overflowed and were scored 0: 3 did
    not fit the prompt budget (--budget 2048) and were not sent to the model, the server refused
    1 as too long for its context window (multi_turn_base: 4); for those over the budget, a
    larger --budget (…) may let them run; for the refused, a larger context window on the server
    may let them run``).
    """
    if not summary.get("overflow"):
        return None
    rd = RunDir(run_dir)
    try:
        meta = rd.meta()
    except FileNotFoundError:
        meta = {}
    records = views(list(rd.records()))
    over = [r for r in records if r.get("overflow")]
    if not over:
        return None
    by_task = overflow_by_task(over)
    n = len(over)
    policy_budget = ((meta.get("policy_data") or {}).get("compiler") or {}).get("token_budget")
    limit, hint = _limit(meta.get("budget_cap"), policy_budget, window if window is not None else meta.get("context_window"))
    who = name or meta.get("policy") or Path(run_dir).name
    did, tasks = f"{n} of {plural(len(records), 'step')}", overflow_tasks_text(by_task)
    were = "was" if n == 1 else "were"
    # sent, but the server refused it as too long for its window: the record holds that call, marked refused
    refused = sum(1 for r in over if refused_by_server(r))
    server = "a larger context window on the server may let them run"
    if refused == n:
        return (f"{who}: {did} {were} scored 0: the server refused {'its' if n == 1 else 'their'} prompt as too long for its "
                f"context window ({tasks}); {server}")
    if refused:
        return (f"{who}: {did} overflowed and were scored 0: {n - refused} did not fit the prompt budget ({limit}) and "
                f"{'was' if n - refused == 1 else 'were'} not sent to the model, the server refused {refused} as too long for "
                f"its context window ({tasks}); for those over the budget, {hint}; for the refused, {server}")
    # an agent episode can overflow after turns that were sent: its record holds their answer calls
    sent = any(c.get("kind") == "answer" for r in over for c in r.get("calls") or ())
    how = "(an agent episode stops at its first prompt that does not fit)" if sent else \
        f"without {'its' if len(over) == 1 else 'their'} prompt being sent to the model"
    return f"{who}: {did} did not fit the prompt budget ({limit}) and {were} scored 0 {how} ({tasks}); {hint}"
