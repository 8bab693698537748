"""LoCoMo (stand-in for LongMemEval-S) -> stream (specs/stream-format.md) of scoped context + questions.

Source: ``DATA_ROOT/locomo/conv-<n>.json`` (``snap-research/locomo`` @ e76cdff,
``data/locomo10.zip``; no licence file; Maharana et al., ACL 2024).

Per conversation (id ``conv-<n>``, also ``metadata.scope``):
1. one ``context_only: true`` element per session that has a body, in session order:
   ``input`` = ``"Conversation between A and B, session k, <date time>"`` then one line
   per turn, ``"Speaker: text"``, image turns adding ``" [shares an image: <caption>]"``;
   ``metadata.time`` = the session's date and time as ISO 8601 (``"1:56 pm on 8 May, 2023"``
   → ``"2023-05-08T13:56:00"``; LoCoMo gives no zone, so it is naive, read as UTC by rizz),
   ``metadata.session`` = k. Id ``locomo-<conv>-s<kk>``.
2. then its questions in source order: ``input`` = the question, ``instruction`` =
   :data:`LOCOMO_INSTRUCTION`, ``reference`` = ``str(answer)``, ``verifier`` ``token_f1``,
   shape ``span``, ``metadata.category`` (1 multi-hop, 2 temporal, 3 open-domain,
   4 single-hop) and ``evidence_ids`` (dialogue ids). Id ``locomo-<conv>-q<iii>`` (index in
   ``qa``). Category-5 (adversarial) questions with no ``answer`` field are skipped (counted
   in the notes): token F1 against an absent answer is undefined.
``per_task`` caps the questions per conversation (first N); sessions are never capped.

Split (by conversation): train = conv-26, eval = conv-30, test = conv-41, 42, 43, 44, 47, 48.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import BuildError, BuildOptions, BuildResult, finish, load_json, select

__all__ = ["LOCOMO_SPLITS", "LOCOMO_INSTRUCTION", "build_locomo", "iso_time", "locomo_elements"]

LOCOMO_SPLITS: dict[str, tuple[str, ...]] = {
    "train": ("conv-26",),
    "eval": ("conv-30",),
    "test": ("conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48"),
}
LOCOMO_INSTRUCTION = ("Answer the question about the earlier conversation sessions in a few "
                      "words, using the stored conversation context.")
_SESSION = re.compile(r"session_(\d+)")


_WHEN = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) ([A-Za-z]+),? (\d{4})")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")


def iso_time(when: str) -> str:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` as naive ISO 8601 ``"2023-05-08T13:56:00"``.

    Raises BuildError for any other form (every session of the shipped data matches)."""
    m = _WHEN.fullmatch(when.strip())
    if not m or m.group(5).lower() not in _MONTHS:
        raise BuildError(f"LoCoMo session time {when!r} is not of the form '1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half == "pm" else 0)
    return f"{int(year):04d}-{_MONTHS.index(month.lower()) + 1:02d}-{int(day):02d}T{h:02d}:{int(minute):02d}:00"


def _render_turn(turn: dict[str, Any]) -> str:
    line = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        line += f" [shares an image: {turn['blip_caption']}]"
    return line


def locomo_elements(root: Path, conv: str, opts: BuildOptions,
                    notes: list[str]) -> tuple[list[StreamElement], list[StreamElement]]:
    """(session context elements, question elements) of one conversation, source order."""
    data = load_json(root / "locomo" / f"{conv}.json")
    a, b = data["speaker_a"], data["speaker_b"]
    sessions = sorted((int(m.group(1)), key) for key in data
                      if (m := _SESSION.fullmatch(key)) and data[key])
    context = []
    for k, key in sessions:
        when = data.get(f"{key}_date_time")
        head = f"Conversation between {a} and {b}, session {k}, {when}"
        text = "\n".join([head] + [_render_turn(t) for t in data[key]])
        context.append(StreamElement(
            id=f"locomo-{conv}-s{k:02d}", input=text,
            metadata={"task": "LoCoMo", "scope": conv, "time": iso_time(when), "session": k},
            context_only=True))
    questions, skipped = [], 0
    for i, qa in enumerate(data["qa"]):
        if "answer" not in qa:
            skipped += 1
            continue
        questions.append(StreamElement(
            id=f"locomo-{conv}-q{i:03d}", input=qa["question"], instruction=LOCOMO_INSTRUCTION,
            metadata={"task": "LoCoMo", "scope": conv, "shape": "span",
                      "category": qa["category"], "evidence_ids": list(qa.get("evidence", []))},
            reference=str(qa["answer"]), verifier="token_f1"))
    if skipped:
        notes.append(f"{conv}: skipped {skipped} adversarial (category 5) questions that have no answer")
    return context, questions


def build_locomo(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a LoCoMo stream: conversation after conversation, sessions then questions.

    ``tasks`` picks conversations (default: all of the split, in split order); only the
    ``sequential`` order exists (questions must follow their sessions).
    """
    if opts.order not in (None, "sequential"):
        raise BuildError("LoCoMo streams are sequential (a conversation's sessions precede its questions)")
    convs = LOCOMO_SPLITS[opts.split]
    if opts.tasks:
        wrong = [c for c in opts.tasks if c not in convs]
        if wrong:
            raise BuildError(f"conversation {wrong[0]!r} is not in the {opts.split} split "
                             f"({', '.join(convs)})")
        convs = tuple(c for c in convs if c in opts.tasks)
    notes: list[str] = []
    elements: list[StreamElement] = []
    for conv in convs:
        context, questions = locomo_elements(root, conv, opts, notes)
        elements += select(context, opts, f"{conv} sessions", notes, cap=False)
        elements += select(questions, opts, f"{conv} questions", notes)
    return finish(elements, opts, notes)
