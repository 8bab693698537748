"""The pure core of RIZZ: immutable adaptive state and the step transition.

Imports only the standard library, attrs, pyrsistent and numpy. No model, network, clock,
randomness or file I/O: every non-deterministic value arrives in :class:`StepInput`.

Example:
  >>> from rizz.core import rizz, Policy
  >>> r = rizz(Policy())
  >>> state = r.init()
  >>> len(state.branches)
  0
"""

from rizz.core.compiler import (
    CompiledPrompt,
    DroppedItem,
    PromptBudgetError,
    PromptItem,
    PromptSection,
    compile_prompt,
    prompt_blocks,
)
from rizz.core.decide import content_key, distill_batch
from rizz.core.inputs import CandidateRule, StepInput, Verdict
from rizz.core.policy import BLOCKS, SHAPES, Policy, policy_schema
from rizz.core.records import AdaptiveState, Branch, Label, empty_state
from rizz.core.retrieval import Retrieved, retrieve, rule_score
from rizz.core.routing import RouteDecision, jaccard, needs_label, normalise_label, route, snap_label
from rizz.core.serialize import digest, from_data, to_data
from rizz.core.tenants import TenantStates, WalledDecision, sub_state, unwall, walled
from rizz.core.transition import Plan, Rizz, RouteResult, StepResult, rizz
from rizz.errors import RizzError

__all__ = [
    "BLOCKS",
    "SHAPES",
    "AdaptiveState",
    "Branch",
    "CandidateRule",
    "CompiledPrompt",
    "DroppedItem",
    "Label",
    "Plan",
    "Policy",
    "PromptBudgetError",
    "PromptItem",
    "PromptSection",
    "Retrieved",
    "Rizz",
    "RizzError",
    "RouteDecision",
    "RouteResult",
    "StepInput",
    "StepResult",
    "TenantStates",
    "Verdict",
    "WalledDecision",
    "compile_prompt",
    "content_key",
    "digest",
    "distill_batch",
    "empty_state",
    "from_data",
    "jaccard",
    "needs_label",
    "normalise_label",
    "policy_schema",
    "prompt_blocks",
    "retrieve",
    "rizz",
    "route",
    "rule_score",
    "snap_label",
    "sub_state",
    "to_data",
    "unwall",
    "walled",
]
