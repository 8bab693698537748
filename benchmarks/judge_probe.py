"""Are the judge's labels the problem? Label stream elements with the shipped judge prompt or a
variant, with the real model, and show what comes back (issue #10 §4).

Usage::

    RIZZ_THREADS=1 python benchmarks/judge_probe.py STREAM --variant no-answer --tasks FOMC,C-STANCE,ScienceQA \\
        [--per-task N] [--cache FILE] [--model embedded] [--out LABELS.json]

For the first ``--per-task`` elements of each task (``metadata.task``, used here only to group
the figures) it asks the judge with the prompt of ``--variant`` through the same parser and
fallback as :func:`rizz.engine.judge.label_input`, and prints per task: the labels and their
counts, how many answers needed the deterministic fallback (the model did not give a label),
and how many copied the prompt's worked example. ``--out`` writes ``{id: {"function",
"application", "fallback", "raw"}}``, which ``benchmarks/label_sweep.py --labels`` refolds.

Variants (the worked example and system text of the shipped prompt are kept unless said):

* ``shipped``: :func:`rizz.engine.judge.judge_messages` (what every run uses; cached calls of a
  run that shares ``--cache`` cost nothing);
* ``with-shape``: the judge prompt before 2026-12-02, ``shipped`` with an "Expected output:
  SHAPE" line after the input and in the worked example (the Qwen 1.5B answered
  ``application: "letter"``, the shape's name, for the letter tasks);
* ``no-answer``: the element is framed as a task to *label, not answer* ("Task to label (do not
  answer it): … Reply with the JSON label."), so the last words the model reads ask for the label
  instead of the element's own question;
* ``no-shot``: ``no-answer`` without the worked example (the 135M model copies
  ``summarize/news-summarization`` for input it cannot read).

``--from-run RUN_DIR [--fallback first_line|content_words]`` calls no model: it reads each
logged judge reply (``judge.raw``) again with :func:`rizz.engine.judge.read_label` — the parser and
fallback every run uses — under that ``routing.fallback_application``. With ``content_words``
(what the shipped policies log) it gives back the logged labels; with ``first_line`` (the
default here) only the parts the model did not give change: the application comes from the
instruction, else the input's *first line* (TRACE and StreamBench-style elements state their
task there), so it names the task rather than the topic of one question. Same output
(``--out``) and per-task figures.

Nothing here changes the judge: a variant is a proposal, measured.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from rizz.adapters.models import Message
from rizz.core import normalise_label
from rizz.engine import judge as J

VARIANTS = ("shipped", "with-shape", "no-answer", "no-shot")


def messages(variant: str, text: str, shape: str | None) -> list[Message]:
    """The judge messages of ``variant`` for one element (``instruction`` none: TRACE puts it in the input)."""
    if variant == "shipped":
        return J.judge_messages(text, instruction=None)
    if variant == "with-shape":  # the judge prompt before 2026-12-02: "Expected output: SHAPE" after the input and in the shot
        shot = J._SHOT_USER + "\nExpected output: text"
        body = f"Input: {J._shorten(text, J._MAX_PROMPT_CHARS)}" + (f"\nExpected output: {shape}" if shape else "")
        return [Message("system", J._SYSTEM), Message("user", shot), Message("assistant", J._SHOT_ASSISTANT), Message("user", body)]
    body = f"Task to label (do not answer it):\n\"\"\"\n{J._shorten(text, J._MAX_PROMPT_CHARS)}\n\"\"\"\n"
    if shape:
        body += f"Expected output of the task: {shape}\n"
    body += "Reply with the JSON label of this task."
    shot_user = ("Task to label (do not answer it):\n\"\"\"\nSummarize the article in one sentence. The city council voted"
                 " on Tuesday to expand the bus network...\n\"\"\"\nExpected output of the task: text\nReply with the JSON label of this task.")
    shot = [Message("user", shot_user), Message("assistant", J._SHOT_ASSISTANT)] if variant == "no-answer" else []
    return [Message("system", J._SYSTEM), *shot, Message("user", body)]


def label(model, variant: str, text: str, shape: str | None) -> dict:
    """The label as :func:`rizz.engine.judge.label_input` reads it (:func:`rizz.engine.judge.read_label`)."""
    gen = model.generate(messages(variant, text, shape), max_tokens=J._JUDGE_MAX_TOKENS, stop=("}",))
    jl = J.read_label(gen.text, text, instruction=None, shape=shape)
    lab = normalise_label(jl.function, jl.application)  # as rizz.engine.answering does before routing
    return {"function": lab.function, "application": lab.application, "fallback": jl.fallback, "raw": gen.text}


def from_run(run_dir: str, fallback: str) -> tuple[dict, dict]:
    """``({id: label}, {id: task})`` from a run's log: each logged judge reply read again by
    :func:`rizz.engine.judge.read_label` under ``routing.fallback_application = fallback``, then
    :func:`rizz.core.normalise_label` (and ``use-tools`` for an episode), as
    :mod:`rizz.engine.answering` does."""
    from rizz.store.runlog import RunDir

    out, tasks = {}, {}
    for r in RunDir(run_dir).records():
        j = r.get("judge")
        if r.get("kind", "step") not in ("step", "answer") or not j:
            continue
        x = r["input"]
        jl = J.read_label(j.get("raw") or "", x["text"], instruction=x.get("instruction"), shape=x.get("shape"),
                          fallback_application=fallback)
        lab = normalise_label("use-tools" if r.get("episode") else jl.function, jl.application)
        out[r["id"]] = {"function": lab.function, "application": lab.application, "fallback": jl.fallback, "raw": jl.raw}
        tasks[r["id"]] = r.get("task") or "-"
    return out, tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stream")
    ap.add_argument("--variant", choices=VARIANTS, default="shipped")
    ap.add_argument("--tasks", default="", help="comma-separated metadata.task values (default: all)")
    ap.add_argument("--per-task", type=int, default=10)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--cache", default=None, help="response cache (sqlite), shared with a run to reuse its judge calls")
    ap.add_argument("--out", default=None)
    ap.add_argument("--from-run", default=None, help="relabel a run's logged labels instead of calling a model")
    ap.add_argument("--fallback", choices=J.FALLBACK_APPLICATIONS, default="first_line",
                    help="with --from-run: the routing.fallback_application the logged replies are read under")
    args = ap.parse_args(argv)
    if args.from_run:
        out, tasks = from_run(args.from_run, args.fallback)
        by_task = collections.defaultdict(list)
        for k, lab in out.items():
            by_task[tasks[k]].append(lab)
        return _report(by_task, out, args.out, f"{args.from_run} fallback={args.fallback}")
    from rizz.adapters.models import load_model

    wanted = [t for t in args.tasks.split(",") if t]
    els, count = [], collections.Counter()
    for line in Path(args.stream).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        el = json.loads(line)
        t = (el.get("metadata") or {}).get("task") or "-"
        if (wanted and t not in wanted) or count[t] >= args.per_task or el.get("context_only"):
            continue
        count[t] += 1
        els.append((t, el))
    model = load_model(args.model, cache=args.cache)
    out, by_task = {}, collections.defaultdict(list)
    for t, el in els:
        text = el["input"] if not el.get("instruction") else f"{el['instruction']}\n\n{el['input']}"
        lab = label(model, args.variant, text, (el.get("metadata") or {}).get("shape"))
        out[el["id"]] = lab
        by_task[t].append(lab)
    return _report(by_task, out, args.out, args.variant)


def _report(by_task: dict, out: dict, path: str | None, variant: str) -> int:
    shot = J._SHOT_ASSISTANT
    summary = {}
    for t, labs in by_task.items():
        c = collections.Counter(f"{l['function']}/{l['application']}" for l in labs)
        fb = sum(l["fallback"] for l in labs)
        copied = sum('"news-summarization"' in l["raw"] or l["raw"].strip() in (shot, shot[:-1]) for l in labs)
        summary[t] = {"n": len(labs), "distinct": len(c), "fallback": fb, "copied_shot": copied, "labels": dict(c.most_common())}
        print(f"{t}: n {len(labs)}, distinct labels {len(c)}, fallback {fb}, copied the worked example {copied}")
        for lab, k in c.most_common():
            print(f"    {k:3d}  {lab}")
    if path:
        Path(path).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({"variant": variant, "tasks": summary}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
