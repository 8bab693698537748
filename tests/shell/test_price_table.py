"""The Anthropic price table (issue #12 §3): documented ids, snapshot ids, unknown ids.

Figures: Anthropic's pricing and model pages as read 2026-12-01 (sources in the docstring of
``rizz/adapters/models/anthropic_backend.py``). No network: the backend gets a fake client.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rizz.adapters.models.anthropic_backend import (
    CONTEXT_WINDOWS,
    DEFAULT_MODEL_ID,
    PRICES_USD_PER_MTOK,
    AnthropicModel,
    price_usd,
)
from rizz.adapters.models.base import Message

# (input, output) USD per million tokens, as documented.
DOCUMENTED = {
    "claude-fable-5-2": (8, 40),
    "claude-fable-5-1": (10, 50),
    "claude-fable-5": (10, 50),
    "claude-mythos-5-1": (10, 50),
    "claude-mythos-5": (10, 50),
    "claude-opus-5-5": (4, 20),
    "claude-opus-5": (5, 25),
    "claude-opus-4-8": (5, 25),
    "claude-opus-4-7": (5, 25),
    "claude-opus-4-6": (5, 25),
    "claude-opus-4-5": (5, 25),
    "claude-sonnet-5-5": (2, 10),
    "claude-sonnet-5": (2, 10),
    "claude-sonnet-4-6": (3, 15),
    "claude-haiku-4-5": (1, 5),
}


def test_the_table_holds_exactly_the_documented_rows():
    assert set(PRICES_USD_PER_MTOK) == set(DOCUMENTED)


@pytest.mark.parametrize(("model_id", "per_mtok"), sorted(DOCUMENTED.items()))
def test_each_id_prices_as_documented(model_id, per_mtok):
    assert price_usd(model_id, 1_000_000, 0) == pytest.approx(per_mtok[0])
    assert price_usd(model_id, 0, 1_000_000) == pytest.approx(per_mtok[1])
    assert price_usd(model_id, 1234, 567) == pytest.approx((1234 * per_mtok[0] + 567 * per_mtok[1]) / 1e6)


@pytest.mark.parametrize(("model_id", "per_mtok"), [
    ("claude-haiku-4-5-20251001", (1, 5)),   # the documented snapshot ids
    ("claude-opus-4-5-20251101", (5, 25)),
    ("claude-opus-5-5-20261201", (4, 20)),   # the longest row wins: not Opus 5's $5/$25
    ("claude-sonnet-5-5-latest", (2, 10)),
    ("claude-fable-5-2-20261109", (8, 40)),
])
def test_a_dated_snapshot_id_prefix_matches(model_id, per_mtok):
    assert price_usd(model_id, 1_000_000, 1_000_000) == pytest.approx(sum(per_mtok))


@pytest.mark.parametrize("model_id", [
    "claude-haiku-5-5",             # priced by prompt length ("From $0.10"): no flat row
    "claude-haiku-5-5-20261007",
    "claude-mythos-5-2",            # no documented price
    "claude-sonnet-4-5",            # retired 2026-11-30
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-1-20250805",     # retired
    "claude-3-5-haiku-latest",      # retired
    "claude-3-haiku-20240307",
    "claude-opus-5-1",              # no such model
    "claude-opus-5-5x",
    "claude-opus-5-5-2026",         # not a snapshot date
    "gpt-4o",
    "",
])
def test_an_unknown_id_costs_none(model_id):
    assert price_usd(model_id, 1000, 1000) is None


def _fake_client(n_in: int, n_out: int) -> SimpleNamespace:
    """A stand-in for ``anthropic.Anthropic``: ``messages.create`` returns one text reply."""
    def create(**kwargs):
        return SimpleNamespace(
            content=[SimpleNamespace(type="text", text="Paris")], stop_reason="end_turn",
            usage=SimpleNamespace(input_tokens=n_in, output_tokens=n_out))
    return SimpleNamespace(messages=SimpleNamespace(create=create))


@pytest.mark.parametrize(("model_id", "expected"), [
    ("claude-sonnet-5-5", (120 * 2 + 30 * 10) / 1e6),
    ("claude-opus-5-5-20261201", (120 * 4 + 30 * 20) / 1e6),
    ("claude-haiku-5-5", None),
])
def test_a_call_records_the_table_cost(model_id, expected):
    m = AnthropicModel(model_id, client=_fake_client(120, 30), token_counting="estimate")
    g = m.generate([Message("user", "Capital of France?")], max_tokens=8)
    assert (g.prompt_tokens, g.completion_tokens, g.usage_estimated) == (120, 30, False)
    assert g.cost_usd == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(("model_id", "window"), [
    ("claude-opus-5-5", 1_000_000), ("claude-sonnet-4-6", 1_000_000), ("claude-haiku-5-5", 1_000_000),
    ("claude-haiku-4-5", 200_000), ("claude-haiku-4-5-20251001", 200_000),
    ("claude-opus-4-5-20251101", 200_000), ("claude-opus-5-5-20261201", 1_000_000),
    ("claude-opus-4-7", 200_000), ("claude-unknown", 200_000),  # not read: the 200K floor
])
def test_context_window_per_model(model_id, window):
    assert AnthropicModel(model_id, client=_fake_client(1, 1)).context_window == window


def test_default_model_is_priced_and_sized():
    assert DEFAULT_MODEL_ID == "claude-haiku-4-5"
    assert price_usd(DEFAULT_MODEL_ID, 1_000_000, 1_000_000) == pytest.approx(6.0)
    assert CONTEXT_WINDOWS[DEFAULT_MODEL_ID] == 200_000
