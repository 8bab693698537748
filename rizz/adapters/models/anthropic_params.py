"""What each Claude model accepts on a Messages request: sampling, thinking, effort.

Claude models differ in which request fields they take, and a field a model does not take
is an HTTP 400 on every call. :data:`REQUEST_RULES` holds, per model id (matched as the price
table is: the id itself, or it + ``-YYYYMMDD`` / ``-latest``), what rizz sends;
:func:`request_options` turns a model id, the thinking allowance ``N`` (spec ``?reasoning=N``)
and the temperature into the request fields.

Sources, read 2026-12-01 from the newest stored snapshots of ``platform.claude.com/docs``:

* ``build-with-claude/thinking-troubleshooting`` (first section, "which thinking
  configurations each model supports"): manual extended thinking (``thinking={"type":
  "enabled", "budget_tokens": N}``) is the only thinking mode of Haiku 4.5 and Opus 4.5; it
  is deprecated but still works on Opus 4.6 and Sonnet 4.6; Opus 4.7, Opus 4.8, Sonnet 5,
  Fable 5 and Mythos 5 reject it with a 400.
* ``models/opus-5/migration-guide`` and ``models/opus-5/whats-new-opus-5``: on Opus 4.8 a
  request without ``thinking`` runs without thinking; on Opus 5 the same request thinks
  (adaptive), ``thinking={"type": "disabled"}`` turns it off at effort ``high`` or below.
* ``models/sonnet-5/migration-guide`` and ``models/sonnet-5/overview``: adaptive thinking on
  by default, manual thinking is a 400, sampling parameters (``temperature``, ``top_p``,
  ``top_k``) set to non-default values are a 400.
* ``models/opus-5-5/whats-new-opus-5-5``: thinking can't be disabled (``disabled`` and
  ``enabled`` are 400s, "The first three also apply on Claude Fable 5.1"); default effort
  ``medium``.
* ``models/sonnet-5-5/whats-new-sonnet-5-5``: ``disabled`` is a 400; the lowest setting is
  ``thinking={"type": "between_tools"}`` (no up-front thinking; without tools the reply is
  text only), accepted at effort ``low``/``medium``/``high`` (default ``high``).
* ``build-with-claude/prompt-engineering/prompting-claude-haiku-5-5``: thinking on by
  default, ``disabled`` works at effort ``low``/``medium``/``high`` only (default ``medium``).
* ``models/fable-5/migration-guide`` and ``models/fable-5-2/whats-new-fable-5-2``: Fable and
  Mythos 5.x think always (adaptive); ``disabled`` and manual thinking are 400s.
* ``about-claude/models/overview`` (comparison table): Fable 5.1 and Opus 5.5 "Adaptive
  (always on)", Sonnet 5.5 and Haiku 5.5 "Adaptive", Haiku 4.5 "Extended", effort "Not
  supported" on Haiku 4.5.
* Sampling from Opus 4.7 on: the Opus 4.7 migration guide (``about-claude/models/
  migration-guide#migrating-to-claude-opus-4-7``, as cited by OpenRouter's and others' guides)
  and the 5.x migration guides: a non-default ``temperature`` is a 400 (error text
  "``temperature`` is deprecated for this model."). Opus 4.8 keeps Opus 4.7's API surface
  (``whats-new-claude-4-8``: "builds on Claude Opus 4.7").
* Display: from Opus 4.7 on, thinking blocks come back empty by default (``display:
  "omitted"``); ``display: "summarized"`` returns the text (SDK ``ThinkingConfigAdaptiveParam``).

Field shapes are those of the ``anthropic`` SDK 2.14.0 (``ThinkingConfigEnabledParam``,
``ThinkingConfigAdaptiveParam``, ``ThinkingConfigDisabledParam``,
``ThinkingConfigBetweenToolsParam``, ``OutputConfigParam.effort`` in
``low|medium|high|xhigh|max``).

What rizz sends (``N`` = the thinking allowance; ``max_tokens`` is always the answer budget +
``N``, since thinking and answer share it):

* ``temperature`` only to models that take it (:attr:`Rules.sampling`), and only without
  thinking. Determinism is not lost where it is left out: every answer is logged and
  ``rizz replay`` refolds the log without calling the model.
* ``N > 0``: manual ``budget_tokens=N`` where the model takes it (Haiku 4.5, Opus 4.5, and
  Opus/Sonnet 4.6 where it is deprecated but exact); elsewhere adaptive thinking with
  ``display: "summarized"`` (so the log keeps the reasoning), at the model's default effort;
  the allowance then caps thinking through ``max_tokens`` (there is no budget to set).
* ``N = 0``: nothing where thinking is off by default (4.x); ``disabled`` where thinking is
  on by default and can be turned off (Opus 5, Sonnet 5, Haiku 5.5); ``between_tools`` on
  Sonnet 5.5; on models that always think (Opus 5.5, Fable 5.x, Mythos 5.x) the lowest
  effort, ``output_config={"effort": "low"}``: their thinking then shares the answer's
  ``max_tokens`` (a cut reply has ``finish_reason="length"``); give them ``?reasoning=N``.
* A model not in the table: today's request (``temperature``; manual thinking for ``N > 0``).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

__all__ = ["Rules", "REQUEST_RULES", "MIN_THINKING_TOKENS", "rules_row", "table_row", "request_options", "rejected_parameter"]

MIN_THINKING_TOKENS = 1024  # the Messages API's lower bound on thinking.budget_tokens


class Rules(NamedTuple):
    """What one model takes.

    sampling: a non-default ``temperature`` is accepted.
    manual: ``thinking={"type": "enabled", "budget_tokens": N}`` is accepted.
    off: how to ask for no thinking: ``"omit"`` (off by default), ``"disabled"``,
        ``"between_tools"``, or ``None`` (the model always thinks: lowest effort instead).
    """

    sampling: bool
    manual: bool
    off: str | None


_LEGACY = Rules(sampling=True, manual=True, off="omit")  # 4.5, 4.6: also what unknown ids get
_OPT_IN = Rules(sampling=False, manual=False, off="omit")  # Opus 4.7, 4.8: adaptive when asked
_ON = Rules(sampling=False, manual=False, off="disabled")  # Opus 5, Sonnet 5, Haiku 5.5
_ALWAYS = Rules(sampling=False, manual=False, off=None)  # Opus 5.5, Fable 5.x, Mythos 5.x

#: Per model id; sources in the module docstring.
REQUEST_RULES: dict[str, Rules] = {
    "claude-haiku-4-5": _LEGACY, "claude-opus-4-5": _LEGACY,
    "claude-sonnet-4-6": _LEGACY, "claude-opus-4-6": _LEGACY,
    "claude-opus-4-7": _OPT_IN, "claude-opus-4-8": _OPT_IN,
    "claude-opus-5": _ON, "claude-sonnet-5": _ON, "claude-haiku-5-5": _ON,
    "claude-sonnet-5-5": Rules(sampling=False, manual=False, off="between_tools"),
    "claude-opus-5-5": _ALWAYS,
    "claude-fable-5": _ALWAYS, "claude-fable-5-1": _ALWAYS, "claude-fable-5-2": _ALWAYS,
    "claude-mythos-5": _ALWAYS, "claude-mythos-5-1": _ALWAYS, "claude-mythos-5-2": _ALWAYS,
}

_SNAPSHOT = re.compile(r"-(?:\d{8}|latest)")


def table_row(model_id: str, table: dict[str, Any]) -> str | None:
    """The ``table`` key for ``model_id``: the key itself, or it + ``-YYYYMMDD`` / ``-latest``
    (the longest such key); None when no key fits. Shared by the request rules here and the
    price and context-window tables of :mod:`rizz.adapters.models.anthropic_backend`."""
    if model_id in table:
        return model_id
    for key in sorted(table, key=len, reverse=True):
        if model_id.startswith(key) and _SNAPSHOT.fullmatch(model_id[len(key):]):
            return key
    return None


def rules_row(model_id: str) -> str | None:
    """The :data:`REQUEST_RULES` key for ``model_id`` (exact, ``-YYYYMMDD`` or ``-latest``)."""
    return table_row(model_id, REQUEST_RULES)


def request_options(model_id: str, reasoning_tokens: int, temperature: float | None) -> dict[str, Any]:
    """The request fields for ``model_id`` besides model, messages, system and stops.

    Returns ``{"max_tokens_added": N, "rules": row or None, "send": {...}}``: ``send`` holds
    ``thinking`` / ``output_config`` / ``temperature`` as they go on the wire (JSON-able, so
    ``run.json`` can record it); ``rules`` is the table row used (``None``: unknown model,
    today's request).

    Raises:
        ValueError: ``reasoning_tokens`` in 1..1023 for a model thinking with a manual budget.
    """
    row = rules_row(model_id)
    rules = REQUEST_RULES[row] if row is not None else _LEGACY
    n = int(reasoning_tokens)
    send: dict[str, Any] = {}
    if n > 0 and rules.manual:
        if n < MIN_THINKING_TOKENS:
            raise ValueError(f"Anthropic extended thinking needs reasoning >= {MIN_THINKING_TOKENS} tokens,"
                             f" got {n} (model {model_id})")
        send["thinking"] = {"type": "enabled", "budget_tokens": n}
    elif n > 0:
        send["thinking"] = {"type": "adaptive", "display": "summarized"}
    elif rules.off in ("disabled", "between_tools"):
        send["thinking"] = {"type": rules.off}
    elif rules.off is None:
        send["output_config"] = {"effort": "low"}
    elif rules.sampling and temperature is not None:
        send["temperature"] = float(temperature)
    return {"max_tokens_added": n, "rules": row, "send": send}


_PARAM = re.compile(
    r"thinking\.type\.\w+|thinking\.\w+|output_config\.\w+|budget_tokens|temperature|top_p|top_k"
    r"|max_tokens|stop_sequences|tool_choice")


def rejected_parameter(message: str) -> str | None:
    """The request field an API error message names (``"temperature"``,
    ``"thinking.type.enabled"``, ...), or ``None``."""
    m = _PARAM.search(message or "")
    return m.group(0) if m else None
