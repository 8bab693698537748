"""The frozen model as an agent (text protocol), and an LLM-simulated user (τ-bench).

The text protocol serves models without native tool calling: SmolLM2 and GGUF files whose chat
template takes no tools (the rest: :class:`~rizz.engine.native_agent.NativeToolAgent`).

:class:`ModelAgent` compiles each step's prompt (:func:`~rizz.engine.agent_prompt.episode_prompt`)
with the episode's retrieved memory, calls the model, and parses the reply with
:func:`~rizz.adapters.agents.calls.parse_reply` (``ast``, never ``eval``). Every call is kept in
``calls`` for the run log. :class:`LLMUser` plays the customer from the hidden brief.
"""

from __future__ import annotations

from typing import Any

import attrs

from rizz.adapters.agents.bfcl_env import shown_tools
from rizz.adapters.agents.calls import CallSyntaxError, parse_reply
from rizz.adapters.agents.env import Environment
from rizz.adapters.agents.loop import STOP, AgentReply
from rizz.adapters.models.base import Generation, Message, ModelBackend
from rizz.core import CompiledPrompt, PromptBudgetError
from rizz.core.policy import Policy
from rizz.engine.agent_prompt import PROTOCOL, episode_prompt
from rizz.formats.streams import StreamElement

__all__ = ["GREETING", "LLMUser", "ModelAgent", "PromptedAgent", "USER_PROMPT", "tools_at_turn"]

#: Raw-rendering stop strings: the model must not write the next user or tool line itself.
_STOP = ("\nUser:", "\nTool ")


def tools_at_turn(el: StreamElement, transcript: list[dict[str, Any]]) -> StreamElement:
    """``el`` with the tools listed at the transcript's current user turn (0: the input); ``el``
    itself when none is held out (:func:`~rizz.adapters.agents.bfcl_env.shown_tools`)."""
    if not el.environment or not el.environment.get("missed_function") or el.tools is None:
        return el
    turn = sum(1 for e in transcript if e["role"] == "user") - 1
    shown = shown_tools(el.tools, el.environment, turn)
    return el if len(shown) == len(el.tools) else attrs.evolve(el, tools=shown)


class PromptedAgent:
    """What every model-backed agent shares: each step's prompt compiled under ``budget`` with
    the episode's ``retrieved`` memory and the call ``protocol``; ``generations`` and
    ``prompts`` grow with each step (the run log's calls and the step's prompt figures)."""

    protocol = PROTOCOL

    def __init__(self, model: Any, policy: Policy, retrieved: Any, budget: int) -> None:
        self.model, self.policy, self.retrieved, self.budget = model, policy, retrieved, budget
        self.generations: list[Generation] = []
        self.prompts: list[CompiledPrompt] = []

    def compile(self, el: StreamElement, transcript: list[dict[str, Any]]) -> CompiledPrompt | None:
        """This step's prompt, or None when the task alone does not fit the budget (overflow)."""
        try:
            prompt = episode_prompt(self.retrieved, el, transcript, self.policy.compiler, self.model.count_tokens,
                                    self.budget, self.protocol)
        except PromptBudgetError:
            return None
        self.prompts.append(prompt)
        return prompt

    def reply(self, el: StreamElement, transcript: list[dict[str, Any]], env: Environment) -> AgentReply:
        """The next reply: this step's prompt, then :meth:`ask` (an overflow when it does not fit).
        The prompt and the API's tool list show the tools listed at the current user turn
        (:func:`~rizz.adapters.agents.bfcl_env.shown_tools`: BFCL's held-out functions appear at their turn)."""
        del env
        el = tools_at_turn(el, transcript)
        prompt = self.compile(el, transcript)
        return AgentReply("", overflow=True) if prompt is None else self.ask(el, prompt)

    def ask(self, el: StreamElement, prompt: CompiledPrompt) -> AgentReply:
        """The model's reply to ``prompt`` (each backend's own call)."""
        raise NotImplementedError


class ModelAgent(PromptedAgent):
    """One episode's agent over ``model`` speaking the text protocol (Python call syntax)."""

    def __init__(self, model: ModelBackend, policy: Policy, retrieved: Any, budget: int, rendering: str) -> None:
        super().__init__(model, policy, retrieved, budget)
        self.rendering = rendering

    def ask(self, el: StreamElement, prompt: CompiledPrompt) -> AgentReply:
        del el
        raw = self.rendering == "raw"
        gen = self.model.generate([Message("user", prompt.text)], max_tokens=self.policy.agents.reply_tokens,
                                  stop=_STOP if raw else (), rendering="raw" if raw else "chat")
        self.generations.append(gen)
        try:
            calls = parse_reply(gen.text)
        except CallSyntaxError as err:
            return AgentReply(gen.text, error=f"malformed call: {err}", prompt_tokens=prompt.token_count)
        return AgentReply(gen.text.strip(), calls, prompt_tokens=prompt.token_count)


USER_PROMPT = (
    "You are a customer talking to a support agent. Your situation and goal (keep it to yourself, "
    "reveal details only when asked):\n{brief}\n\nWrite only your next message as the customer, short. "
    "When your goal is met, or cannot be met, write {stop}.\n\nConversation so far:\n{dialogue}\nCustomer:")


#: The agent's opening line the simulated customer answers first, as in τ-bench's own user
#: simulation (``LLMUserSimulationEnv.reset`` in ``tau_bench/envs/user.py``). Only the customer
#: sees it; the agent's transcript starts with the customer's first message. Without it the
#: Qwen2.5-Coder-1.5B, shown an empty conversation, opened with the stop word on both tasks it
#: played (results/2026-12-03-tau-qwen15.md).
GREETING = "Hi! How can I help you today?"

#: Tokens kept free in the customer's window for the chat template's role markers (SmolLM2's
#: ChatML wraps a message in about 10 tokens; rizz's choice, with room to spare).
USER_MARGIN = 32


class LLMUser:
    """The simulated customer of a τ-bench task (``--user-model``, default the agent's model)."""

    def __init__(self, model: ModelBackend, brief: str, max_tokens: int) -> None:
        self.model, self.brief, self.max_tokens = model, brief, max_tokens
        self.generations: list[Generation] = []

    def reply(self, transcript: list[dict[str, Any]]) -> str:
        who = {"user": "Customer", "assistant": "Agent"}
        lines = [f"Agent: {GREETING}"] + [f"{who[e['role']]}: {e['text']}" for e in transcript
                                          if e["role"] in who and not e.get("calls") and not e.get("malformed")]
        text = self.prompt(lines)
        gen = self.model.generate([Message("user", text)], max_tokens=self.max_tokens, stop=("\nAgent:",), rendering="chat")
        self.generations.append(gen)
        return gen.text.strip() or STOP

    def prompt(self, lines: list[str]) -> str:
        """The customer's prompt: the brief and the dialogue ``lines``, oldest lines dropped
        (and said to be) until it fits the user model's window less its reply
        (``context_window − max_tokens − USER_MARGIN`` tokens, the model's own tokenizer).
        The brief and the newest line always stay."""
        budget = self.model.context_window - self.max_tokens - USER_MARGIN
        kept, dropped = list(lines), 0
        while True:
            shown = (["(earlier turns omitted)"] if dropped else []) + kept
            text = USER_PROMPT.format(brief=self.brief, stop=STOP, dialogue="\n".join(shown) or "(none yet)")
            if len(kept) <= 1 or self.model.count_tokens(text) <= budget:
                return text
            kept.pop(0)
            dropped += 1
