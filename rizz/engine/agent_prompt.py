"""An agent step's prompt: task, tool list and transcript, plus retrieved memory, under the budget.

The prompt compiler (:func:`rizz.core.compile_prompt`, spec §5) budgets every step's prompt:

* the *task* -- the element's instruction (e.g. τ-bench's policy), the call protocol and the tool
  list -- is the protected ``instruction`` block: never elided;
* the running *transcript* is the protected ``input`` block, fitted first: while task plus
  transcript exceed the budget, the oldest tool result is elided (``[tool result elided]``),
  then, with none left, the oldest turns after the first user turn are dropped;
* memory (rules, solved examples = verified trajectories, mistakes = first wrong calls) fills the
  rest and gives way first, as for any element.

:class:`~rizz.core.PromptBudgetError` is raised only when the task alone does not fit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs

from rizz.adapters.agents.calls import CallSyntaxError, ToolCall, format_call, parse_reply
from rizz.adapters.agents.env import plain
from rizz.adapters.models.base import Message
from rizz.core import CompiledPrompt, PromptBudgetError, PromptItem, compile_prompt, prompt_blocks
from rizz.core.policy import AgentPolicy, CompilerPolicy
from rizz.formats.streams import StreamElement

__all__ = ["CALL_STYLES", "NATIVE_PROTOCOL", "PROTOCOL", "ELIDED", "TURN_MARKERS", "chat_turns", "episode_prompt", "fit_episode",
           "placeholder_calls", "shown_examples", "task_text", "trajectory_calls", "transcript_text"]

#: How the model calls tools in the text protocol (Python call syntax, as BFCL prompts).
PROTOCOL = ("You can call the tools listed below. To call tools, reply with Python call syntax only, "
            "e.g. [tool_a(x=1), tool_b(name='abc')]; the results come back to you. To answer the user, "
            "reply in plain text with no call.")
#: The same for backends with native tool calling (Anthropic ``tool_use``, OpenAI ``tools``):
#: the calls go through the API's own structures, not the reply text.
NATIVE_PROTOCOL = ("You can call the tools listed below with function calling; the results come back to you. "
                   "To answer the user, reply in plain text with no call.")
ELIDED = "[tool result elided]"
#: How each later line of the transcript text starts (:func:`transcript_text`): where a model
#: that writes on past its own reply has begun inventing the next turn.
TURN_MARKERS = ("\nUser:", "\nTool ", "\nAssistant:")
#: Tokens kept free for separators the compiler adds between blocks.
_SLACK = 16


def task_text(el: StreamElement, protocol: str = PROTOCOL) -> str:
    """The protected task: the element's instruction, the call ``protocol`` and the tool list
    (one JSON a line, keys sorted: the same text in every process)."""
    tools = "\n".join(json.dumps(plain(t), ensure_ascii=False) for t in el.tools or ())
    head = f"{el.instruction}\n\n" if el.instruction else ""
    return f"{head}{protocol}\n\nTools:\n{tools}"


#: How the transcript writes the agent's earlier calls: ``python`` as the text protocol asks for
#: them (``[tool_a(x=1)]``); ``json`` as a chat template's tool-call block holds them (one
#: ``{"name": ..., "arguments": {...}}`` object a call). A model copies the form it sees (the
#: Qwen2.5-Coder-1.5B, shown its earlier calls in Python syntax, wrote later calls as that text;
#: results/2026-12-03-bfcl-multi-turn-qwen15.md). On the chat-template path the model is sent
#: :func:`chat_turns`; ``json`` keeps the logged, budgeted text in the form it was sent.
CALL_STYLES = ("python", "json")


def _line(e: dict[str, Any], elided: bool, call_style: str = "python") -> str:
    if e["role"] == "user":
        return f"User: {e['text']}"
    if e["role"] == "assistant":
        calls = e.get("calls") or []
        if calls and call_style == "json":
            return "Assistant: " + "\n".join(json.dumps({"name": n, "arguments": a}, ensure_ascii=False) for n, a in calls)
        if calls:
            return "Assistant: [" + ", ".join(format_call(ToolCall(n, a)) for n, a in calls) + "]"
        return f"Assistant: {e['text']}"
    return f"Tool {e['name'] or '(call)'}: {ELIDED if elided else e['result']}"


def transcript_text(transcript: list[dict[str, Any]], elided: set[int] = frozenset(), dropped: int = 0,  # type: ignore[assignment]
                    call_style: str = "python") -> str:
    """The transcript as prompt text; ``elided`` tool events show :data:`ELIDED`; the ``dropped``
    oldest events after the first are left out (with a note); earlier calls in ``call_style``
    (:data:`CALL_STYLES`)."""
    lines = [_line(transcript[0], False, call_style)] if transcript else []
    if dropped:
        lines.append(f"[{dropped} earlier events elided]")
    lines += [_line(e, i in elided, call_style) for i, e in enumerate(transcript) if i > dropped]
    return "\n".join(lines) + "\nAssistant:"


_ARROW = re.compile(r" -> ")


def trajectory_calls(answer: str) -> tuple[tuple[ToolCall, ...], str] | None:
    """The calls of a stored trajectory (``call; call -> final``, the form
    :func:`~rizz.adapters.agents.episode.compact_trajectory` writes) and what follows them
    (``" -> final"``, or ``""``); None when no call can be read (``(no tool call)``, or a
    trajectory cut inside its calls).

    Examples:
      >>> calls, rest = trajectory_calls("get_user(user_id='u1'); cancel(order_id='#W2') -> Done.")
      >>> [c.name for c in calls], rest
      (['get_user', 'cancel'], ' -> Done.')
      >>> trajectory_calls("(no tool call) -> Hello") is None
      True
    """
    for end in [m.start() for m in _ARROW.finditer(answer)] + [len(answer)]:
        try:  # the first " -> " after which the head parses: an argument may hold " -> " itself
            calls = parse_reply(answer[:end])
        except CallSyntaxError:
            continue
        if calls:
            return calls, answer[end:]
    return None


def placeholder_calls(calls: tuple[ToolCall, ...]) -> str:
    """``calls`` as the trajectory writes them (``; `` between calls), each argument's value
    written ``{parameter}`` (Agent Workflow Memory's abstraction of example-specific values,
    Wang et al. 2024): ``find_events(city={city}, date={date})``."""
    return "; ".join(f"{c.name}(" + ", ".join(f"{k}={{{k}}}" for k in c.arguments) + ")" for c in calls)


def _offered(el: StreamElement) -> frozenset[str]:
    names = {str(t.get("name", "")) for t in el.tools or ()}
    return frozenset(names | {n.replace(".", "_") for n in names})


def shown_examples(items: list[PromptItem], retrieved: Any, el: StreamElement, agents: AgentPolicy) -> list[PromptItem]:
    """The examples block's candidate ``items`` as ``agents`` says an agent's prompt shows them
    (:attr:`~rizz.core.policy.AgentPolicy.examples_offered_tools`,
    :attr:`~rizz.core.policy.AgentPolicy.example_values`): an example whose calls name a tool
    ``el`` does not offer is left out (``el`` without a tool list keeps every one), and under
    ``placeholders`` each call's values are written ``{parameter}``. An example whose calls
    cannot be read (:func:`trajectory_calls`) is shown as stored. Memory is not changed; the
    prompt's ``item_ids("examples")`` name what was shown."""
    if not agents.examples_offered_tools and agents.example_values == "shown":
        return items
    answers = {s.item.key: s.item.answer for s in retrieved.episodes}
    offered = _offered(el) if agents.examples_offered_tools and el.tools else None
    out = []
    for it in items:
        answer = answers.get(it.id)
        read = trajectory_calls(answer) if answer is not None else None
        if read is None:
            out.append(it)
            continue
        calls, rest = read
        if offered is not None and any(c.name not in offered for c in calls):
            continue
        if agents.example_values == "placeholders" and it.text.endswith(answer):  # type: ignore[arg-type]
            it = attrs.evolve(it, text=it.text[: len(it.text) - len(answer)] + placeholder_calls(calls) + rest)  # type: ignore[arg-type]
        out.append(it)
    return out


