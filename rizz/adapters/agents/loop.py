"""The agent loop: one episode as a bounded sequence of model replies and tool executions.

:func:`run_episode` drives an :class:`Agent` (the frozen model through the prompt compiler, or a
scripted agent) against an :class:`~rizz.adapters.agents.env.Environment` and a user (scripted
``turns``, a simulated user, or none). At most ``max_steps`` agent replies (the policy's
``agents.max_steps``). A malformed call, an unknown tool or a tool exception becomes the tool's
error result (``Error: ...``), which the model sees on its next step; the run goes on, except
that the same failing reply written ``repeat_stop`` times in a row (``agents.repeat_stop``: the
same malformed text, or the same calls every one of which failed with the same results) ends the
episode with stop ``repeat``: a greedy model that repeats itself after the error will go on
repeating it to ``max_steps`` (Qwen2.5-Coder-1.5B: one malformed BFCL call 30 times, one failing
τ-bench lookup 27 times). The same calls run *successfully* ``repeat_stop`` + 1 times in a row end
the turn instead, as a message to the user would (the 1.5B placed one BFCL order 30 times). A
conversation stuck in one exchange ends with stop ``repeat`` too: the same message to the
simulated user answered by the same reply ``repeat_stop`` times in a row (the 1.5B answered a
τ-bench customer with an empty message 14 times, and the customer repeated its line each time).

Turn structure: a reply with calls executes them and asks the agent again; a reply
without calls is a message to the user that ends the turn: then the next scripted turn, or the
simulated user's answer (``###STOP###`` ends the episode), or, with neither, the episode ends.
A successful call of one of the environment's terminating tools ends it too (stop ``transfer``:
τ-bench's ``transfer_to_human_agents``, as in τ-bench, where a human takes over).
A BFCL single-turn element (``bfcl_ast``) ends after its first reply: its calls are the answer.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from rizz.adapters.agents.calls import CallSyntaxError, ToolCall, format_call
from rizz.adapters.agents.env import Environment, terminate_tools
from rizz.adapters.agents.episode import ToolEpisode
from rizz.adapters.agents.tools import ToolError
from rizz.formats.streams import StreamElement

__all__ = ["STOP", "Agent", "AgentReply", "User", "run_episode"]

#: The simulated user's end-of-conversation marker (τ-bench).
STOP = "###STOP###"


@attrs.frozen
class AgentReply:
    """One agent reply: its text, the calls parsed from it (empty: a message to the user), or
    ``error`` (a malformed call attempt), and the prompt tokens of the call (0 for scripts).

    ``overflow``: no reply could be had because the prompt is too long (the episode ends as
    ``overflow``). ``sent``: the request reached the model, so the reply is one of the
    episode's model calls (``ToolEpisode.model_calls``). False only for an overflow whose
    prompt never reached it: rizz's own prompt budget refused it, or the embedded model
    refused the rendered prompt before evaluating a token; a server that refuses a request
    as too long for its window was sent it (True)."""

    text: str
    calls: tuple[ToolCall, ...] = ()
    error: str | None = None
    prompt_tokens: int = 0
    overflow: bool = False
    sent: bool = True


class Agent(Protocol):
    def reply(self, el: StreamElement, transcript: list[dict[str, Any]], env: Environment) -> AgentReply:
        """The next reply given the transcript so far."""
        ...


class User(Protocol):
    def reply(self, transcript: list[dict[str, Any]]) -> str:
        """The simulated user's next message (``STOP`` in it ends the episode)."""
        ...


def _execute(env: Environment, call: ToolCall) -> tuple[str, bool]:
    try:
        return env.call(call.name, call.arguments), False
    except ToolError as err:
        return f"Error: {err}", True


