"""What the core says about a malformed input: the field, the value and what is allowed."""

import attrs
import numpy as np
import pytest

from rizz.core import Label, Policy, StepInput, Verdict, normalise_label, rizz


def _unit(d: int, i: int = 0) -> np.ndarray:
    v = np.zeros(d, dtype=np.float32)
    v[i] = 1.0
    return v


def _one_branch(policy: Policy):
    r = rizz(policy)
    x = StepInput(0, "q0", "2+2?", _unit(384), shape="number", label=Label("solve-math", "arithmetic"), answer="4")
    return r, r.step(r.init(), x, Verdict(1.0))


def test_an_embedding_array_must_be_unit_length_and_is_stored_as_float32():
    with pytest.raises(ValueError, match=r"^expected an L2-normalised vector \(norm 1\), got norm 2 over 4 dimensions: divide it by its norm"):
        StepInput(0, "q0", "x", [2.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="got norm 0 over 4 dimensions"):
        StepInput(0, "q0", "x", np.zeros(4))
    as_f64 = StepInput(0, "q0", "x", _unit(4).astype(np.float64))  # converted, as a list is
    assert as_f64.embedding == StepInput(0, "q0", "x", [1.0, 0.0, 0.0, 0.0]).embedding == _unit(4).tobytes()
    assert StepInput(0, "q0", "x", b"\x00" * 16).embedding == b"\x00" * 16  # bytes are taken as given (a replay)


@pytest.mark.parametrize("mode", ["adaptive", "single"])
def test_an_embedding_of_another_dimension_names_both_dimensions(mode):
    policy = Policy() if mode == "adaptive" else attrs.evolve(Policy(), routing=attrs.evolve(Policy().routing, mode="single"))
    r, s = _one_branch(policy)
    want = r"^StepInput\.embedding: 10 dimensions \(40 bytes of float32\), but this state's vectors have 384: every embedding of one state must come from the same embedder$"
    for x in (StepInput(1, "q1", "y", _unit(10), shape="number", answer="4"),
              StepInput(1, "q1", "y", _unit(10), context_only=True)):
        with pytest.raises(ValueError, match=want):
            r.step(s, x, None if x.context_only else Verdict(1.0))
        with pytest.raises(ValueError, match=want):
            r.plan(s, x)
    f64 = StepInput(1, "q1", "y", _unit(384).astype(np.float64).tobytes(), shape="number", answer="4")
    with pytest.raises(ValueError, match=r"768 dimensions .* have 384: .*\(float64 bytes\? pass the float32 array"):
        r.step(s, f64, Verdict(1.0))


def test_a_shape_outside_shapes_is_refused():
    with pytest.raises(ValueError, match=r"^StepInput\.shape: 'integer' is not an output shape; allowed: letter, number, label, span, text, code, json or None$"):
        StepInput(0, "q0", "x", _unit(4), shape="integer")
    assert StepInput(0, "q0", "x", _unit(4), shape="number").shape == "number"


def test_a_label_must_be_normalised():
    with pytest.raises(ValueError, match=r"^Label\.function: 'Solve Math' is not a label part: expected lowercase letters and digits in words "
                                         r"joined by single hyphens, e\.g\. 'solve-math' \(rizz\.core\.normalise_label makes one from any text\)$"):
        Label("Solve Math", "Arithmetic")
    for bad in ("", "-math", "solve--math", "news_articles", "café"):
        with pytest.raises(ValueError, match=r"^Label\.application: "):
            Label("solve-math", bad)
    assert normalise_label("Solve Math", "Arithmetic") == Label("solve-math", "arithmetic")


def test_an_unlabelled_input_with_no_compatible_branch_spawns_unknown_as_documented():
    # documented, not refused: label=None is what the engine passes whenever needs_label is False
    from rizz.core import needs_label

    policy = attrs.evolve(Policy(), routing=attrs.evolve(Policy().routing, judge="local"))
    r, s = _one_branch(policy)
    x = StepInput(1, "q1", "Name the capital.", _unit(384, 1), shape="span", answer="Paris")
    assert needs_label(s, policy, x.embedding, x.shape)
    s2 = r.step(s, x, Verdict(1.0))
    assert {b.id: str(b.label) for b in s2.branches.values()} == {"b0": "solve-math/arithmetic", "b1": "unknown/unknown"}
    assert "fallback_label" in (StepInput.__doc__ or "")
