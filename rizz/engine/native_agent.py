"""Native tool calling: Anthropic ``tool_use`` blocks, OpenAI ``tools``/``tool_calls``, and an
embedded GGUF's own chat-template format (Qwen2.5's ``<tool_call>`` blocks).

The prompt is the same budgeted text as the text protocol's (:func:`~rizz.engine.agent_prompt.episode_prompt`:
memory, task, transcript) with :data:`~rizz.engine.agent_prompt.NATIVE_PROTOCOL` in place of the
Python-call protocol, sent as one user turn (through a chat template: as chat turns, below); the tool list also goes in the API's own ``tools``
field (names through :func:`api_name`, mapped back on return), and the model's calls come back
in the API's own structures:

* Anthropic Messages: ``tools=[{"name", "description", "input_schema"}]``; the reply's
  ``tool_use`` blocks (``name``, ``input``) are the calls, its ``text`` blocks the message.
* OpenAI chat completions: ``tools=[{"type": "function", "function": {...}}]`` with
  ``tool_choice="auto"`` and a short :data:`SYSTEM` turn before the prompt; the reply's
  ``message.tool_calls`` (``function.name``, JSON ``function.arguments``) are the calls; arguments
  that are not a JSON object are a malformed call (the tool's error result for the model).
  llama-cpp-python's server does this with ``--chat_format chatml-function-calling``
  (``llama_cpp/llama_chat_format.py``): it calls a tool only when ``tool_choice`` is ``"auto"``
  or names one, lists the tools in the system turn, and decodes the arguments under a grammar
  made from the tool's JSON schema (so they always parse); in that mode it ignores
  ``max_tokens`` for the call's arguments (bounded by the server's ``n_ctx``).
* An embedded GGUF whose chat template writes ``tools`` and asks for ``<tool_call>`` blocks
  (:func:`~rizz.adapters.agents.qwen_tools.template_calls_tools` on
  :attr:`~rizz.adapters.models.embedded.EmbeddedModel.chat_template`: the shipped Qwen2.5-Coder
  models, or a ``gguf:PATH`` with such a template), kind ``template``: the same OpenAI-style
  tool list goes to :meth:`~rizz.adapters.models.embedded.EmbeddedModel.generate_with_tools`
  (greedy, no system turn: the template's own), and the reply's call blocks are read by
  :func:`~rizz.adapters.agents.qwen_tools.parse_tool_calls` into the same calls; a malformed block
  is a malformed call as on the OpenAI path; a reply with no call block that is a Python-syntax
  call list of the element's tools is read as those calls (:func:`python_calls`); a reply without
  calls that the token cap (``agents.reply_tokens``) cut off is a malformed reply whose error says
  so, not a message to the user (:meth:`~rizz.engine.model_agent.PromptedAgent.cut_reply`, on the
  API and text-protocol paths too: a finish reason ``"length"``; the 1.5B's first τ-bench calls, written as fenced JSON, were cut
  at 256 tokens in 2 of 4 episodes, and the customer, shown the half call, stopped). Here the
  transcript goes as chat turns, not as one text
  (:func:`~rizz.engine.agent_prompt.chat_turns`: the compiled blocks and the first user line as
  the first user turn, the agent's calls as ``assistant`` turns of ``<tool_call>`` blocks, tool
  results as ``tool`` turns), fitted to the budget as the logged prompt was (whose transcript
  writes earlier calls as call objects, ``call_style`` ``json``); a prompt that fills the window
  ends the episode as ``overflow`` (refused before a token was evaluated: no model call). This
  path always renders through the chat template, whatever ``--rendering`` (the episode's prompt
  record says ``chat``). SmolLM2 and template-less
  files keep the text protocol (:class:`~rizz.engine.model_agent.ModelAgent`).

BFCL's schema types (``dict``, ``float``, ``tuple``, ``any``) are mapped to JSON-schema ones
(``object``, ``number``, ``array``, ``string``) for the APIs. These calls bypass the response
cache (a resumed episode asks again; the embedded model answers it the same).

As the backends' own ``generate`` (rizz.adapters.models.reasoning): a spec's ``?reasoning=N`` adds N tokens to
each reply's ``max_tokens`` (Anthropic: the request fields of the backend's own calls,
:meth:`~rizz.adapters.models.anthropic_backend.AnthropicModel.request_fields`: per model,
``temperature`` where taken, ``budget_tokens=N`` or adaptive thinking; API refusals raise
:class:`~rizz.adapters.models.base.ModelRequestError`); reasoning
(thinking blocks, ``reasoning_content``, inline ``<think>``) is kept out of the reply text and
returned in ``Generation.reasoning``; a reply without usage has its tokens counted and
``usage_estimated`` set; Anthropic calls are priced from the backend's table.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from rizz.adapters.agents.calls import CallSyntaxError, ToolCall, parse_reply
from rizz.adapters.agents.env import plain
from rizz.adapters.agents.loop import AgentReply
from rizz.adapters.agents.qwen_tools import parse_tool_calls, template_calls_tools
from rizz.adapters.models.anthropic_backend import price_usd
from rizz.adapters.models.base import ContextWindowExceeded, Generation, answer_and_reasoning
from rizz.core import CompiledPrompt
from rizz.core.policy import Policy
from rizz.engine.agent_prompt import NATIVE_PROTOCOL, TURN_MARKERS, chat_turns
from rizz.engine.model_agent import PromptedAgent
from rizz.formats.streams import StreamElement

__all__ = ["SYSTEM", "NativeToolAgent", "api_name", "json_schema", "native_kind", "python_calls"]

#: The OpenAI path's system message. llama-cpp-python's ``chatml-function-calling`` handler
#: writes the tool list into the system turn only (no system message: the model never sees
#: the tools), so the agent always sends one; the compiled prompt is the user turn.
SYSTEM = "You are a helpful agent. Use the functions when they help the user."
#: llama-cpp-python's error when a completion outgrows ``n_ctx`` (HTTP 500 from its server).
#: Its ``chatml-function-calling`` handler ignores ``max_tokens`` while it writes calls and
#: keeps asking for another call until the model stops: a model that never stops fills the
#: window (measured: SmolLM2-135M on BFCL ``parallel_multiple_100``). Such a step ends the
#: episode as ``overflow`` (reward 0) instead of stopping the run; the request was sent, so it
#: is one of the episode's model calls (``AgentReply.sent``), logged as a call marked ``refused``.
_WINDOW_FULL = "exceed context window"

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string", "list": "array", "bool": "boolean"}


def json_schema(schema: Any) -> Any:
    """A BFCL/OpenAI parameter schema with BFCL's type names mapped to JSON-schema ones."""
    if isinstance(schema, dict):
        out = {k: json_schema(v) for k, v in schema.items()}
        if isinstance(out.get("type"), str):
            out["type"] = _TYPES.get(out["type"], out["type"])
        return out
    if isinstance(schema, list):
        return [json_schema(v) for v in schema]
    return schema


