"""Tool-using episodes under RIZZ (docs/agents.md): the environments, the call protocol, the loop.

* :mod:`~rizz.adapters.agents.loop` -- one episode: bounded model replies and tool executions;
* :mod:`~rizz.adapters.agents.calls` -- the text call protocol (Python call syntax, ``ast``; SmolLM2
  and GGUF files whose template takes no tools);
* :mod:`~rizz.adapters.agents.qwen_tools` -- reading Qwen's ``<tool_call>`` JSON blocks;
* :mod:`~rizz.adapters.agents.env` -- the environment an element names: BFCL
  (:mod:`~rizz.adapters.agents.bfcl_env`), τ-bench (:mod:`~rizz.adapters.agents.tau_env` over
  :mod:`~rizz.adapters.agents.tau_db`, with ``tau_retail`` and ``tau_airline``);
* :mod:`~rizz.adapters.agents.tools` -- a tool's text result and the error it refuses with;
* :mod:`~rizz.adapters.agents.episode` -- what an episode did (:class:`~rizz.adapters.agents.episode.ToolEpisode`;
  ``Episode``, its old name, is kept as an alias).

What drives them is above, in the engine: :mod:`~rizz.engine.agent_step` (an episode as one
Session step), :mod:`~rizz.engine.model_agent` and :mod:`~rizz.engine.native_agent` (the model as
agent: the text protocol; Anthropic ``tool_use`` / OpenAI ``tools`` calling and an embedded GGUF's
own chat-template tool calls), :mod:`~rizz.engine.agent_prompt` (each step's prompt under the
budget); ``--model oracle`` and the do-nothing agent are :mod:`~rizz.adapters.models.oracle`.
"""

from rizz.adapters.agents.calls import CallSyntaxError, ToolCall, format_call, parse_reply
from rizz.adapters.agents.env import Environment, make_environment
from rizz.adapters.agents.episode import Episode, ToolEpisode, compact_trajectory
from rizz.adapters.agents.loop import STOP, AgentReply, run_episode
from rizz.adapters.agents.tools import ToolError

__all__ = ["STOP", "AgentReply", "CallSyntaxError", "Environment", "Episode", "ToolCall", "ToolEpisode", "ToolError",
           "compact_trajectory", "format_call", "make_environment", "parse_reply", "run_episode"]
