"""HotpotQA distractor (StreamBench ``hotpotqa_distract``) -> stream (specs/stream-format.md).

Source: ``DATA_ROOT/hotpotqa_distractor/dev_distractor_with_context.json`` — the first 83
records of the official ``hotpot_dev_distractor_v1.json`` (via ``acmyu/CS592LLM-Project``
@ 5f67a0f; HotpotQA is CC BY-SA 4.0), in source order.

Element: ``input`` = the question, ``instruction`` = :data:`HOTPOT_INSTRUCTION`,
``evidence`` = the 10 paragraphs (2 gold + 8 distractors), each rendered as StreamBench
does, ``"Title: <title>\\nParagraph: <sentences joined>"``; ``reference`` = the answer;
``verifier`` ``token_f1``; ``metadata``: task ``HotpotQA``, shape ``span``, ``type``
(bridge/comparison). Id ``hotpotqa-<_id>``.

Split (by position, source order): train = records 0-15 (first 20%), eval = 16-23
(next 10%), test = 24-82 (last 70%).
"""

from __future__ import annotations

from pathlib import Path

from rizz.formats.streams import StreamElement
from rizz.lab.builders._common import (
    BuildOptions,
    BuildResult,
    finish,
    fraction_split,
    interleave,
    load_json,
    select,
)

__all__ = ["HOTPOT_INSTRUCTION", "build_hotpotqa", "hotpotqa_elements"]

HOTPOT_INSTRUCTION = ("Answer the question using the paragraphs given as evidence. "
                      "Reply with the answer only: a short span, or yes/no.")


def hotpotqa_elements(root: Path, opts: BuildOptions) -> list[StreamElement]:
    """HotpotQA elements of ``opts.split`` in source order (before caps)."""
    records = load_json(root / "hotpotqa_distractor" / "dev_distractor_with_context.json")
    out = []
    for i in fraction_split(len(records), opts.split):
        rec = records[i]
        evidence = tuple(f"Title: {title}\nParagraph: {''.join(sents)}" for title, sents in rec["context"])
        out.append(StreamElement(
            id=f"hotpotqa-{rec['_id']}", input=rec["question"], instruction=HOTPOT_INSTRUCTION,
            metadata={"task": "HotpotQA", "shape": "span", "type": rec["type"]},
            evidence=evidence, reference=rec["answer"], verifier="token_f1"))
    return out


def build_hotpotqa(root: Path, opts: BuildOptions) -> BuildResult:
    """Build a HotpotQA stream: source order (``sequential``) or a seeded shuffle (``interleaved``)."""
    notes: list[str] = []
    items = select(hotpotqa_elements(root, opts), opts, "HotpotQA", notes)
    if opts.order == "interleaved":
        items = interleave([[el] for el in items], opts.seed)
    return finish(items, opts, notes)
