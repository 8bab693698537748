"""rizz.formats.schema_check finds what jsonschema's Draft 2020-12 validator finds on the policy
schema (issue #26 §4: policy loading without jsonschema). jsonschema is a test dependency only."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rizz.core import Policy, policy_schema
from rizz.formats import policy_file
from rizz.formats.policy_file import policy_data
from rizz.formats.schema_check import SchemaError, schema_errors

SCHEMA = policy_schema()
BASE = policy_data(Policy())
LISTS = sorted((sec, name) for sec, s in SCHEMA["properties"].items() for name, f in s.get("properties", {}).items()
               if f.get("type") == "array")

scalar = (st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False)
          | st.sampled_from([0.0, 1.0, 2.0, -0.5, 0.5, 1.5]) | st.text(max_size=4))
key = st.text(max_size=5) | st.sampled_from(["a-b", "_x", "x'y", "rouge_l", "exact_match", "Zz9"])
json_value = st.recursive(scalar, lambda c: st.lists(c, max_size=4) | st.dictionaries(key, c, max_size=3), max_leaves=6)


def _near(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values close to the field's spec: boundary numbers, enum members, duplicate lists."""
    items = spec.get("items", {}).get("enum", ["x"])
    enum = spec.get("enum", []) + ["nope", ""]
    lo, hi = spec.get("minimum", 0), spec.get("maximum", 1)
    numbers = st.sampled_from([lo, hi, lo - 1, hi + 1, hi + 0.5, (lo + hi) / 2, True, float("inf"), float("-inf"), float("nan")])
    if spec.get("type") == "array":
        return st.lists(st.sampled_from(items + [1, 1.0, True, "1", None, [items[0]], [True], [1]]), max_size=5)
    if spec.get("type") == "object":
        return st.dictionaries(key, numbers | st.sampled_from(["a", None, [1]]), max_size=3)
    return st.sampled_from(enum) if "enum" in spec else numbers


@st.composite
def policy_like(draw: st.DrawFn) -> Any:
    """The default policy's data, with some fields, sections and keys changed or added."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_value)
    doc: dict[Any, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for _ in range(draw(st.integers(0, 6))):
        how = draw(st.sampled_from(["near", "near", "any", "list", "section", "extra"]))
        if how == "list":  # the list fields (uniqueItems, items)
            sec, name = draw(st.sampled_from(LISTS))
        else:
            sec = draw(st.sampled_from(sorted(SCHEMA["properties"])))
            name = draw(st.sampled_from(sorted(SCHEMA["properties"][sec].get("properties", {"": 0}))))
        if how == "section" or not isinstance(doc.get(sec), dict) or not name:
            doc[sec] = draw(json_value)
        elif how == "extra":
            doc[sec][draw(key)] = draw(json_value)
        else:
            doc[sec][name] = draw(json_value if how == "any" else _near(SCHEMA["properties"][sec]["properties"][name]))
    if draw(st.booleans()):
        doc[draw(key)] = draw(json_value)
    return doc


def _jsonschema_errors(data: Any) -> list[tuple[str, str]]:
    return sorted((e.json_path, str(e.validator)) for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))


def _jsonschema_adapter(data: Any, schema: dict[str, Any]) -> list[SchemaError]:
    """jsonschema's errors as :class:`SchemaError` records, to run policy_file._errors on them."""
    return [SchemaError(tuple(e.absolute_path), str(e.validator), e.schema, e.instance)
            for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


@pytest.mark.slow  # ~3 s on a quiet machine (400 policies, each checked twice)
@settings(max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=policy_like())
def test_same_errors_as_jsonschema(data: Any) -> None:
    assert sorted((e.json_path, e.keyword) for e in schema_errors(data, SCHEMA)) == _jsonschema_errors(data)
    ours = policy_file._errors(data, SCHEMA)  # the messages a user sees, in their order
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policy_file, "schema_errors", _jsonschema_adapter)
        assert policy_file._errors(data, SCHEMA) == ours


def test_the_default_policy_has_no_errors() -> None:
    assert list(schema_errors(BASE, SCHEMA)) == []


@pytest.mark.parametrize("value, keyword", [
    (True, "type"),  # a boolean is no number
    (2, "maximum"),
    (1.0, None),  # 1.0 is an integer (draft 6 on) and within range
    (float("nan"), None),  # NaN passes every range check; non_finite() reports it
])
def test_number_semantics(value: Any, keyword: str | None) -> None:
    errs = list(schema_errors({"routing": {"snap_threshold": value}}, SCHEMA))
    assert [e.keyword for e in errs] == ([keyword] if keyword else [])


def test_json_path_quotes_keys_that_are_not_plain() -> None:
    assert SchemaError(("a", 0, "b-c", "it's"), "type", {}, None).json_path == "$.a[0]['b-c']['it\\'s']"


def test_an_unknown_keyword_is_refused() -> None:
    with pytest.raises(ValueError, match="pattern"):
        list(schema_errors("x", {"type": "string", "pattern": "^x$"}))