def _layers(model: Any) -> tuple[Any, Any]:
    """``(queue, api backend)`` of ``model``: under a cache (``.backend``) and, in ``rizz
    serve``, the shared queue (:class:`~rizz.apps.serve.tenants.FairModel`, which has
    ``native``), the backend whose client the agent calls; queue None outside serve."""
    inner = getattr(model, "backend", model)
    if callable(getattr(inner, "native", None)) and hasattr(inner, "backend"):
        return inner, inner.backend
    return None, inner


def native_kind(model: Any) -> str | None:
    """``anthropic`` / ``openai`` when ``model`` (or the backend a cache, or serve's shared
    queue, wraps) has a native tool-calling API rizz drives, ``template`` for an embedded GGUF
    whose own chat template takes ``tools`` (see the module docstring), else None."""
    _, inner = _layers(model)
    if callable(getattr(inner, "generate_with_tools", None)) and template_calls_tools(getattr(inner, "chat_template", "")):
        return "template"
    name = getattr(inner, "name", "")
    if name.startswith("anthropic:") and hasattr(inner, "_client"):
        return "anthropic"
    if name.startswith("openai:") and hasattr(inner, "_client"):
        return "openai"
    return None


def api_name(name: str) -> str:
    """``name`` as the APIs accept a function name (``^[a-zA-Z0-9_-]{1,64}$``): other characters
    become ``_`` (BFCL's dotted ``math.factorial`` -> ``math_factorial``, as BFCL's own OpenAI
    handler sends it); the agent maps the model's calls back to the element's names."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "_"


def _element_calls(el: StreamElement, raw_calls: Any) -> tuple[ToolCall, ...]:
    """``(name, arguments)`` pairs as the element's calls: names the model wrote in
    :func:`api_name` form mapped back to the element's (``math_factorial`` -> ``math.factorial``);
    other names kept as written (an unknown tool: the environment's error result)."""
    names = {api_name(n): n for n in (plain(t)["name"] for t in el.tools or ())}
    return tuple(ToolCall(names.get(n, n), a) for n, a in raw_calls)


#: Where a reply's own text ends and the model's invented continuation of the transcript begins.
_TRANSCRIPT_LINE = re.compile("|".join(re.escape(m) for m in TURN_MARKERS))


def python_calls(el: StreamElement, text: str) -> tuple[ToolCall, ...]:
    r"""Calls a template-format reply wrote as Python call syntax (``[get_order(id=1)]``, the
    text protocol's and BFCL's form) instead of call blocks: its text up to the first invented
    transcript line (``\nUser:``, ``\nTool ``, ``\nAssistant:``), read by
    :func:`~rizz.adapters.agents.calls.parse_reply`, when every name is one of ``el``'s tools;
    else ``()`` (the reply stays a message to the user).

    rizz's leniency, measured: the Qwen2.5-Coder-1.5B, given the transcript as one text, made its
    first call of a BFCL multi-turn episode as a call block and then wrote calls as this text;
    with the transcript as chat turns none of its 51 replies needed it
    (results/2026-12-03-bfcl-multi-turn-qwen15.md). Kept for models that write BFCL's own form,
    and for the form of rizz's own trajectory memory (``a(x=1); b(y=2) -> final answer``,
    :func:`~rizz.adapters.agents.episode.compact_trajectory`), which the 1.5B, shown τ-bench
    trajectories as examples, wrote as its reply instead of a call block
    (results/2026-12-04-tau-qwen15-all.md); a copied ``-> final answer`` is dropped.

    Example:
        >>> el = StreamElement(id="x", input="hi", tools=({"name": "cd", "parameters": {}},))
        >>> python_calls(el, "[cd(folder='docs')]\nTool cd: ok"), python_calls(el, "[ls()]"), python_calls(el, "Done.")
        ((ToolCall(name='cd', arguments={'folder': 'docs'}),), (), ())
        >>> python_calls(el, "cd(folder='docs'); cd(folder='src') -> Done.")
        (ToolCall(name='cd', arguments={'folder': 'docs'}), ToolCall(name='cd', arguments={'folder': 'src'}))
    """
    body = _TRANSCRIPT_LINE.split(text, maxsplit=1)[0]
    try:
        calls = parse_reply(body)
    except CallSyntaxError:
        calls = ()
    if not calls and " -> " in body:  # a trajectory copied whole: its calls, then "-> final answer"
        try:
            calls = parse_reply(body.split(" -> ", 1)[0])
        except CallSyntaxError:
            return ()
    names = {plain(t)["name"] for t in el.tools or ()}
    names |= {api_name(n) for n in names}
    if not calls or any(c.name not in names for c in calls):
        return ()
    return _element_calls(el, [(c.name, c.arguments) for c in calls])


class NativeToolAgent(PromptedAgent):
    """One episode's agent over native tool calling: an API backend's, or an embedded GGUF's own
    chat-template format (see the module docstring)."""

    protocol = NATIVE_PROTOCOL

    def __init__(self, model: Any, policy: Policy, retrieved: Any, budget: int) -> None:
        super().__init__(model, policy, retrieved, budget)
        self.queue, self.inner = _layers(model)  # under serve, every request waits its turn in the queue
        self.kind = native_kind(model)
        if self.kind == "template":  # earlier calls as the call objects the model is asked to write
            self.call_style = "json"

    def _send(self, request: Any) -> Any:
        """``request()`` now, or in its turn in serve's shared queue."""
        return request() if self.queue is None else self.queue.native(request)

    def _tools(self, el: StreamElement) -> list[dict[str, Any]]:
        tools = [plain(t) for t in el.tools or ()]
        empty = {"type": "object", "properties": {}}
        if self.kind == "anthropic":
            return [{"name": api_name(t["name"]), "description": t.get("description") or "",
                     "input_schema": json_schema(t.get("parameters") or empty)} for t in tools]
        return [{"type": "function", "function": {"name": api_name(t["name"]), "description": t.get("description") or "",
                                                  "parameters": json_schema(t.get("parameters") or empty)}}
                for t in tools]

    def _anthropic(self, prompt: CompiledPrompt, el: StreamElement, max_tokens: int, thinking: int) -> tuple[Any, ...]:
        fields = self.inner.request_fields(max_tokens - thinking)  # as generate: what this model takes
        resp, attempts = self._send(lambda: self.inner.create_counted(
            messages=[{"role": "user", "content": prompt.text}], tools=self._tools(el), **fields))
        text = "".join(b.text for b in resp.content if b.type == "text")
        reasoning = "\n\n".join((getattr(b, "thinking", None) or "") if b.type == "thinking" else "[redacted thinking]"
                                 for b in resp.content if b.type in ("thinking", "redacted_thinking"))
        calls = [(b.name, dict(b.input)) for b in resp.content if b.type == "tool_use"]
        u = getattr(resp, "usage", None)
        usage = (int(getattr(u, "input_tokens", 0) or 0), int(getattr(u, "output_tokens", 0) or 0))
        return text, reasoning, calls, None, usage, "stop", attempts

    def _openai(self, prompt: CompiledPrompt, el: StreamElement, max_tokens: int) -> tuple[Any, ...]:
        resp, attempts = self._send(lambda: self.inner.create_counted(
            model=self.inner.model, max_tokens=max_tokens, tools=self._tools(el), tool_choice="auto",
            temperature=self.inner.temperature, seed=0,  # as the backend's generate: greedy and seeded by default
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt.text}]))
        msg = resp.choices[0].message
        reasoning = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None) or ""
        calls, error = [], None
        for tc in msg.tool_calls or []:
            try:
                args = json.loads(tc.function.arguments or "{}")
                if not isinstance(args, dict):
                    raise ValueError("not an object")
                calls.append((tc.function.name, args))
            except ValueError as err:
                error = f"malformed call: arguments of {tc.function.name} are not a JSON object ({err})"
        u = resp.usage
        usage = (int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0)) if u else (0, 0)
        return (msg.content or "", reasoning if isinstance(reasoning, str) else "", calls, error, usage,
                str(resp.choices[0].finish_reason or "stop"), attempts)

    def _template(self, prompt: CompiledPrompt, el: StreamElement) -> AgentReply:
        """The embedded model's reply through its own chat template, its call blocks parsed."""
        turns = chat_turns(prompt, *self.fitted)
        try:
            gen = self._send(lambda: self.inner.generate_with_tools(
                turns, self._tools(el), max_tokens=self.policy.agents.reply_tokens))
        except ContextWindowExceeded:  # refused before a token was evaluated: no model call, as rizz's own budget
            return AgentReply("", overflow=True, sent=False, prompt_tokens=prompt.token_count)
        self.generations.append(gen)
        parsed = parse_tool_calls(gen.text)
        if parsed.error is not None:  # the reply as written, so the log shows the bad block
            return AgentReply(gen.text, error=parsed.error, prompt_tokens=prompt.token_count)
        if not parsed.calls:
            written = python_calls(el, parsed.message)
            if written:
                return AgentReply("", written, prompt_tokens=prompt.token_count)
            cut = self.cut_reply(gen, gen.text, prompt)
            if cut is not None:
                return cut
        return AgentReply(parsed.message, _element_calls(el, parsed.calls), prompt_tokens=prompt.token_count)

    def ask(self, el: StreamElement, prompt: CompiledPrompt) -> AgentReply:
        if self.kind == "template":
            return self._template(prompt, el)
        t0 = time.perf_counter()
        thinking = int(getattr(self.inner, "reasoning_tokens", 0))
        max_tokens = self.policy.agents.reply_tokens + thinking
        if self.kind == "anthropic":
            text, reasoning, raw_calls, error, usage, finish, attempts = self._anthropic(prompt, el, max_tokens, thinking)
        else:
            try:
                text, reasoning, raw_calls, error, usage, finish, attempts = self._openai(prompt, el, max_tokens)
            except Exception as err:  # noqa: BLE001 - only the server's own window overflow is caught
                if _WINDOW_FULL not in str(err):
                    raise
                # sent: a model call, logged as a refused one (no reply, no usage: rizz's count of the prompt)
                self.refusals.append(Generation("", prompt_tokens=prompt.token_count, completion_tokens=0,
                                                latency_s=time.perf_counter() - t0, cost_usd=None, model=self.model.name,
                                                finish_reason="refused", usage_estimated=True))
                return AgentReply("", overflow=True, prompt_tokens=prompt.token_count)
        calls = _element_calls(el, raw_calls)
        latency = time.perf_counter() - t0
        parts = answer_and_reasoning(text, reasoning)
        text = str(parts["text"])
        estimated = usage[0] == 0  # a server or proxy that drops usage: count, flag, never a silent 0
        if estimated:
            usage = (prompt.token_count, usage[1] or self.model.count_tokens(text) + self.model.count_tokens(str(parts["reasoning"])))
        cost = None
        if self.kind == "anthropic":
            cost = price_usd(self.inner.model_id, usage[0], usage[1])
        gen = Generation(prompt_tokens=usage[0], completion_tokens=usage[1], latency_s=latency, cost_usd=cost,
                         model=self.model.name, finish_reason=finish, usage_estimated=estimated,
                         attempts=attempts, **parts)  # type: ignore[arg-type]
        self.generations.append(gen)
        if error is not None:
            return AgentReply(text, error=error, prompt_tokens=prompt.token_count)
        if not calls:
            cut = self.cut_reply(gen, text, prompt)
            if cut is not None:
                return cut
        return AgentReply(text.strip(), calls, prompt_tokens=prompt.token_count)