def run_episode(el: StreamElement, agent: Agent, env: Environment, *, max_steps: int, user: User | None = None,
                repeat_stop: int = 0, opening: str | None = None) -> ToolEpisode:
    """Run one episode of ``el`` (an element with ``tools``). Returns its :class:`~rizz.adapters.agents.episode.ToolEpisode`.

    ``repeat_stop`` > 0: stop (``repeat``) once that many failing replies in a row are the same
    (the same malformed text, or the same calls all failing with the same results); and end the
    turn, as a message to the user would, once the same calls have run successfully
    ``repeat_stop`` + 1 times in a row (that reply's event is marked ``repeated``): the
    Qwen2.5-Coder-1.5B placed one BFCL order 30 times in a row, a new order each time
    (results/2026-12-03-bfcl-multi-turn-qwen15.md); one repeat of a successful call is let
    through (a re-read after a change). The same message to the simulated user answered the same
    way ``repeat_stop`` times in a row stops it too (``repeat``): the conversation is stuck.

    ``opening``: the simulated user's first message, already asked for (τ-bench: the engine
    asks the customer first, to embed, label, route and retrieve from what the agent sees,
    :func:`rizz.engine.agent_step.open_conversation`); the transcript starts with it and the
    user is not asked for it again (it counts as one of ``user_calls``)."""
    transcript: list[dict[str, Any]] = []
    user_calls = 0
    if opening is not None:
        transcript.append({"role": "user", "text": opening})
        user_calls += 1
    elif el.user is not None and user is not None:
        transcript.append({"role": "user", "text": user.reply([])})
        user_calls += 1
    else:
        transcript.append({"role": "user", "text": el.input})
    turns = list(el.turns or ())
    single = el.verifier == "bfcl_ast"
    turn_calls: list[list[tuple[str, ...]]] = [[]]
    steps = model_calls = errors = tokens_max = repeats = ran_repeats = 0
    last_failed: tuple[Any, ...] | None = None  # the last reply that failed whole, as compared for repeat_stop
    last_ran: tuple[Any, ...] | None = None  # the last reply whose calls all ran, as compared for repeat_stop
    last_said: tuple[str, str] | None = None  # the last (message to the user, the user's reply), as compared for repeat_stop
    said_repeats = 0
    stop = "max_steps"
    ending = terminate_tools(env)
    while steps < max_steps:
        r = agent.reply(el, transcript, env)
        steps += 1
        model_calls += r.sent  # a prompt that never reached the model is no model call
        tokens_max = max(tokens_max, r.prompt_tokens)
        if r.overflow:
            stop = "overflow"
            break
        if r.error is not None:
            transcript.append({"role": "assistant", "text": r.text, "calls": []})
            transcript.append({"role": "tool", "name": "", "arguments": {}, "result": f"Error: {r.error}", "error": True})
            errors += 1
            transcript[-2]["malformed"] = True
            key: tuple[Any, ...] = ("malformed", r.text)
            repeats, last_failed = (repeats + 1 if key == last_failed else 1), key
            if repeat_stop and repeats >= repeat_stop:
                stop = "repeat"
                break
            continue
        transcript.append({"role": "assistant", "text": r.text, "calls": [c.to_json() for c in r.calls]})
        if r.calls:
            turn_calls[-1].append(tuple(format_call(c) for c in r.calls))
            if single:
                stop = "done"
                break
            ended, results, all_failed = False, [], True
            for call in r.calls:
                result, failed = _execute(env, call)
                errors += failed
                transcript.append({"role": "tool", "name": call.name, "arguments": call.arguments,
                                   "result": result, "error": failed})
                ended = ended or (not failed and call.name in ending)
                results.append(result)
                all_failed = all_failed and failed
            if ended:
                stop = "transfer"
                break
            if all_failed:  # the same calls failing the same way again: a greedy model will go on
                key = ("failed", tuple(format_call(c) for c in r.calls), tuple(results))
                repeats, last_failed = (repeats + 1 if key == last_failed else 1), key
                if repeat_stop and repeats >= repeat_stop:
                    stop = "repeat"
                    break
                continue
            last_failed, repeats = None, 0
            key = ("ran", tuple(format_call(c) for c in r.calls))
            ran_repeats, last_ran = (ran_repeats + 1 if key == last_ran else 1), key
            if not (repeat_stop and ran_repeats > repeat_stop):
                continue
            transcript[-1 - len(r.calls)]["repeated"] = True  # the same calls ran once too often: the turn ends
        last_failed, repeats = None, 0
        last_ran, ran_repeats = None, 0
        if single:
            stop = "done"
            break
        if turns:
            transcript.append({"role": "user", "text": turns.pop(0)})
            turn_calls.append([])
            continue
        if el.user is not None and user is not None:
            said = user.reply(transcript)
            user_calls += 1
            transcript.append({"role": "user", "text": said})
            if STOP in said:
                stop = "user_stop"
                break
            exchange = (r.text, said)
            said_repeats, last_said = (said_repeats + 1 if exchange == last_said else 1), exchange
            if repeat_stop and said_repeats >= repeat_stop:  # the conversation goes round in one exchange
                stop = "repeat"
                break
            continue
        stop = "done"
        break
    return ToolEpisode(tuple(transcript), env.state_digest(), tuple(tuple(t) for t in turn_calls), model_calls, user_calls,
                   errors, stop, tokens_max)


_ = CallSyntaxError
