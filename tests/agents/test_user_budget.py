"""The simulated customer (τ-bench's user model): its chat turns, and its prompt within its
model's window (issue #13)."""

from __future__ import annotations

from rizz.engine.model_agent import GREETING, TURN_TOKENS, USER_MARGIN, LLMUser
from tests.agents.conftest import StubModel


def _dialogue(n: int) -> list[dict]:
    """The agent's transcript: the customer first (``user``), then the agent (``assistant``)."""
    return [{"role": "assistant" if i % 2 else "user", "text": f"turn {i} " + "word " * 20} for i in range(n)]


class _Recording(StubModel):
    """A StubModel that also keeps each call's messages."""

    def __init__(self, fn, window: int = 8192) -> None:
        super().__init__(fn, name="stub:user")
        self.context_window = window
        self.calls: list = []

    def reply(self, messages):  # noqa: ANN001, ANN201
        self.calls.append(list(messages))
        return super().reply(messages)


def test_long_dialogue_drops_oldest_exchanges_and_keeps_brief_greeting_and_newest() -> None:
    model = _Recording(lambda prompt: "fine thanks", window=400)
    user = LLMUser(model, "You want to return order #W123 (brief kept)", max_tokens=64)
    assert user.reply(_dialogue(40)) == "fine thanks"
    msgs = model.calls[-1]
    assert sum(model.count_tokens(m.content) + TURN_TOKENS for m in msgs) <= 400 - 64 - USER_MARGIN
    assert msgs[0].role == "system" and "brief kept" in msgs[0].content and "omitted" in msgs[0].content
    assert msgs[1].content == GREETING and msgs[-1].content.startswith("turn 39 ")
    assert not any(m.content.startswith("turn 0 ") for m in msgs)
    roles = [m.role for m in msgs[1:]]
    assert all(a != b for a, b in zip(roles, roles[1:]))  # dropped in exchanges: the roles still alternate


def test_short_dialogue_is_shown_whole_with_the_roles_flipped() -> None:
    model = _Recording(lambda prompt: "")
    user = LLMUser(model, "brief", max_tokens=64)
    assert user.reply(_dialogue(4)) == "###STOP###"  # an empty reply ends the episode
    msgs = model.calls[-1]
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m.content.split(" ")[:2] for m in msgs[2:]] == [["turn", "0"], ["turn", "1"], ["turn", "2"], ["turn", "3"]]
    assert "omitted" not in msgs[0].content


def test_the_customer_first_answers_the_agents_greeting_as_in_tau_bench() -> None:
    """τ-bench's user simulation opens with the agent's "Hi! How can I help you today?" as the
    model's user turn; the customer's own lines are its assistant turns, the agent's tool calls
    and malformed replies are not shown, and two agent lines in a row are one turn."""
    model = _Recording(lambda prompt: "I want to exchange a keyboard.")
    user = LLMUser(model, "brief", max_tokens=64)
    assert user.reply([]) == "I want to exchange a keyboard."
    first = model.calls[-1]
    assert [(m.role, m.content) for m in first[1:]] == [("user", GREETING)]
    assert "###STOP###" in first[0].content and "first message" in first[0].content
    user.reply([{"role": "user", "text": "I want to exchange a keyboard."},
                {"role": "assistant", "text": "", "calls": [["find_user", {}]]},
                {"role": "assistant", "text": "bad", "malformed": True},
                {"role": "assistant", "text": "Found you."}, {"role": "assistant", "text": "Your order id?"}])
    assert [(m.role, m.content) for m in model.calls[-1][1:]] == [
        ("user", GREETING), ("assistant", "I want to exchange a keyboard."), ("user", "Found you.\nYour order id?")]
