"""Embedded GGUF backend (real SmolLM2-135M), spec parsing, records, response cache."""

from __future__ import annotations

import attrs
import pytest

from rizz.adapters.models import (
    SPEC_FORMS,
    CachedModel,
    ContextWindowExceeded,
    Generation,
    Message,
    ModelBackend,
    ModelUnavailableError,
    ResponseCache,
    cache_key,
    estimate_tokens,
    load_model,
    render_raw,
)
from rizz.adapters.models.embedded import EmbeddedModel, default_gguf_path

NAME = "embedded:SmolLM2-135M-Instruct.Q4_1"
Q_A = [Message("user", "What is the capital of France? Answer in one word.")]
Q_B = [Message("user", "Name a primary colour.")]


# ---- records and spec parsing (no model) -------------------------------------------------

def test_records_validate():
    with pytest.raises(ValueError):
        Message("robot", "x")
    with pytest.raises(ValueError):
        Generation("t", -1, 0, 0.0, None, "m", "stop")
    gen = Generation("t", 1, 2, 0.5, None, "m", "stop")
    assert gen.cached is False
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        gen.text = "u"  # type: ignore[misc]


@pytest.mark.parametrize("spec", ["", "llama", "embedded:x", "gguf:", "openai:", "openai:ftp://x",
                                  "ollama:foo"])
def test_bad_spec_names_the_accepted_forms(spec):
    with pytest.raises(ValueError) as info:
        load_model(spec)
    for form in SPEC_FORMS:
        assert form in str(info.value)


def test_every_model_option_help_lists_every_spec_form_and_option():
    import typer.main

    from rizz.apps import cli

    root = typer.main.get_command(cli.app)
    helps = {}
    for name, cmd in root.commands.items():
        for p in cmd.params:
            if "--model" in p.opts:
                helps[name] = p.help.replace("\\[", "[")
    assert {"run", "bench", "demo", "sweep", "serve"} <= set(helps)
    for name, text in helps.items():
        for form in ("embedded[:NAME]", "gguf:PATH", "anthropic[:MODEL_ID]", "openai:BASE_URL[#MODEL]", "oracle", "?reasoning=N",
                     "?kv_reuse=0"):
            assert form in text, (name, form)
    assert set(SPEC_FORMS) == {"embedded[:NAME]", "gguf:PATH", "anthropic[:MODEL_ID]", "openai:BASE_URL[#MODEL]", "oracle"}


