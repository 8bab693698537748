"""A backend that sends no temperature (``temperature=None``) is cached under its own key."""
from rizz.adapters.models.base import Message
from rizz.adapters.models.cache import CachedModel, ResponseCache, cache_key


def test_none_temperature_keys_apart_from_zero_and_numbers_key_as_before():
    msgs = [Message("user", "hi")]
    k_none = cache_key("m", msgs, "chat", 8, [], None)
    k_zero = cache_key("m", msgs, "chat", 8, [], 0.0)
    assert k_none != k_zero
    assert k_zero == cache_key("m", msgs, "chat", 8, [], 0)   # int and float key alike, as before


def test_cached_model_reads_a_none_temperature(tmp_path):
    class NoTemp:
        name, context_window, temperature = "anthropic:x", 1000, None

        def count_tokens(self, text):
            return len(text.split())

    m = CachedModel(NoTemp(), ResponseCache(tmp_path / "r.sqlite"))
    assert m.temperature is None