def episode_prompt(retrieved: Any, el: StreamElement, transcript: list[dict[str, Any]], policy: CompilerPolicy,
                   count_tokens: Callable[[str], int], budget: int, protocol: str = PROTOCOL,
                   call_style: str = "python", agents: AgentPolicy | None = None) -> CompiledPrompt:
    """Compile one agent step's prompt (see the module docstring); the transcript's earlier calls
    in ``call_style`` (:data:`CALL_STYLES`), the examples as ``agents`` shows them
    (:func:`shown_examples`; None: as stored). Raises PromptBudgetError."""
    return fit_episode(retrieved, el, transcript, policy, count_tokens, budget, protocol, call_style, agents)[0]


def fit_episode(retrieved: Any, el: StreamElement, transcript: list[dict[str, Any]], policy: CompilerPolicy,
                count_tokens: Callable[[str], int], budget: int, protocol: str = PROTOCOL,
                call_style: str = "python", agents: AgentPolicy | None = None) -> tuple[CompiledPrompt, frozenset[int], int]:
    """:func:`episode_prompt` and how its transcript was fitted: ``(prompt, elided, dropped)``,
    the indices of the tool events shown as :data:`ELIDED` and the number of oldest events after
    the first left out (:func:`chat_turns` writes the same transcript as chat turns).
    Raises PromptBudgetError."""
    task = task_text(el, protocol)
    base = count_tokens(task) + _SLACK
    if base > budget:
        raise PromptBudgetError(base, budget)
    tools = [i for i, e in enumerate(transcript) if e["role"] == "tool"]
    elided: set[int] = set()
    dropped = 0
    text = transcript_text(transcript, call_style=call_style)
    while base + count_tokens(text) > budget:
        if len(elided) < len(tools):
            elided.add(tools[len(elided)])
        elif dropped < len(transcript) - 1:
            dropped += 1
        else:
            raise PromptBudgetError(base + count_tokens(text), budget)
        text = transcript_text(transcript, elided, dropped, call_style)
    blocks = prompt_blocks(retrieved, text, task, None)
    if agents is not None:
        blocks["examples"] = shown_examples(blocks["examples"], retrieved, el, agents)
    return compile_prompt(blocks, policy, count_tokens, budget), frozenset(elided), dropped


