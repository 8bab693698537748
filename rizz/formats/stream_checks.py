"""Line checks of the stream format (specs/stream-format.md): the field table's names and the
validators :mod:`rizz.formats.streams` runs on every decoded line.

Each check raises :class:`FieldError` naming the field's path (``metadata.shape``,
``tools[0].name``); :mod:`rizz.formats.streams` turns it into ``FILE:LINE: field 'PATH': ...``.
:func:`field_errors` and :func:`repeated_keys` list every error of a line (``rizz streams
check``); :func:`validate` and :func:`check_repeated` raise the first of them (the same one a
check that stopped at the first problem would find), which is all ``rizz run`` needs.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rizz.errors import RizzError
from rizz.formats.timekeys import TIME_EXPECTED, canonical_time
from rizz.formats.wording import did_you_mean

#: Expected output shapes (``metadata.shape``; §3 step 4).
SHAPES: tuple[str, ...] = ("letter", "number", "label", "span", "text", "code", "json")
#: Verifier names (``verifier``; §1).
VERIFIERS: tuple[str, ...] = (
    "exact_match", "label_match", "first_char", "fuzzy_ratio", "rouge_l",
    "sari", "token_f1", "code_exec", "llm_judge",
    "bfcl_ast", "bfcl_multi_turn", "tau_db",
)
#: Verifiers that score a whole tool-using episode (an element with ``tools``; specs/stream-format.md).
EPISODE_VERIFIERS: tuple[str, ...] = ("bfcl_ast", "bfcl_multi_turn", "tau_db")
#: Top-level fields in canonical order (specs/stream-format.md).
FIELDS: tuple[str, ...] = (
    "id", "input", "instruction", "metadata", "evidence", "reference", "verifier", "context_only",
    "tools", "turns", "user", "environment",
)
#: Episode fields (specs/stream-format.md, "Episode elements"); written only when present.
EPISODE_FIELDS: tuple[str, ...] = ("tools", "turns", "user", "environment")
#: Metadata keys the contract names; always present (possibly None) after reading.
METADATA_KEYS: tuple[str, ...] = ("task", "scope", "shape", "time")
#: ``metadata.f1_variant`` values ``token_f1`` accepts (rizz/adapters/verifiers/metrics.py).
F1_VARIANTS: tuple[str, ...] = ("hotpotqa", "set", "stem")

#: The ``metadata`` keys rizz itself reads (specs/stream-format.md); any other key is kept as it
#: is, unless it is a near-miss of one of these (:func:`_check_metadata`).
READ_METADATA_KEYS: tuple[str, ...] = ("task", "scope", "shape", "time", "tenant", "label", "tests", "entry_point", "prompt",
                                       "timeout_s", "source", "f1_variant")
#: How close (difflib ratio) an unknown key must be to one of :data:`READ_METADATA_KEYS` to be refused
#: as its misspelling: ``shap``/``shape`` 0.89, ``tenent``/``tenant`` 0.83; no key of the shipped
#: or built streams (``category``, ``bfcl_id``, ``task_index``, ``session``, ``type`` ...) reaches 0.6.
#: The same letters in another order (``taks``, ``tiem``: ratio 0.75 or less) are refused too.
METADATA_NEAR_MISS = 0.8


def _metadata_near_miss(key: str) -> str | None:
    """The key of :data:`READ_METADATA_KEYS` that ``key`` (not one of them) misspells, else None:
    close by :data:`METADATA_NEAR_MISS`, the same in other case, or the same letters reordered.

    Example:
        >>> [_metadata_near_miss(k) for k in ("shap", "Tenant", "taks", "tiem", "category", "type")]
        ['shape', 'tenant', 'task', 'time', None, None]
    """
    for known in READ_METADATA_KEYS:
        if key.lower() == known or sorted(key.lower()) == sorted(known):
            return known
    close = difflib.get_close_matches(key, READ_METADATA_KEYS, n=1, cutoff=METADATA_NEAR_MISS)
    return close[0] if close else None


class FieldError(RizzError):
    """One field of one record is bad (:mod:`rizz.formats.streams` reports it with the line)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"field '{field}': {message}")
        self.field = field
        self.message = message


