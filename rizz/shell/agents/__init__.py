"""Tool-using episodes under RIZZ (issue #13): the loop, the environments, the oracle.

* :mod:`~rizz.shell.agents.loop` -- one episode: bounded model replies and tool executions;
* :mod:`~rizz.shell.agents.calls` -- the text call protocol (Python call syntax, ``ast``; SmolLM2
  and GGUF files whose template takes no tools);
* :mod:`~rizz.shell.agents.native` -- Anthropic ``tool_use`` / OpenAI ``tools`` calling, and an
  embedded GGUF's own chat-template tool calls (the shipped Qwen2.5-Coder models);
* :mod:`~rizz.shell.agents.qwen_tools` -- reading Qwen's ``<tool_call>`` JSON blocks;
* :mod:`~rizz.shell.agents.prompt` -- each step's prompt under the budget (transcript elided
  oldest tool result first);
* :mod:`~rizz.shell.agents.bfcl_env`, :mod:`~rizz.shell.agents.tau_db` (+ ``tau_retail``,
  ``tau_airline``) -- the environments;
* :mod:`~rizz.shell.agents.oracle` -- ``--model oracle`` and the do-nothing agent;
* :mod:`~rizz.shell.agents.step` -- an episode as one Session step.
"""

from rizz.shell.agents.calls import CallSyntaxError, ToolCall, format_call, parse_reply
from rizz.shell.agents.env import Environment, ToolError, make_environment
from rizz.shell.agents.episode import Episode, compact_trajectory
from rizz.shell.agents.loop import STOP, AgentReply, run_episode

__all__ = ["STOP", "AgentReply", "CallSyntaxError", "Environment", "Episode", "ToolCall", "ToolError",
           "compact_trajectory", "format_call", "make_environment", "parse_reply", "run_episode"]