def chat_turns(prompt: CompiledPrompt, transcript: list[dict[str, Any]], elided: frozenset[int], dropped: int) -> list[Message]:
    """``prompt`` as chat turns for a model whose chat template carries tool calls (Qwen2.5's):
    every compiled block but the transcript, then the first user line, as the first ``user``
    turn; then each later event as its own turn, fitted as :func:`fit_episode` fitted it (the
    ``dropped`` oldest after the first left out, with a note; ``elided`` tool results shown as
    :data:`ELIDED`): the user's lines as ``user`` turns, the agent's calls as ``assistant``
    turns holding ``<tool_call>`` blocks (the template's own form), its messages as
    ``assistant`` turns, tool results as ``tool`` turns (the template wraps them in
    ``<tool_response>``).

    A chat model reads its own earlier turns as its own; shown the whole transcript as one
    ``User:/Assistant:/Tool`` text, the Qwen2.5-Coder-1.5B continued that text instead of
    answering (results/2026-12-03-bfcl-multi-turn-qwen15.md).
    """
    pre = "\n\n".join(s.text() for s in prompt.sections if s.block != "input")
    first = transcript[0]["text"] if transcript else ""
    note = f"\n\n[{dropped} earlier events elided]" if dropped else ""
    turns = [Message("user", f"{pre}\n\n{first}{note}" if pre else f"{first}{note}")]
    for i, e in enumerate(transcript):
        if i == 0 or i <= dropped:
            continue
        if e["role"] == "user":
            turns.append(Message("user", e["text"]))
        elif e["role"] == "assistant":
            blocks = [f"<tool_call>\n{json.dumps({'name': n, 'arguments': a}, ensure_ascii=False)}\n</tool_call>"
                      for n, a in e.get("calls") or []]
            turns.append(Message("assistant", "\n".join(([e["text"]] if e.get("text") else []) + blocks)))
        else:
            turns.append(Message("tool", ELIDED if i in elided else str(e["result"])))
    return turns
