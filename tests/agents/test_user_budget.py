"""The simulated customer's prompt fits its model's window (issue #13: τ-bench's user model)."""

from __future__ import annotations

from rizz.engine.model_agent import USER_MARGIN, LLMUser
from tests.agents.conftest import StubModel


def _dialogue(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 else "assistant", "text": f"turn {i} " + "word " * 20} for i in range(n)]


def test_long_dialogue_drops_oldest_turns_and_keeps_brief_and_newest() -> None:
    model = StubModel(lambda prompt: "fine thanks")
    model.context_window = 400
    user = LLMUser(model, "You want to return order #W123 (brief kept)", max_tokens=64)
    assert user.reply(_dialogue(40)) == "fine thanks"
    prompt = model.prompts[-1]
    assert model.count_tokens(prompt) <= 400 - 64 - USER_MARGIN
    assert "brief kept" in prompt and "turn 39 " in prompt and "turn 0 " not in prompt
    assert "(earlier turns omitted)" in prompt


def test_short_dialogue_is_shown_whole() -> None:
    model = StubModel(lambda prompt: "")
    user = LLMUser(model, "brief", max_tokens=64)
    assert user.reply(_dialogue(3)) == "###STOP###"  # an empty reply ends the episode
    assert all(f"turn {i} " in model.prompts[-1] for i in range(3)) and "omitted" not in model.prompts[-1]


def test_the_customer_first_answers_the_agents_greeting_as_in_tau_bench() -> None:
    """τ-bench's user simulation opens with the agent's "Hi! How can I help you today?"; the
    customer's first prompt shows it as the conversation, and later prompts keep it first."""
    from rizz.engine.model_agent import GREETING

    model = StubModel(lambda prompt: "I want to exchange a keyboard.")
    user = LLMUser(model, "brief", max_tokens=64)
    assert user.reply([]) == "I want to exchange a keyboard."
    first = model.prompts[-1]
    assert first.rstrip().endswith(f"Agent: {GREETING}\nCustomer:") and "(none yet)" not in first
    user.reply([{"role": "user", "text": "I want to exchange a keyboard."}, {"role": "assistant", "text": "Your order id?"}])
    later = model.prompts[-1]
    assert later.index(f"Agent: {GREETING}") < later.index("Customer: I want") < later.index("Agent: Your order id?")
