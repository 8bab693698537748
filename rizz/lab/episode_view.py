"""Episodes for a person: what ``rizz diff`` and ``rizz inspect --episodes`` print (docs/agents.md).

An episode reads top to bottom as request → calls → results → final answer, one line an event:

    episode: 3 agent calls, 0 tool errors, 1 user turns, stop user_stop
      user: Hi, I need help with order #W2378156.
      agent: get_order_details(order_id='#W2378156')
      tool get_order_details: {"order_id": "#W2378156", "status": "delivered", ...}
      final answer: Your return is requested; the refund goes to your gift card.

Each call of a reply gets its own ``agent:`` line (parallel calls stay readable); a malformed
reply shows as ``agent (malformed):``. Texts are cut to one line of :data:`WIDTH` characters.
A transcript longer than :data:`MAX_EVENTS` events shows its first :data:`HEAD` and last
:data:`TAIL` events around a ``… N events not shown`` line, unless ``full``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rizz.engine.run import check_step, records_until
from rizz.formats.logrecord import opens_step, steps_in
from rizz.formats.wording import plural
from rizz.store.runlog import RunDir

__all__ = ["HEAD", "MAX_EVENTS", "TAIL", "WIDTH", "episode_lines", "episode_rows", "episodes_text"]

#: Characters per printed text (user turn, call, tool result, final answer); rizz's choice: one
#: terminal line with the indent and label.
WIDTH = 100
#: A transcript with more events than this is shown as its first HEAD and last TAIL events.
MAX_EVENTS, HEAD, TAIL = 24, 12, 10


def _clip(text: Any, n: int = WIDTH) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _call(name: str, args: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _event_lines(e: dict[str, Any], indent: str) -> list[str]:
    if e["role"] == "user":
        return [f"{indent}user: {_clip(e['text'])}"]
    if e["role"] == "assistant":
        if e.get("malformed"):
            return [f"{indent}agent (malformed): {_clip(e['text'])}"]
        calls = e.get("calls") or []
        if calls:
            return [f"{indent}agent: {_clip(_call(n, a))}" for n, a in calls]
        return [f"{indent}agent: {_clip(e['text'])}"]
    label = "tool error" if e.get("error") else "tool"
    return [f"{indent}{label} {e.get('name') or '(call)'}: {_clip(e['result'])}"]


def episode_lines(ep: dict[str, Any], *, full: bool = False, indent: str = "  ", reward: float | None = None) -> list[str]:
    """``ep`` (a log record's ``episode`` part) as lines (see the module docstring). ``reward``:
    the episode's verdict when known; a verified one (reward 1) shows no "first wrong call" line,
    which only a failed verdict writes as an anti-pattern."""
    events = list(ep["transcript"])
    users = sum(1 for e in events if e["role"] == "user")
    out = [f"{indent}episode: {plural(ep['model_calls'], 'agent call')}, {plural(ep['tool_errors'], 'tool error')}, "
           f"{plural(users, 'user turn')}, stop {ep['stop']}"]
    inner = indent + "  "
    shown: list[Any] = events
    if not full and len(events) > MAX_EVENTS:
        shown = events[:HEAD] + [len(events) - HEAD - TAIL] + events[-TAIL:]
    for e in shown:
        if isinstance(e, int):
            out.append(f"{inner}… {plural(e, 'event')} not shown (--full shows them)")
        else:
            out += _event_lines(e, inner)
    finals = [e["text"] for e in events if e["role"] == "assistant" and not e.get("calls") and not e.get("malformed")]
    out.append(f"{inner}final answer: {_clip(finals[-1]) if finals else '(none)'}")
    if ep.get("wrong_call") and (reward is None or reward < 1.0):
        when = "the anti-pattern if the verdict fails" if reward is None else "written as the anti-pattern"
        out.append(f"{inner}first wrong call ({when}): {_clip(ep['wrong_call'])}")
    return out


def episode_rows(run_dir: str | Path, at: int | None = None) -> list[dict[str, Any]]:
    """The run's episodes in log order: ``step``, ``id``, ``task``, ``reward`` and ``verifier``
    (None while the verdict is not in the log), and the record's ``episode`` part. With ``at``,
    those of steps 0..``at`` as the state after step ``at`` holds them (``rizz inspect --at``):
    the log up to step ``at + 1``'s record (:func:`rizz.engine.run.records_until`), so a verdict
    logged after it is not in yet.

    Raises FileNotFoundError: no run at ``run_dir``; ValueError: ``at`` negative or past the
    log's last step (:func:`rizz.engine.run.check_step`)."""
    rd = RunDir(run_dir)
    rd.meta()  # FileNotFoundError when there is no run here
    records = list(rd.records())
    if at is not None:
        check_step(run_dir, at, steps_in(records))
        records = records_until(records, at)
    verdicts = {(r["id"], r["step"]): r["verdict"] for r in records if r.get("verdict")}
    rows = []
    for r in records:
        if r.get("episode") and opens_step(r):
            v = verdicts.get((r["id"], r["step"])) or {}
            rows.append({"step": r["step"], "id": r["id"], "task": r.get("task"), "reward": v.get("reward"),
                         "verifier": v.get("verifier"), "episode": r["episode"]})
    return rows


def episodes_text(run_dir: str | Path, *, full: bool = False, at: int | None = None) -> str:
    """Every episode of the run (with ``at``, up to step ``at``: :func:`episode_rows`), a heading
    line (step, id, task, reward) and its lines.

    Raises FileNotFoundError: no run at ``run_dir``; ValueError: ``at`` not a step of its log."""
    lines = []
    for row in episode_rows(run_dir, at):
        verdict = f"reward {row['reward']:.3f} ({row['verifier']})" if row["reward"] is not None else "no verdict yet"
        task = f" task {row['task']}" if row["task"] else ""
        lines.append(f"step {row['step']} [{row['id']}]{task}: {verdict}")
        lines += episode_lines(row["episode"], full=full, reward=row["reward"])
    return "\n".join(lines) if lines else f"no episodes in the log of {run_dir}" + (f" up to step {at}" if at is not None else "")
