"""Evidence that a memory earns its place in a prompt.

Two ledgers, both folded from verdicts and both empty (absent from the digest) while their
policy switch is off:

* **Block evidence** (``evidence.enabled``): for each gated block kind (examples, rules,
  mistakes, …) of a branch, the answered steps of that branch that showed the block and those
  that did not, with their reward sums, and helpful/harmful counters that move like a rule's
  (spec §6). A block is *withheld* from the branch's prompts once it has been shown
  ``min_shown`` times, harmful − helpful ≥ ``margin``, and its mean reward when shown is not
  above its mean reward when hidden (or it has never been hidden). Withholding produces hidden
  steps, so a block whose absence turns out worse comes back: a greedy two-arm comparison per
  branch and block. With ``explore_every`` = k > 0 the comparison is a two-armed bandit with
  deterministic exploration: every k-th answered step of the branch does the opposite of the
  gate's choice, and a block is withheld once shown ≥ ``min_shown`` and hidden ≥ ``min_hidden``
  times with a shown mean reward below its hidden mean. The counters measure the model's
  accuracy, not the block's effect (a branch answering 55 % right never reaches a margin of
  harmful uses); shown against hidden on the same branch's inputs measures the effect.
* **Zone evidence** (``retrieval.zone_gate``): for each (source branch, reading branch) pair,
  the answered steps of the reader whose prompt held the source's examples or rules. Another
  branch's memories are admitted for ``zone_trials`` such steps, then only while their shown
  mean reward is at least the reader's own mean reward.

``mistakes_need_examples`` is a structural guard beside the ledger: a branch's anti-patterns
are shown only once the branch holds a verified example (NumGLUE-ds: a mistakes
block shown with no verified example was copied as the answer in 24 of 25 prompts).
"""

from __future__ import annotations

from rizz.core import events as ev
from rizz.core.inputs import StepInput, Verdict
from rizz.core.policy import Policy
from rizz.core.records import AdaptiveState, Branch, Evidence

__all__ = ["admitted", "block_shown", "decide_evidence", "exploring", "moved", "source_branches", "withheld"]

_NONE = Evidence()


def withheld(e: Evidence, policy: Policy) -> bool:
    """True when the evidence says the block has not helped its branch (see module doc): the
    gate's greedy choice, before exploration (:func:`exploring`)."""
    p = policy.evidence
    if p.explore_every:  # compare the means, once both arms have evidence
        return e.shown >= p.min_shown and e.hidden >= p.min_hidden and e.shown_mean < e.hidden_mean
    if e.shown < p.min_shown or e.harmful - e.helpful < p.margin:
        return False
    return e.hidden == 0 or e.shown_mean <= e.hidden_mean


def exploring(branch: Branch, policy: Policy) -> bool:
    """Whether the branch's next answered step is an exploration step (``evidence.explore_every``
    = k > 0: its k-th, 2k-th, … answered step), on which every gated block does the opposite of
    :func:`withheld`'s choice. A function of the state alone, so a replay explores on the same steps."""
    k = policy.evidence.explore_every
    return k > 0 and branch.stats.answered % k == k - 1


def block_shown(branch: Branch | None, block: str, policy: Policy, *, explore: bool = True) -> bool:
    """Whether ``block`` may appear in a prompt routed to ``branch`` (True when the gate is off).
    ``explore=False``: the gate's greedy choice, without this step's exploration."""
    p = policy.evidence
    if not p.enabled or branch is None:
        return True
    if block == "mistakes" and p.mistakes_need_examples and not len(branch.episodes):
        return False
    if block not in p.blocks:
        return True
    greedy = not withheld(branch.stats.block_evidence.get(block, _NONE), policy)
    return greedy != (explore and exploring(branch, policy))


def admitted(state: AdaptiveState, policy: Policy, source: str, reader: str) -> bool:
    """Whether ``source``'s examples and rules may be read by ``reader`` (True when the gate is off)."""
    p = policy.retrieval
    if not p.zone_gate or source == reader:
        return True
    e = state.zone_evidence.get((source, reader))
    if e is None or e.shown < p.zone_trials:
        return True
    b = state.branches.get(reader)
    return e.shown_mean >= (b.stats.mean_reward if b is not None else 0.0)


def moved(e: Evidence, shown: bool, reward: float, helpful: int, harmful: int) -> Evidence:
    """``e`` after one answered step (the arithmetic :func:`rizz.core.apply.apply` folds)."""
    if shown:
        return Evidence(e.shown + 1, e.shown_reward + reward, e.hidden, e.hidden_reward, e.helpful + helpful, e.harmful + harmful)
    return Evidence(e.shown, e.shown_reward, e.hidden + 1, e.hidden_reward + reward, e.helpful, e.harmful)


def source_branches(state: AdaptiveState, inp: StepInput, reader: str) -> list[str]:
    """Branches other than ``reader`` whose examples or rules were in the step's prompt, in id order."""
    out: set[str] = set()
    keys = set(inp.prompt_episode_keys)
    if keys:
        for b in state.branches.values():
            if b.id != reader and not keys.isdisjoint(b.episodes.keys):
                out.add(b.id)
    if inp.prompt_rule_ids:
        ids = set(inp.prompt_rule_ids)
        for b in state.branches.values():
            if b.id != reader and any(r.id in ids for r in b.rules):
                out.add(b.id)
    return sorted(out, key=lambda i: (len(i), i))


def decide_evidence(state: AdaptiveState, policy: Policy, inp: StepInput, verdict: Verdict, reader: str) -> list[object]:
    """Block- and zone-evidence events for an answered step routed to ``reader``."""
    rp = policy.rules
    helpful = int(verdict.reward >= rp.helpful_reward)
    harmful = int(verdict.parsed and verdict.reward <= rp.harmful_reward and not helpful)
    out: list[object] = []
    if policy.evidence.enabled:
        shown = set(inp.prompt_blocks)
        for block in policy.evidence.blocks:
            s = block in shown
            out.append(ev.BlockEvidenceMoved(reader, block, s, verdict.reward, helpful if s else 0, harmful if s else 0))
    if policy.retrieval.zone_gate:
        for src in source_branches(state, inp, reader):
            out.append(ev.ZoneEvidenceMoved(src, reader, verdict.reward, helpful, harmful))
    return out