class _Errors(list[FieldError]):
    """The field errors of one line, in the order the checks find them."""

    def check(self, check: Callable[..., None], *args: Any, **kwargs: Any) -> bool:
        """Run one check (it raises :class:`FieldError`); keep its error. True when it passed."""
        try:
            check(*args, **kwargs)
        except FieldError as err:
            self.append(err)
            return False
        return True


def describe(value: Any) -> str:
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "...'"
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _expect(field: str, expected: str, value: Any) -> FieldError:
    return FieldError(field, f"expected {expected}, got {describe(value)}")


def _not_one_of(field: str, allowed: Sequence[str], value: Any) -> FieldError:
    """``expected one of a, b, got 'x'; did you mean `a`?`` (the hint only for a misspelt string)."""
    hint = did_you_mean(value, allowed) if isinstance(value, str) else ""
    return FieldError(field, f"expected one of {', '.join(allowed)}, got {describe(value)}{hint}")


def _check_str(field: str, value: Any, *, optional: bool = False, nonempty: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _expect(field, "a string or null" if optional else "a string", value)
    if nonempty and not value.strip():
        raise FieldError(field, "expected a non-empty string, got ''")


def _check_str_or_list(errors: _Errors, field: str, value: Any, *, what: str) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, (list, tuple)):
        if not value:
            errors.append(FieldError(field, f"expected {what}, got an empty list"))
        errors.extend(_expect(f"{field}[{i}]", "a string", item) for i, item in enumerate(value) if not isinstance(item, str))
        return
    errors.append(_expect(field, what, value))


def _is_finite_number(value: Any) -> bool:
    """An int, or a float that is neither NaN nor infinite (bool is not a number here)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def non_finite(value: Any, path: str) -> list[tuple[str, float]]:
    """``(path, number)`` for every NaN/±Infinity float nested in ``value``, in document order.

    Walks mappings (``path.key``) and lists/tuples (``path[i]``); an overflowing JSON literal
    such as ``1e999`` parses to ``inf`` and is caught too. Range checks let NaN through
    (every comparison with it is false), so streams and policy files both refuse these first.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, value)]
    if isinstance(value, Mapping):
        return [bad for key, item in value.items() for bad in non_finite(item, f"{path}.{key}")]
    if isinstance(value, (list, tuple)):
        return [bad for i, item in enumerate(value) for bad in non_finite(item, f"{path}[{i}]")]
    return []


def _check_entry_point(entry: Any) -> None:
    _check_str("metadata.entry_point", entry, nonempty=True)
    if not entry.isidentifier():
        raise _expect("metadata.entry_point", "a Python function name (the tests call check(entry_point))", entry)


def _check_code_exec(errors: _Errors, meta: Mapping[str, Any]) -> None:
    """What ``code_exec`` runs: ``prompt + answer``, ``tests``, then ``check(entry_point)``."""
    errors.check(_check_str, "metadata.tests", meta.get("tests"), nonempty=True)
    errors.check(_check_entry_point, meta.get("entry_point"))
    errors.check(_check_str, "metadata.prompt", meta.get("prompt"), optional=True)
    if "timeout_s" in meta:
        timeout = meta["timeout_s"]
        if not _is_finite_number(timeout) or timeout <= 0:
            errors.append(_expect("metadata.timeout_s", "a positive finite number of seconds", timeout))


