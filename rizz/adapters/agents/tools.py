"""What a tool gives back: its text result, or the error it refuses a call with.

Shared by the environments (:mod:`~rizz.adapters.agents.tau_db`,
:mod:`~rizz.adapters.agents.bfcl_env`) and the loop that runs them
(:mod:`~rizz.adapters.agents.loop`); :mod:`~rizz.adapters.agents.env` builds the environments.
"""

from __future__ import annotations

import json
from typing import Any

from rizz.errors import RizzError

__all__ = ["ToolError", "to_text"]


class ToolError(RizzError):
    """A tool refused a call; ``str(err)`` is what the model sees after ``Error: ``."""


def to_text(value: Any) -> str:
    """A tool result as the text the model reads: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
