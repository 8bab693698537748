"""An answered element waiting for its verdict (:class:`Pending`), and the records it holds.

Made by :func:`rizz.engine.answering.answer_element` (or, for a tool-using episode,
:func:`rizz.engine.agent_step.answer_episode`), kept by :class:`~rizz.engine.session.Session`
until the verdict is folded, and written as a log record by
:func:`rizz.engine.codec.encode_step`.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from rizz.core import CompiledPrompt, RouteResult, StepInput
from rizz.formats import logrecord as lr
from rizz.formats.streams import StreamElement

__all__ = ["Call", "Embedded", "Pending"]

#: One model call (judge, answer, distill, verify, user): the log record's own shape, so the shell
#: keeps calls as they are written (:class:`rizz.formats.logrecord.CallPart`; ``Call.of(kind, generation)``).
Call = lr.CallPart


@frozen
class Embedded:
    """An embedded text: float32 bytes (L2-normalised) and its key in the embedding store."""

    vec: bytes
    key: str


@frozen(kw_only=True)
class Pending:
    """An answered (or context-only) element waiting for its verdict; built by keyword.

    ``id`` / ``answer``: the element's id and the extracted answer (None for context-only
    input). ``step``: its index in the session. ``prompt`` is None for context-only input and
    when the input alone overflows the budget (``overflow`` True). ``routed``: the route
    round's outcome (the decision the verdict will use). ``time``: Unix seconds when answered.
    """

    element: StreamElement
    step_input: StepInput
    prompt: CompiledPrompt | None
    raw_output: str | None
    answer: str | None
    parsed: bool
    judge: dict[str, Any] | None
    calls: tuple[Call, ...]
    overflow: bool
    rendering: str
    routed: RouteResult | None = None
    keys: tuple[str, str | None] = ("", None)  # embedding keys of φ(x) and ψ(ã)
    time: float | None = None
    reasoning: str = ""  # the model's reasoning, kept out of ``answer`` and ``raw_output`` (rizz.adapters.models.reasoning)
    episode: Any = None  # a tool-using episode's ToolEpisode (rizz.adapters.agents.episode), else None
    wrong_call: str | None = None  # that episode's first wrong call: its anti-pattern if the verdict fails

    @property
    def id(self) -> str:
        return self.element.id

    @property
    def step(self) -> int:
        return self.step_input.step

    @property
    def branch(self) -> str | None:
        """The branch the answer was routed to (its verdict writes there), None without a route."""
        return self.routed.decision.branch_id if self.routed is not None else None

    @property
    def prompt_tokens(self) -> int:
        """Tokens of the compiled prompt sent to the model (0 when none was sent)."""
        return self.prompt.token_count if self.prompt is not None else 0

    def __repr__(self) -> str:  # attributes only: the fields hold embeddings and the route round's state
        return (f"Pending(id={self.id!r}, step={self.step}, answer={self.answer!r}, branch={self.branch!r}, "
                f"prompt_tokens={self.prompt_tokens})")