def _check_metadata(errors: _Errors, meta: Any, verifier: Any) -> None:
    if not isinstance(meta, Mapping):
        errors.append(_expect("metadata", "an object or null", meta))
        return
    for key in meta:
        if not isinstance(key, str):
            errors.append(_expect("metadata", "string keys", key))
            continue
        meant = _metadata_near_miss(key) if key not in READ_METADATA_KEYS else None
        if meant is not None:
            errors.append(FieldError(f"metadata.{key}", f"not a key rizz reads; did you mean `{meant}`? (refused as a likely typo; "
                                                        "metadata keys of your own are kept, but only under names further from rizz's)"))
    errors.check(_check_str, "metadata.task", meta.get("task"), optional=True)
    errors.check(_check_str, "metadata.scope", meta.get("scope"), optional=True)
    errors.check(_check_str, "metadata.tenant", meta.get("tenant"), optional=True, nonempty=True)
    shape = meta.get("shape")
    if shape is not None and shape not in SHAPES:
        errors.append(_not_one_of("metadata.shape", SHAPES, shape))
    time = meta.get("time")
    if time is not None:
        try:
            canonical_time(time)
        except ValueError:
            errors.append(_expect("metadata.time", TIME_EXPECTED + " or null", time))
    label = meta.get("label")
    if label is not None:
        if not isinstance(label, Mapping) or set(label) - {"function", "application"}:
            errors.append(_expect("metadata.label", "an object {function, application} or null", label))
        else:
            errors.check(_check_str, "metadata.label.function", label.get("function"), nonempty=True)
            errors.check(_check_str, "metadata.label.application", label.get("application"), nonempty=True)
    if verifier == "code_exec":
        _check_code_exec(errors, meta)
    else:
        for key in ("tests", "entry_point"):
            if key in meta:
                errors.check(_check_str, f"metadata.{key}", meta[key], optional=True)
    if verifier == "token_f1" and "f1_variant" in meta and meta["f1_variant"] not in F1_VARIANTS:
        errors.append(_not_one_of("metadata.f1_variant", F1_VARIANTS, meta["f1_variant"]))
    if verifier == "sari":
        errors.check(_check_str, "metadata.source", meta.get("source"), nonempty=True)
    elif "source" in meta:
        errors.check(_check_str, "metadata.source", meta["source"], optional=True)
    errors.extend(_expect(field, "a finite number", number) for field, number in non_finite(meta, "metadata"))


def _check_tools(errors: _Errors, tools: Any) -> None:
    """``tools``: a non-empty list of JSON-schema function descriptions (OpenAI/BFCL shape)."""
    if not isinstance(tools, (list, tuple)) or not tools:
        errors.append(_expect("tools", "a non-empty list of function descriptions", tools))
        return
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            errors.append(_expect(f"tools[{i}]", "an object with 'name' (and 'description', 'parameters')", tool))
            continue
        if errors.check(_check_str, f"tools[{i}].name", tool.get("name"), nonempty=True):
            if tool["name"] in names:
                errors.append(FieldError(f"tools[{i}].name", f"repeated tool name {tool['name']!r}"))
            names.add(tool["name"])
        errors.check(_check_str, f"tools[{i}].description", tool.get("description"), optional=True)
        params = tool.get("parameters")
        if params is not None and not isinstance(params, Mapping):
            errors.append(_expect(f"tools[{i}].parameters", "a JSON-schema object or null", params))
        if isinstance(params, Mapping) and not isinstance(params.get("properties", {}), Mapping):
            errors.append(_expect(f"tools[{i}].parameters.properties", "an object", params.get("properties")))
    errors.extend(_expect(field, "a finite number", number) for field, number in non_finite(list(tools), "tools"))


