"""What one tool episode did (:class:`ToolEpisode`): the transcript (user turns, replies, calls, tool results) and its tallies.

The transcript is the episode's log: a list of plain JSON objects, one an event:

* ``{"role": "user", "text": str}`` -- a user turn (the element's ``input``, a scripted turn, or
  the simulated user's message);
* ``{"role": "assistant", "text": str, "calls": [[name, {args}], ...]}`` -- a model reply
  (``calls`` empty for a message to the user);
* ``{"role": "tool", "name": str, "arguments": {...}, "result": str, "error": bool}`` -- one tool
  execution (a malformed call, an unknown tool or a tool exception is an error result).

Everything the verifier and the memory need is on :class:`ToolEpisode`, so ``rizz replay``
refolds an agent run from the log with no model and no tool call.

Not to be confused with the memory item :class:`rizz.core.records.Episode` (a verified
interaction in a branch's episodic memory; specs/glossary.md). ``Episode`` here is the old
name of :class:`ToolEpisode`, kept as an alias so code that imports it keeps working.
"""

from __future__ import annotations

from typing import Any

import attrs

from rizz.adapters.agents.calls import ToolCall, format_call

__all__ = ["TRAJECTORY_CHARS", "Episode", "ToolEpisode", "compact_trajectory", "cut_trajectory"]


@attrs.frozen
class ToolEpisode:
    """One finished tool episode.

    Attributes:
      transcript: the events in order (see the module docstring).
      env_digest: ``sha256:...`` of the environment's state at the end.
      turn_calls: per user turn, per model step, the calls in the text protocol's form (BFCL's
        multi-turn checker reads this shape).
      model_calls: agent model calls (the simulated user's calls are counted apart): the replies
        whose request reached the model (``AgentReply.sent``); an overflow whose prompt never
        did (over rizz's budget, or refused by the embedded model before a token) is none, a
        request the server refused as too long for its window is one.
      user_calls: simulated-user model calls.
      tool_errors: malformed calls, unknown tools and tool exceptions.
      stop: ``done`` (the agent answered the last turn), ``user_stop`` (``###STOP###``),
        ``transfer`` (a terminating tool ran: τ-bench's ``transfer_to_human_agents``), ``repeat``
        (the same failing reply ``agents.repeat_stop`` times in a row), ``max_steps`` (the policy's bound),
        ``overflow`` (the task alone exceeds the budget, or the model reports its context
        window full: :mod:`rizz.engine.native_agent`).
      prompt_tokens_max: the largest compiled agent prompt, tokens.
    """

    transcript: tuple[dict[str, Any], ...]
    env_digest: str
    turn_calls: tuple[tuple[tuple[str, ...], ...], ...]
    model_calls: int
    user_calls: int
    tool_errors: int
    stop: str
    prompt_tokens_max: int = 0

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """Every call the agent made, in order (including ones that failed)."""
        return tuple(ToolCall(n, a) for e in self.transcript if e["role"] == "assistant" for n, a in e.get("calls", []))

    @property
    def messages(self) -> tuple[str, ...]:
        """What the agent said to the user (replies without calls)."""
        return tuple(e["text"] for e in self.transcript if e["role"] == "assistant" and not e.get("calls"))

    @property
    def final(self) -> str:
        """The agent's last message to the user ('' if none)."""
        return self.messages[-1] if self.messages else ""

    def to_json(self) -> dict[str, Any]:
        return {"transcript": list(self.transcript), "env_digest": self.env_digest,
                "turn_calls": [[list(s) for s in t] for t in self.turn_calls], "model_calls": self.model_calls,
                "user_calls": self.user_calls, "tool_errors": self.tool_errors, "stop": self.stop,
                "prompt_tokens_max": self.prompt_tokens_max}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ToolEpisode:
        """The inverse of :meth:`to_json`: an episode read back from a run log's ``episode`` field."""
        return cls(tuple(obj["transcript"]), obj["env_digest"], tuple(tuple(tuple(s) for s in t) for t in obj["turn_calls"]),
                   obj["model_calls"], obj["user_calls"], obj["tool_errors"], obj["stop"], obj.get("prompt_tokens_max", 0))


#: The old name of :class:`ToolEpisode` (before the memory item ``rizz.core.records.Episode``
#: and this class were told apart), kept importable for users' code.
Episode = ToolEpisode


#: Characters a trajectory written to episodic memory keeps (rizz's choice: a few calls with
#: their arguments; longer ones end in ``...``).
TRAJECTORY_CHARS = 1200


def compact_trajectory(episode: ToolEpisode, limit: int = TRAJECTORY_CHARS) -> str:
    """``call; call; ... -> final answer``: what a verified episode writes to episodic memory
    (request → tool calls → final answer; the request, the transcript's first user turn, is the
    example's input: :func:`rizz.engine.agent_step.open_conversation`).
    Failed calls are left out; long texts are cut to ``limit`` characters with ``...``."""
    ok: list[str] = []
    events = list(episode.transcript)
    for i, e in enumerate(events):
        if e["role"] != "assistant" or not e.get("calls"):
            continue
        results = [r for r in events[i + 1: i + 1 + len(e["calls"])] if r["role"] == "tool"]
        for k, (name, args) in enumerate(e["calls"]):
            failed = k < len(results) and results[k]["error"]  # no result: a single-turn call, not executed
            if not failed:
                ok.append(format_call(ToolCall(name, args)))
    text = "; ".join(ok) or "(no tool call)"
    if episode.final:
        text += f" -> {episode.final}"
    return cut_trajectory(text, limit)


def cut_trajectory(text: str, limit: int = TRAJECTORY_CHARS) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
