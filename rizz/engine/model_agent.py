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
from rizz.engine.agent_prompt import PROTOCOL, TURN_MARKERS, fit_episode
from rizz.formats.streams import StreamElement

__all__ = ["GREETING", "LLMUser", "ModelAgent", "PromptedAgent", "USER_PROMPT", "tools_at_turn"]

#: Raw-rendering stop strings: the model must not write the next user or tool line itself.
_STOP = TURN_MARKERS[:2]


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
    ``prompts`` grow with each step (the run log's calls and the step's prompt figures);
    ``refusals``: the requests a server refused as too long for its window, no reply had
    (logged as calls marked ``refused``: each is one of the episode's model calls)."""

    protocol = PROTOCOL
    #: How the prompt's transcript writes earlier calls (:data:`~rizz.engine.agent_prompt.CALL_STYLES`).
    call_style = "python"

    def __init__(self, model: Any, policy: Policy, retrieved: Any, budget: int) -> None:
        self.model, self.policy, self.retrieved, self.budget = model, policy, retrieved, budget
        self.generations: list[Generation] = []
        self.refusals: list[Generation] = []
        self.prompts: list[CompiledPrompt] = []
        #: The last compiled step's transcript and how it was fitted (elided tool events, dropped events).
        self.fitted: tuple[list[dict[str, Any]], frozenset[int], int] = ([], frozenset(), 0)

    def compile(self, el: StreamElement, transcript: list[dict[str, Any]]) -> CompiledPrompt | None:
        """This step's prompt, or None when the task alone does not fit the budget (overflow)."""
        try:
            prompt, elided, dropped = fit_episode(self.retrieved, el, transcript, self.policy.compiler, self.model.count_tokens,
                                                  self.budget, self.protocol, self.call_style, self.policy.agents)
        except PromptBudgetError:
            return None
        self.prompts.append(prompt)
        self.fitted = (transcript, elided, dropped)
        return prompt

    def reply(self, el: StreamElement, transcript: list[dict[str, Any]], env: Environment) -> AgentReply:
        """The next reply: this step's prompt, then :meth:`ask` (an overflow when it does not fit
        the budget: nothing is sent, so the reply is not sent and no model call).
        The prompt and the API's tool list show the tools listed at the current user turn
        (:func:`~rizz.adapters.agents.bfcl_env.shown_tools`: BFCL's held-out functions appear at their turn)."""
        del env
        el = tools_at_turn(el, transcript)
        prompt = self.compile(el, transcript)
        return AgentReply("", overflow=True, sent=False) if prompt is None else self.ask(el, prompt)

    def ask(self, el: StreamElement, prompt: CompiledPrompt) -> AgentReply:
        """The model's reply to ``prompt`` (each backend's own call)."""
        raise NotImplementedError

    def cut_reply(self, gen: Generation, text: str, prompt: CompiledPrompt) -> AgentReply | None:
        """A reply without calls that the token cap (``agents.reply_tokens``) cut off — the
        backend's finish reason ``"length"``, or as many completion tokens as the cap — as a
        malformed reply whose error tells the model why; None for a reply that ended. A cut
        message is not one to show the user: the 1.5B's τ-bench calls, cut at 256 tokens, went
        to the customer as text (results/2026-12-03-tau-qwen15.md)."""
        cap = self.policy.agents.reply_tokens
        if gen.finish_reason != "length" and gen.completion_tokens < cap:
            return None
        return AgentReply(text, error=f"the reply was cut off at {cap} tokens (agents.reply_tokens) before it ended; "
                                      "write a shorter reply, or the call alone", prompt_tokens=prompt.token_count)


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
        cut = None if calls else self.cut_reply(gen, gen.text, prompt)
        return cut if cut is not None else AgentReply(gen.text.strip(), calls, prompt_tokens=prompt.token_count)


#: The customer's system message (rizz's wording of τ-bench's user-simulation rules,
#: ``tau_bench/envs/user.py``): the hidden brief, one short line at a time, nothing invented,
#: the stop word only once the request is done. The conversation follows as chat turns with the
#: roles flipped, as in τ-bench: the agent's lines are the ``user`` messages, the customer's the
#: ``assistant`` ones. The Qwen2.5-Coder-1.5B wrote the stop word as its first message under a
#: single-message prompt ending "When your goal is met, or cannot be met, write ###STOP###", with
#: or without the greeting; with these rules it states its request, then answers the agent's
#: questions (results/2026-12-03-tau-qwen15.md).
USER_PROMPT = (
    "You are playing a customer who contacts a support agent. This is who you are and what you want; "
    "keep it to yourself and reveal a detail only when the agent needs it:\n{brief}\n\n"
    "Rules:\n- Write one short message at a time, as the customer.\n- Give only what the current step needs.\n"
    "- Do not invent facts you were not given (say you do not know them).\n"
    "- When the agent has confirmed that your whole request is done, end with a message containing only {stop}; "
    "never write it earlier.\n- In your first message, tell the agent what you need.{omitted}")

#: Said in the system message when the oldest turns were dropped to fit the window.
OMITTED = "\n\n(The earliest turns of the conversation are omitted.)"

#: The agent's opening line the simulated customer answers first, as in τ-bench's own user
#: simulation (``LLMUserSimulationEnv.reset`` in ``tau_bench/envs/user.py``). Only the customer
#: sees it; the agent's transcript starts with the customer's first message.
GREETING = "Hi! How can I help you today?"

#: Tokens kept free in the customer's window for the chat template's role markers (rizz's
#: choice: ChatML wraps a message in about 5 tokens; with room to spare for the system turn).
USER_MARGIN = 32
#: Template tokens counted per chat turn when fitting the customer's dialogue (ChatML's
#: ``<|im_start|>role\n … <|im_end|>\n``: 5 tokens; rizz's choice, rounded up).
TURN_TOKENS = 8


class LLMUser:
    """The simulated customer of a τ-bench task (``--user-model``, default the agent's model)."""

    def __init__(self, model: ModelBackend, brief: str, max_tokens: int) -> None:
        self.model, self.brief, self.max_tokens = model, brief, max_tokens
        self.generations: list[Generation] = []

    def reply(self, transcript: list[dict[str, Any]]) -> str:
        """The customer's next message for ``transcript`` (the agent's view: ``user`` entries are
        the customer's, ``assistant`` entries without calls the agent's); the stop word when the
        model writes nothing."""
        flip = {"user": "assistant", "assistant": "user"}  # the customer is the model's own voice
        turns = [Message("user", GREETING)]
        for e in transcript:
            if e["role"] not in flip or e.get("calls") or e.get("malformed"):
                continue
            role = flip[e["role"]]
            if turns[-1].role == role:  # two lines of one side in a row read as one turn
                turns[-1] = Message(role, f"{turns[-1].content}\n{e['text']}")
            else:
                turns.append(Message(role, e["text"]))
        gen = self.model.generate(self.prompt(turns), max_tokens=self.max_tokens, rendering="chat")
        self.generations.append(gen)
        return gen.text.strip() or STOP

    def prompt(self, turns: list[Message]) -> list[Message]:
        """The customer's messages: the system message with the brief, then ``turns`` (the
        greeting first), the oldest exchanges after the greeting dropped in pairs (and said to
        be) until they fit the user model's window less its reply (``context_window −
        max_tokens − USER_MARGIN`` tokens, the model's own tokenizer, :data:`TURN_TOKENS` per
        turn). The system message, the greeting and the newest turn always stay."""
        budget = self.model.context_window - self.max_tokens - USER_MARGIN
        head, rest, dropped = turns[:1], list(turns[1:]), False
        while True:
            system = Message("system", USER_PROMPT.format(brief=self.brief, stop=STOP, omitted=OMITTED if dropped else ""))
            msgs = [system, *head, *rest]
            used = sum(self.model.count_tokens(m.content) + TURN_TOKENS for m in msgs)
            if len(rest) <= 1 or used <= budget:
                return msgs
            rest = rest[2:] if len(rest) > 2 else rest[-1:]  # one exchange: the roles keep alternating
            dropped = True