def _check_episode(errors: _Errors, obj: Mapping[str, Any], verifier: Any) -> None:
    """Episode fields: ``tools``; ``turns`` (scripted user turns) or ``user`` (a simulated
    user's hidden brief); ``environment`` (``name`` + initial configuration)."""
    present = [k for k in EPISODE_FIELDS if obj.get(k) is not None]
    if verifier in EPISODE_VERIFIERS and "tools" not in present:
        errors.append(FieldError("tools", f"required when 'verifier' is {verifier!r} (an episode element)"))
        if not present:
            return
    elif not present:
        return
    elif "tools" not in present:
        errors.append(FieldError("tools", f"required in an episode element (it has {present[0]!r})"))
    if "tools" in present:
        _check_tools(errors, obj["tools"])
    if obj.get("context_only", False):
        errors.append(FieldError("context_only", "an episode element (with 'tools') cannot be context_only"))
    turns, user = obj.get("turns"), obj.get("user")
    if turns is not None and user is not None:
        errors.append(FieldError("user", "give either 'turns' (scripted user turns) or 'user' (a simulated user's brief), not both"))
    if turns is not None:
        if not isinstance(turns, (list, tuple)):
            errors.append(_expect("turns", "a list of strings (the user's later turns)", turns))
        else:
            for i, turn in enumerate(turns):
                errors.check(_check_str, f"turns[{i}]", turn)
    if user is not None:
        errors.check(_check_str, "user", user, nonempty=True)
    env = obj.get("environment")
    if env is not None:
        if not isinstance(env, Mapping):
            errors.append(_expect("environment", "an object with 'name' and its initial configuration", env))
        else:
            errors.check(_check_str, "environment.name", env.get("name"), nonempty=True)
            errors.extend(_expect(field, "a finite number", number) for field, number in non_finite(env, "environment"))
    if verifier in EPISODE_VERIFIERS and env is None:
        errors.append(FieldError("environment", f"required when 'verifier' is {verifier!r}"))
    if verifier == "bfcl_multi_turn" and turns is None:
        errors.append(FieldError("turns", "required when 'verifier' is 'bfcl_multi_turn' (may be an empty list)"))
    if verifier == "tau_db" and user is None:
        errors.append(FieldError("user", "required when 'verifier' is 'tau_db' (the simulated customer's brief)"))
    if "tools" in present and verifier in VERIFIERS and verifier not in EPISODE_VERIFIERS:
        errors.append(_expect("verifier", "an episode verifier (" + ", ".join(EPISODE_VERIFIERS) + ") for an element with 'tools'", verifier))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_unicode(errors: _Errors, obj: Mapping[str, Any]) -> None:
    """A :class:`FieldError` for each lone UTF-16 surrogate (JSON ``"\\udc80"`` unpaired) in a
    key or string of the line: it decodes, but no UTF-8 text (prompt, log, hash) can hold it.
    A key holding one is reported for the object it is in (its value is not looked into)."""

    def find(value: Any, path: str) -> None:
        if isinstance(value, str):
            m = _SURROGATE.search(value)
            if m:
                errors.append(_surrogate(path, m.group()))
        elif isinstance(value, Mapping):
            for k, v in value.items():
                m = _SURROGATE.search(k)
                if m:
                    errors.append(_surrogate(path or "<key>", m.group()))
                else:
                    find(v, f"{path}.{k}" if path else k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                find(v, f"{path}[{i}]")

    find(obj, "")


def _surrogate(field: str, char: str) -> FieldError:
    return FieldError(field, f"a lone UTF-16 surrogate \\u{ord(char):04x} (an unpaired \\u escape); expected valid Unicode text")


#: Keys other datasets use for a contract field (HotpotQA's ``answer``, HumanEval's ``prompt``, ...):
#: an unknown key named here is answered with the field it most likely means.
FIELD_SYNONYMS: dict[str, str] = {
    "answer": "reference", "answers": "reference", "gold": "reference", "label": "reference",
    "output": "reference", "target": "reference", "question": "input", "prompt": "input",
    "task": "metadata.task", "shape": "metadata.shape", "scope": "metadata.scope", "time": "metadata.time",
}


def _field_hint(key: str) -> str:
    """``"; did you mean `reference`?"`` for a known synonym or a misspelling of a field, else ``""``.

    The misspelling cutoff is 0.65, above difflib's 0.6, so ``answer`` is not matched to ``user``
    (ratio 0.6) while ``meta`` still finds ``metadata`` (0.67).
    """
    if key in FIELD_SYNONYMS:
        return f"; did you mean `{FIELD_SYNONYMS[key]}`?"
    return did_you_mean(key, FIELDS, cutoff=0.65)


def validate(obj: Any) -> None:
    """Raise :class:`FieldError` for the first contract violation in a decoded line (the first
    of :func:`field_errors`)."""
    errors = field_errors(obj)
    if errors:
        raise errors[0]


def field_errors(obj: Any) -> list[FieldError]:
    """Every contract violation in a decoded line, in the order the checks find them (empty
    when it is good). A field whose value is wrong is reported once; the checks that need
    its value are not run (``metadata`` that is not an object is one error, not one per key);
    every other field is still checked, so a line with two bad fields gives two errors."""
    errors = _Errors()
    if not isinstance(obj, Mapping):
        errors.append(_expect("<line>", "a JSON object", obj))
        return errors
    _check_unicode(errors, obj)
    errors.extend(FieldError(key, f"unknown field{_field_hint(key)} (expected one of {', '.join(FIELDS)})")
                  for key in obj if key not in FIELDS)
    for required in ("id", "input"):
        if required not in obj:
            errors.append(FieldError(required, "required field missing"))
    if "id" in obj:
        errors.check(_check_str, "id", obj["id"], nonempty=True)
    if "input" in obj:
        errors.check(_check_str, "input", obj["input"])
    errors.check(_check_str, "instruction", obj.get("instruction"), optional=True)
    verifier = obj.get("verifier")
    if verifier is not None and verifier not in VERIFIERS:
        hint = did_you_mean(verifier, VERIFIERS) if isinstance(verifier, str) else ""
        errors.append(FieldError("verifier", f"expected one of {', '.join(VERIFIERS)} or null, got {describe(verifier)}{hint}"))
    meta = obj.get("metadata")
    _check_metadata(errors, {} if meta is None else meta, verifier)
    _check_str_or_list(errors, "evidence", obj.get("evidence"), what="a string, a list of strings or null")
    _check_str_or_list(errors, "reference", obj.get("reference"), what="a string, a list of strings or null")
    context_only = obj.get("context_only", False)
    if not isinstance(context_only, bool):
        errors.append(_expect("context_only", "true or false", context_only))
    if verifier in VERIFIERS and verifier != "code_exec" and not context_only and obj.get("reference") is None:
        errors.append(FieldError("reference", f"required when 'verifier' is {verifier!r} (the verifier scores against it)"))
    _check_episode(errors, obj, verifier)
    return errors


class _Repeated(dict):
    """Internal: a decoded JSON object in which the keys ``repeated`` occurred more than once."""

    repeated: tuple[str, ...] = ()


def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json`` ``object_pairs_hook``: a dict, marked (:class:`_Repeated`) if a key repeats."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    marked = _Repeated(obj)
    marked.repeated = tuple(repeated)
    return marked


def check_repeated(value: Any, path: str = "") -> None:
    """Raise :class:`FieldError` at the first key repeated in one object (depth first)."""
    errors = repeated_keys(value, path)
    if errors:
        raise errors[0]


def repeated_keys(value: Any, path: str = "") -> list[FieldError]:
    """A :class:`FieldError` for every key repeated in one object, depth first (an object's own
    repeated keys before those of the objects in it)."""
    errors: list[FieldError] = []
    if isinstance(value, _Repeated):
        errors.extend(FieldError(f"{path}.{key}" if path else key, f"repeated key {key!r} in one JSON object")
                      for key in value.repeated)
    if isinstance(value, dict):
        for key, item in value.items():
            errors.extend(repeated_keys(item, f"{path}.{key}" if path else key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            errors.extend(repeated_keys(item, f"{path}[{i}]"))
    return errors


#: ``rizz streams check`` prints at most this many error lines of a file (``--all``: every one),
#: then one line counting those it left out: a binary or other non-JSONL file gave one per line
#: (hundreds). Enough for a screen, and for the pattern of an ordinary stream's mistakes.
ERRORS_SHOWN = 20


#: The fewest non-blank lines :func:`not_jsonl` judges a whole file by: one or two bad lines
#: (a stream of one object with one bad byte) are those lines' errors, not the file's kind.
NOT_JSONL_MIN_LINES = 3


def not_jsonl(lines: int, not_objects: int, nul_bytes: bool = False) -> str | None:
    """Why a file read as a stream does not look like JSON Lines, for ``rizz streams check``'s
    summary line; None when it may be one. It does not when it has at least
    :data:`NOT_JSONL_MIN_LINES` non-blank ``lines`` and most of them (more than half) are
    ``not_objects``: not UTF-8, not JSON, or JSON but not an object (a binary file, CSV, prose).
    ``nul_bytes`` (the file holds a NUL byte, which no JSON text has) adds that it looks binary.

    Example:
        >>> not_jsonl(663, 663, nul_bytes=True)
        'the file does not look like JSONL: 663 of 663 non-blank lines are not JSON objects, and it holds NUL bytes (a binary file?)'
        >>> not_jsonl(4, 1) is None, not_jsonl(2, 1) is None, not_jsonl(1, 1) is None
        (True, True, True)
    """
    if lines < NOT_JSONL_MIN_LINES or 2 * not_objects <= lines:
        return None
    binary = ", and it holds NUL bytes (a binary file?)" if nul_bytes else ""
    return f"the file does not look like JSONL: {not_objects} of {lines} non-blank lines are not JSON objects{binary}"