def test_bare_anthropic_is_the_default_model_id(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert load_model("anthropic").name == "anthropic:claude-haiku-4-5"


def test_render_raw_and_estimate():
    assert render_raw([Message("system", "S"), Message("user", "U")]) == "S\n\nU"
    assert render_raw([Message("user", "only")]) == "only"
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcdefg") == 2  # 7 chars / 3.5
    assert estimate_tokens("\u4f60\u597d") == 2  # one per CJK character


def test_missing_gguf_file_is_a_clear_error(tmp_path):
    with pytest.raises(ModelUnavailableError, match="GGUF file not found"):
        load_model(f"gguf:{tmp_path / 'absent.gguf'}")


# ---- the real embedded model ---------------------------------------------------------------

@pytest.mark.model
def test_shipped_model_is_found_and_loaded(embedded_model):
    path = default_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert embedded_model.name == NAME
    assert embedded_model.context_window == 8192
    assert isinstance(embedded_model, ModelBackend)


@pytest.mark.model
def test_count_tokens_uses_the_model_tokenizer(embedded_model):
    n = embedded_model.count_tokens("Hello world")
    assert n == len(embedded_model._llm.tokenize(b"Hello world", add_bos=False))
    assert 1 <= n <= 4
    assert embedded_model.count_tokens("") == 0
    assert embedded_model.count_tokens("Hello world " * 10) > 10


@pytest.mark.model
def test_greedy_answers_are_repeatable_even_interleaved(embedded_model):
    kw = dict(max_tokens=12)
    a = [embedded_model.generate(Q_A, **kw).text for _ in range(3)]
    assert a[0] and a == [a[0]] * 3
    mixed = [embedded_model.generate(q, **kw).text for q in (Q_B, Q_A, Q_B, Q_A)]
    assert mixed[1] == mixed[3] == a[0]
    assert mixed[0] == mixed[2] != a[0]


@pytest.mark.model
def test_chat_generation_record(embedded_model):
    gen = embedded_model.generate(Q_A, max_tokens=12)
    assert "paris" in gen.text.lower()
    assert gen.model == NAME and gen.cost_usd is None and gen.cached is False
    assert 10 < gen.prompt_tokens < 80 and 1 <= gen.completion_tokens <= 12
    assert gen.finish_reason in ("stop", "length") and gen.latency_s > 0


@pytest.mark.model
def test_raw_rendering_has_no_template_and_honours_stop_and_length(embedded_model):
    prompt = "1, 2, 3, 4, 5,"
    gen = embedded_model.generate([Message("user", prompt)], max_tokens=6, rendering="raw")
    assert gen.prompt_tokens == embedded_model.count_tokens(prompt)  # no template tokens
    assert gen.completion_tokens == 6 and gen.finish_reason == "length"
    assert gen.text.strip().startswith("6")
    cut = embedded_model.generate([Message("user", prompt)], max_tokens=6, stop=[","],
                                  rendering="raw")
    assert "," not in cut.text and cut.finish_reason == "stop"
    assert cut.text.strip() == "6"


@pytest.mark.model
def test_bad_arguments_and_context_overflow(embedded_model):
    with pytest.raises(ValueError):
        embedded_model.generate([], max_tokens=4)
    with pytest.raises(ValueError):
        embedded_model.generate(Q_A, max_tokens=0)
    with pytest.raises(ValueError):
        embedded_model.generate(Q_A, max_tokens=4, rendering="jinja")
    small = EmbeddedModel(shipped="smollm2-135m-instruct", n_ctx=256, n_threads=1)  # llama.cpp's smallest context (it pads n_ctx to 256)
    assert small.context_window == 256
    with pytest.raises(ContextWindowExceeded):
        small.generate([Message("user", "word " * 400)], max_tokens=4, rendering="raw")


@pytest.mark.model
def test_every_call_records_the_prompt_tokens_llama_cpp_decoded(embedded_model):
    """With prefix reuse (the default) a call decodes what follows the whole batches it shares
    with an earlier prompt; reset before every call (kv_reuse=False), the whole prompt."""
    from rizz.adapters.models.embedded import PROMPT_CHUNK, default_gguf_path

    assert embedded_model.kv_reuse
    g = embedded_model.generate(Q_A, max_tokens=6)
    assert 1 <= g.evaluated_prompt_tokens <= g.prompt_tokens and (g.prompt_tokens - g.evaluated_prompt_tokens) % PROMPT_CHUNK == 0
    again = embedded_model.generate(Q_A, max_tokens=6)  # all but the last (partial) batch reused
    assert again.prompt_tokens > PROMPT_CHUNK and again.evaluated_prompt_tokens == (again.prompt_tokens - 1) % PROMPT_CHUNK + 1
    reset = EmbeddedModel(default_gguf_path(), n_threads=1, kv_reuse=False)
    for q in (Q_A, Q_A, Q_B):
        g = reset.generate(q, max_tokens=6)
        assert g.evaluated_prompt_tokens == g.prompt_tokens > 5


@pytest.mark.model
def test_kv_reuse_decodes_only_what_follows_the_shared_prefix():
    from rizz.adapters.models.embedded import PROMPT_CHUNK, default_gguf_path

    m = EmbeddedModel(default_gguf_path(), n_threads=1)  # kv_reuse is the default
    reset = EmbeddedModel(default_gguf_path(), n_threads=1, kv_reuse=False)
    assert m.kv_reuse and not reset.kv_reuse and m.name == reset.name  # same answers, one response cache
    assert load_model(f"gguf:{default_gguf_path()}?kv_reuse=0").kv_reuse is False
    stem = "Notes from earlier verified work follow. " * 24
    first = m.generate([Message("user", stem + "Question: what is 2 + 3?")], max_tokens=4, rendering="raw")
    second = m.generate([Message("user", stem + "Question: what is 7 + 1?")], max_tokens=4, rendering="raw")
    assert first.evaluated_prompt_tokens == first.prompt_tokens  # nothing cached yet
    assert 0 < second.evaluated_prompt_tokens < second.prompt_tokens // 3, (second.evaluated_prompt_tokens, second.prompt_tokens)
    # the reused prefix is a whole number of batches: the rest is decoded as a fresh decode would
    assert (second.prompt_tokens - second.evaluated_prompt_tokens) % PROMPT_CHUNK == 0
    # another prompt between them: the prompt cache still holds the first one's state
    other = m.generate([Message("user", "Translate to French: " * 20 + "good morning")], max_tokens=4, rendering="raw")
    third = m.generate([Message("user", stem + "Question: what is 9 + 9?")], max_tokens=4, rendering="raw")
    assert other.evaluated_prompt_tokens > other.prompt_tokens // 2
    assert 0 < third.evaluated_prompt_tokens < third.prompt_tokens // 3, (third.evaluated_prompt_tokens, third.prompt_tokens)
    # the cached states keep no copy of the logits (lean_ram_cache), and a restored state answers
    # as the live one did: the same prompt again gives the same text
    states = list(m._llm.cache.cache_state.values())
    assert len(states) >= 3 and all(s.scores.strides == (0, 0) and not s.scores.any() for s in states)
    again = m.generate([Message("user", stem + "Question: what is 2 + 3?")], max_tokens=4, rendering="raw")
    assert again.text == first.text
    for g, text in ((first, "2 + 3"), (second, "7 + 1"), (other, None), (third, "9 + 9")):
        prompt = "Translate to French: " * 20 + "good morning" if text is None else stem + f"Question: what is {text}?"
        fresh = reset.generate([Message("user", prompt)], max_tokens=4, rendering="raw")
        assert (g.text, fresh.evaluated_prompt_tokens) == (fresh.text, fresh.prompt_tokens)


@pytest.mark.model
def test_aligned_prefix_reuse_gives_a_fresh_decodes_logits_bit_for_bit():
    """Prefix reuse cut to whole batches equals a fresh decode exactly; llama-cpp-python's own
    (uncut) reuse does not, which is why the cut exists."""
    import llama_cpp
    import numpy as np

    from rizz.adapters.models.embedded import PROMPT_CHUNK, AlignedPrefixGenerate
    from rizz.adapters.models.shipped import assemble, shipped_model

    gguf = assemble(shipped_model("qwen2.5-coder-0.5b-instruct"))  # SmolLM2's Q4_1 decodes alike either way

    def make():
        return llama_cpp.Llama(model_path=str(gguf), n_ctx=1024, n_threads=2, n_batch=PROMPT_CHUNK,
                               n_ubatch=PROMPT_CHUNK, seed=0, verbose=False)

    def next_token_logits(llm, text):
        tokens = llm.tokenize(text.encode(), add_bos=True)
        gen = llm.generate(tokens, temp=0.0)
        next(gen)  # the prompt is decoded; its last token's logits are the sampler's input
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()
        gen.close()
        return logits

    stem = "A note kept from earlier verified work on the same task follows here. " * 6
    prompts = [stem + tail for tail in ("Question: 2 + 3 =", "Question: 17 + 25 =", "Question: what is 9 squared?",
                                        "Q: name a prime number above 50.")]
    fresh = make()
    expected = []
    for p in prompts:
        fresh.reset()
        fresh._ctx.kv_cache_clear()
        expected.append(next_token_logits(fresh, p))
    cut, uncut = make(), make()
    cut.generate = AlignedPrefixGenerate(cut, PROMPT_CHUNK)
    got_cut = [next_token_logits(cut, p) for p in prompts]
    got_uncut = [next_token_logits(uncut, p) for p in prompts]
    assert all(np.array_equal(a, b) for a, b in zip(got_cut, expected))
    assert not all(np.array_equal(a, b) for a, b in zip(got_uncut[1:], expected[1:]))


def test_lean_ram_cache_drops_the_logits_copy_and_keeps_the_rest():
    import numpy as np

    from rizz.adapters.models.embedded import lean_ram_cache

    class Ram:  # llama-cpp-python's LlamaRAMCache, reduced to what the subclass relies on
        def __init__(self, capacity_bytes):
            self.capacity_bytes, self.cache_state = capacity_bytes, {}

        def __setitem__(self, key, value):
            self.cache_state[tuple(key)] = value

    state = type("State", (), {})()
    state.scores = np.ones((512, 1000), dtype=np.single)
    state.input_ids, state.llama_state, state.llama_state_size = np.arange(5), b"kv", 2
    cache = lean_ram_cache(1 << 20, type("llama_cpp", (), {"LlamaRAMCache": Ram}))
    assert cache.capacity_bytes == 1 << 20
    cache[[1, 2, 3]] = state
    kept = cache.cache_state[(1, 2, 3)]
    assert kept.scores.shape == (512, 1000) and kept.scores.dtype == np.single and kept.scores.strides == (0, 0)
    assert not kept.scores.copy().any() and kept.llama_state == b"kv" and list(kept.input_ids) == [0, 1, 2, 3, 4]


def test_kv_reuse_is_refused_for_remote_backends():
    with pytest.raises(ValueError, match="kv_reuse= applies to the in-process llama.cpp backends"):
        load_model("anthropic:claude-haiku-4-5?kv_reuse=1")
    with pytest.raises(ValueError, match="needs an int in 0..1"):
        load_model("embedded?kv_reuse=2")


@pytest.mark.model
def test_the_evaluated_prompt_count_agrees_with_llama_cpps_own_counter(embedded_model):
    import llama_cpp

    ctx = embedded_model._llm._ctx.ctx
    for text in ("Name three rivers in France.", "Name three rivers in Spain.", "Name three rivers in France."):
        llama_cpp.llama_perf_context_reset(ctx)
        g = embedded_model.generate([Message("user", text)], max_tokens=3)
        decoded_as_prompt = llama_cpp.llama_perf_context(ctx).n_p_eval  # llama.cpp files a 1-token decode as generation
        assert g.evaluated_prompt_tokens == (decoded_as_prompt if g.evaluated_prompt_tokens > 1 else 1)


@pytest.mark.model
def test_gguf_spec_runs_any_file(embedded_model):
    # two threads here (one in the fixture): the greedy text must not depend on thread count
    model = load_model(f"gguf:{default_gguf_path()}", n_ctx=512, n_threads=2)
    assert model.name == "gguf:SmolLM2-135M-Instruct.Q4_1" and model.context_window == 512
    assert model.generate(Q_A, max_tokens=12).text == embedded_model.generate(Q_A,
                                                                           max_tokens=12).text


# ---- response cache -------------------------------------------------------------------------

def test_cache_key_covers_every_request_field():
    base = ("m", [Message("user", "x")], "chat", 8, ["\n"], 0.0)
    k = cache_key(*base)
    assert len(k) == 64 and k == cache_key(*base)
    variants = [
        ("m2", *base[1:]),
        (base[0], [Message("system", "x")], *base[2:]),
        (*base[:2], "raw", *base[3:]),
        (*base[:3], 9, *base[4:]),
        (*base[:4], [], base[5]),
        (*base[:5], 0.5),
    ]
    assert len({cache_key(*v) for v in variants} | {k}) == 7


def test_cached_model_serves_hits_without_a_call_and_persists(tmp_path, fake_model):
    backend = fake_model(["first answer", "second answer"])
    path = tmp_path / "sub" / "cache.sqlite"
    model = CachedModel(backend, ResponseCache(path))
    assert model.name == backend.name and model.context_window == backend.context_window
    g1 = model.generate(Q_A, max_tokens=8)
    g2 = model.generate(Q_A, max_tokens=8)
    assert len(backend.calls) == 1
    assert (g1.cached, g2.cached) == (False, True)
    assert (g2.text, g2.prompt_tokens, g2.completion_tokens, g2.model) == (
        g1.text, g1.prompt_tokens, g1.completion_tokens, g1.model)
    assert g2.cost_usd is None
    g3 = model.generate(Q_A, max_tokens=9)  # different request -> a call
    assert g3.text == "second answer" and len(backend.calls) == 2
    model.cache.close()
    reopened = CachedModel(fake_model(["never used"]), ResponseCache(path))
    assert len(reopened.cache) == 2
    assert reopened.generate(Q_A, max_tokens=8).text == "first answer"
    assert reopened.backend.calls == []
    assert (reopened.cache.hits, reopened.cache.misses) == (1, 0)


def test_cache_hit_on_a_priced_backend_costs_zero(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    gen = Generation("x", 3, 4, 1.5, 0.002, "anthropic:claude-haiku-4-5", "stop")
    cache.put("k", gen)
    assert cache.get("k") == gen
    assert cache.get("missing") is None


@pytest.mark.model
def test_load_model_with_cache_wraps_the_embedded_model(tmp_path):
    model = load_model("embedded:smollm2-135m-instruct", cache=tmp_path / "c.sqlite", n_ctx=512, n_threads=1)
    assert isinstance(model, CachedModel) and model.name == NAME
    first = model.generate(Q_A, max_tokens=8)
    second = model.generate(Q_A, max_tokens=8)
    assert second.cached and second.text == first.text and second.latency_s < first.latency_s
