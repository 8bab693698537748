"""Load YAML policies into validated :class:`rizz.core.Policy` records.

A policy file is YAML whose keys follow ``specs/policy.schema.json`` (generated from the
records by :func:`rizz.core.policy_schema`). ``extends: other.yaml`` (relative to the file)
takes that policy and overrides it key by key (maps merge recursively; lists and scalars
replace); ``name`` is never inherited: a file without one is named after its file stem.
A key written twice in one mapping and an empty file are errors. Validation reports *every*
bad field with its JSON path and what was expected::

    $.routing.snap_threshold: expected a number in [0, 1], got 1.7
    $.routing.snap_treshold: unknown key; did you mean `snap_threshold`? (allowed: confident_margin, ...)
    $.routing.judge: expected one of always, when_uncertain, local, got 'when-uncertain'; did you mean `when_uncertain`?

Raises :class:`PolicyError` (a ``ValueError``) carrying ``errors`` (list of str) and ``path``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import cattrs
import yaml

from rizz.core.policy import PROTECTED_BLOCKS, Policy, policy_schema
from rizz.errors import RizzError
from rizz.formats.schema_check import schema_errors
from rizz.formats.streams import VERIFIERS, non_finite
from rizz.formats.wording import did_you_mean, plural

#: Verifier names (specs/stream-format.md); thresholds may only name these.
VERIFIER_NAMES = VERIFIERS

__all__ = ["PolicyError", "dump_policy", "header_summary", "load_policy", "parse_policy", "policy_data", "policy_header", "shipped_policies",
           "POLICY_DIR"]

def _policy_dir() -> Path:
    packaged = Path(__file__).resolve().parents[1] / "policies"  # a wheel install: package data (setup.py)
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "policies"  # a checkout


#: The policies shipped with rizz (``policies/`` at the repository root; ``rizz/policies/`` in a wheel).
POLICY_DIR = _policy_dir()

_converter = cattrs.Converter(forbid_extra_keys=True)


class PolicyError(ValueError, RizzError):
    """A policy file is unreadable or invalid; ``errors`` lists each problem with its path.

    ``lines`` and ``columns`` (1-based, one per error, ``None`` where unknown) place each error
    in the file: the message shows it as ``FILE:LINE: error``, or ``FILE:LINE:COL: error``.
    """

    def __init__(self, path: str, errors: list[str], lines: list[int | None] | None = None,
                 columns: list[int | None] | None = None, *, summary: str = "invalid policy") -> None:
        self.path = path
        self.summary = summary
        self.errors = errors
        self.lines = list(lines) if lines is not None else [None] * len(errors)
        self.columns = list(columns) if columns is not None else [None] * len(errors)
        shown = [f"  {path}:{n}{f':{c}' if c else ''}: {e}" if n else f"  {e}"
                 for e, n, c in zip(errors, self.lines, self.columns)]
        super().__init__(f"{path}: {summary}\n" + "\n".join(shown))


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _describe(schema: dict[str, Any]) -> str:
    t = schema.get("type")
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    if t in ("number", "integer"):
        word = "an integer" if t == "integer" else "a number"
        if "minimum" in schema and "maximum" in schema:
            return f"{word} in [{_fmt(schema['minimum'])}, {_fmt(schema['maximum'])}]"
        return word
    if t == "boolean":
        return "true or false"
    if t == "array":
        inner = schema.get("items", {})
        return "a list of distinct values, each " + _describe(inner) if inner else "a list"
    if t == "object":
        return "a mapping"
    return str(t)


def _shown_value(value: Any) -> str:
    """A bad value as YAML spells it (``true``, ``false``, ``null``; others by ``repr``)."""
    if value is True or value is False:
        return str(value).lower()
    return "null" if value is None else repr(value)


def _errors(data: Any, schema: dict[str, Any]) -> list[str]:
    # NaN/inf (YAML .nan/.inf) first: every range check would let them through
    out = [f"{path}: expected a finite number, got {number!r}" for path, number in non_finite(data, "$")]
    for err in sorted(schema_errors(data, schema), key=lambda e: list(map(str, e.path))):
        path = err.json_path
        if err.keyword == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
            for key in extra:
                out.append(f"{path}.{key}: unknown key{did_you_mean(str(key), allowed)} (allowed: {', '.join(allowed)})")
        elif err.keyword == "uniqueItems":
            out.append(f"{path}: expected distinct values, got {_shown_value(err.instance)}")
        else:
            choices = [str(c) for c in err.schema.get("enum", [])]
            hint = did_you_mean(err.instance, choices) if choices and isinstance(err.instance, str) else ""
            out.append(f"{path}: expected {_describe(err.schema)}, got {_shown_value(err.instance)}{hint}")
    return list(dict.fromkeys(out))  # one line per problem (an enum and a type check may both fire)


def _shown(path: Path) -> str:
    """``path`` as a user wrote it would look: relative to the working directory when under it."""
    try:
        return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    except (OSError, ValueError):
        return str(path)


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping (PyYAML keeps the last),
    and marks with its node's position an error PyYAML raises unmarked while building a value
    (a list as a key, a date that does not exist such as ``2025-02-30``)."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (TypeError, ValueError) as e:
            raise yaml.constructor.ConstructorError(None, None, str(e) or type(e).__name__, node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                kind = "mapping" if isinstance(key, dict) else type(key).__name__
                raise yaml.constructor.ConstructorError(None, None, f"a {kind} cannot be a key", key_node.start_mark)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} written twice (first on line {seen[key]})", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _line_of(text: str, error: str) -> int | None:
    """The 1-based line of the YAML ``text`` that ``error`` (``$.a.b: ...``) is about: its path's
    node as :func:`_as_written` finds it, or for ``$`` itself the document's first line (1 when
    the file holds no node)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if error.startswith("$:"):
        return root.start_mark.line + 1 if root is not None else 1
    return _as_written(error, root)[0]


def _parse_yaml(text: str, shown: str) -> Any:
    """The data of the YAML ``text``; a syntax error is a :class:`PolicyError` placed at
    ``FILE:LINE:COL`` (the parser's position) and saying only what is wrong."""
    def error(problem: str, line: int | None, column: int | None) -> PolicyError:
        return PolicyError(shown, [f"YAML error: {problem}"], [line], [column])

    try:
        loader = _UniqueKeyLoader(text)
    except yaml.reader.ReaderError as e:  # a control character: PyYAML gives its offset in the text, not a mark
        start = text.rfind("\n", 0, e.position) + 1
        raise error(str(e).splitlines()[0], text.count("\n", 0, e.position) + 1, e.position - start + 1) from None
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise error(e.problem or e.context or type(e).__name__,
                    mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
    except RecursionError:  # nesting too deep to compose: the parser's position is where it gave up
        mark = loader.get_mark()
        raise error("nested too deeply", mark.line + 1, mark.column + 1) from None
    except (yaml.YAMLError, TypeError, ValueError) as e:  # anything PyYAML raises without a position
        raise error(str(e).splitlines()[0] if str(e) else type(e).__name__, None, None) from None
    finally:
        loader.dispose()


def _not_found_hint(path: Path) -> str:
    """What a missing policy file's error adds: the path(s) looked at (``path``, and for a name
    without a suffix the shipped ``POLICY_DIR/<name>.yaml``), the file the user more likely
    meant (``<name>.yaml`` or ``<name>.yml`` beside it, else the closest shipped name) and the
    shipped names."""
    names = sorted(q.stem for q in POLICY_DIR.glob('*.yaml'))
    tried = [str(path)] + ([str(POLICY_DIR / f"{path.name}.yaml")] if not path.suffix else [])
    beside = [q for q in (path.with_name(f"{path.name}.yaml"), path.with_name(f"{path.name}.yml"))
              if not path.suffix and q.is_file()]
    hint = f"; did you mean `{_shown(beside[0])}`?" if beside else did_you_mean(path.stem, names)
    return f"looked for {' and '.join(tried)}{hint} (shipped names: {', '.join(names)})"


def _read(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    shown = _shown(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        if path.exists():
            raise PolicyError(shown, [f"cannot read: {e.strerror}"]) from None
        raise PolicyError(shown, [f"cannot read: {e.strerror}; {_not_found_hint(path)}"], summary="policy file not found") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        byte = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise PolicyError(shown, [f"not UTF-8 text at byte {byte} of the line"], [line]) from None

    def bad(error: str) -> PolicyError:  # an error about the node of `text` that its $.path names
        return PolicyError(shown, [error], [_line_of(text, error)])

    data = _parse_yaml(text, shown)
    if data is None:
        raise PolicyError(shown, ["$: the file is empty (start from the defaults with `extends: default`)"], [1])
    if not isinstance(data, dict):
        raise bad(f"$: expected a mapping, got {type(data).__name__}")
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise bad(f"$.extends: expected a path, got {_shown_value(parent)}")
    base_path = (path.parent / parent).resolve()
    if not base_path.exists() and not Path(parent).suffix and (POLICY_DIR / f"{parent}.yaml").exists():
        base_path = POLICY_DIR / f"{parent}.yaml"  # `extends: default` names a shipped policy
    if not base_path.exists():
        names = sorted(p.stem for p in POLICY_DIR.glob('*.yaml'))
        shipped = "" if Path(parent).suffix else f" and a shipped {parent}.yaml"
        raise bad(f"$.extends: {parent!r} not found{did_you_mean(Path(parent).stem, names)} "
                  f"(looked for {_shown(base_path)}{shipped}; shipped names: " + ", ".join(names) + ")")
    if base_path in seen + (path,):  # named at the `extends:` that closes the cycle
        raise bad(f"$.extends: cycle through {' -> '.join(_shown(q) for q in seen + (path, base_path))}")
    base = _read(base_path, seen + (path,))
    base.pop("name", None)  # a name names one file; the child is named by its own `name` or stem
    return _merge(base, data)


def parse_policy(data: dict[str, Any], source: str = "<policy>") -> Policy:
    """Validate a policy mapping (``extends`` already resolved) and build the record."""
    errors = _errors(data, policy_schema()) + _threshold_name_errors(data)
    if errors:
        raise PolicyError(source, list(dict.fromkeys(errors)))
    try:
        policy = _converter.structure(data, Policy)
    except (cattrs.BaseValidationError, ValueError, TypeError) as e:  # ranges the schema cannot say
        msgs = cattrs.transform_error(e, path="$") if isinstance(e, cattrs.BaseValidationError) else [str(e)]
        raise PolicyError(source, msgs) from None
    errors = _cross_field_errors(policy)
    if errors:
        raise PolicyError(source, errors)
    return policy


def _threshold_name_errors(data: Any) -> list[str]:
    """``write.thresholds`` keys must name verifiers (checked on the raw mapping, with the schema)."""
    write = data.get("write") if isinstance(data, dict) else None
    thresholds = write.get("thresholds") if isinstance(write, dict) else None
    if not isinstance(thresholds, dict):
        return []
    return [f"$.write.thresholds.{name}: unknown verifier{did_you_mean(name, VERIFIER_NAMES)} (expected one of {', '.join(VERIFIER_NAMES)})"
            for name in sorted(map(str, thresholds)) if name not in VERIFIER_NAMES]


def _folder_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one folder's name (inside BENCH_DIR), or None."""
    if not name.strip():
        return "expected a non-empty name"
    if any(c in name for c in "/\\\0"):
        return "expected no '/', '\\' or NUL in the name"
    if name.startswith("."):
        return "expected a name that does not start with '.'"
    if name.startswith("peer:"):
        return "expected a name that does not start with 'peer:' (bench entries peer:NAME are the peers)"
    return None


def _cross_field_errors(p: Policy) -> list[str]:
    """Checks that involve two fields (the schema checks one field at a time)."""
    out = []
    bad = _folder_name_problem(p.name)
    if bad:
        out.append(f"$.name: {bad}, got {p.name!r} (the name is the policy's run folder in a bench: BENCH_DIR/<name>)")
    if p.retrieval.rule_m_min > p.retrieval.rule_m_max:
        out.append(f"$.retrieval.rule_m_min: expected at most retrieval.rule_m_max ({p.retrieval.rule_m_max:g}), got {p.retrieval.rule_m_min:g}")
    if p.lifecycle.max_active > p.lifecycle.max_branches:
        out.append(f"$.lifecycle.max_active: expected at most lifecycle.max_branches ({p.lifecycle.max_branches}), got {p.lifecycle.max_active}")
    if p.quarantine.enabled and p.write.failure_threshold > p.quarantine.middling_min:
        out.append(f"$.write.failure_threshold: expected at most quarantine.middling_min ({p.quarantine.middling_min:g}), "
                   f"got {p.write.failure_threshold:g}")
    for b in p.compiler.drop_order:
        if b in PROTECTED_BLOCKS:
            out.append(f"$.compiler.drop_order: {b!r} is never dropped (instruction and input are protected); remove it")
    if "input" not in p.compiler.layout:
        out.append("$.compiler.layout: must include 'input'")
    return out


def _policy_path(path: str | Path) -> Path:
    """The file ``path`` names: a bare shipped name (``default``) is ``POLICY_DIR/default.yaml``
    when no such file exists in the working directory."""
    p = Path(path)
    if not p.exists() and not p.suffix and (POLICY_DIR / f"{p}.yaml").exists():
        p = POLICY_DIR / f"{p}.yaml"
    return p


def policy_header(path: str | Path) -> list[str]:
    """The comment lines a policy file (a path or a shipped name) starts with, as written
    (``# ...``): what the policy is for; [] for a file that starts with a key, or cannot be read."""
    try:
        text = _policy_path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        out.append(line.rstrip())
    return out


#: A header's leading reference to the project's issue tracker (``Issue #10 §4, ``), which a summary leaves out.
_TRACKER_REF = re.compile(r"^Issue #\d+(?: §\d+)?[:,]\s*")
#: Where a sentence ends: a stop, then a space and a capital or an opening bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`\"])")


def header_summary(header: list[str]) -> str:
    """A policy's one-line description: the first sentence of its header comment (up to an
    empty or indented comment line, such as a command quoted in it), without a leading
    reference to the issue tracker.

    Example:
        >>> header_summary(["# Issue #24: examples chosen for the evidence they carry, not the", "# nearest alone. Then more."])
        'Examples chosen for the evidence they carry, not the nearest alone.'
    """
    words = []
    for line in header:
        body = line[1:]
        if not body.strip() or body.startswith(("   ", "\t")):
            break
        words.append(body.strip())
    text = _TRACKER_REF.sub("", " ".join(words))
    first = _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(" :;,")
    return first[:1].upper() + first[1:]


def shipped_policies() -> list[tuple[str, str]]:
    """``(name, one-line description)`` of every policy shipped in :data:`POLICY_DIR`, by name
    (the name ``--policy`` takes; the description: :func:`header_summary`)."""
    return [(p.stem, header_summary(policy_header(p))) for p in sorted(POLICY_DIR.glob("*.yaml"), key=lambda p: p.stem)]


def load_policy(path: str | Path) -> Policy:
    """Load and validate a policy file (following ``extends``).

    A bare name such as ``default`` resolves to ``policies/default.yaml`` when no such file
    exists in the working directory. Raises :class:`PolicyError`.
    """
    p = _policy_path(path)
    data = _read(p.resolve(), ())
    data.setdefault("name", p.stem)
    try:
        return parse_policy(data, _shown(p.resolve()))
    except PolicyError as e:  # say on which line of the file each bad field is (specs/reliability.md), in line order
        try:
            root = yaml.compose(p.resolve().read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        except (OSError, yaml.YAMLError):
            root = None
        placed = [_as_written(err, root) for err in e.errors]
        placed.sort(key=lambda lp: (lp[0] is None, lp[0] or 0))  # stable: one line's errors keep their order
        raise PolicyError(e.path, [err for _, err in placed], [line for line, _ in placed]) from None


_PATH_PART = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]")
#: How ``_shown_value`` spells the YAML scalars that other spellings also mean (``yes``, ``off``, ``~``).
_CANONICAL = ("true", "false", "null")


def _as_written(error: str, root: Any) -> tuple[int | None, str]:
    """``(line, error)`` for an error whose ``$.a.b[2]`` path names a node of the file ``root``
    (composed YAML): the 1-based line of the deepest node of the path that exists (a missing
    key: its parent's line; ``None`` when the path is not in this file, e.g. inherited through
    ``extends``), and the error saying a value as it is written when YAML read it as another
    (``got yes (YAML reads it as true)``)."""
    head = error.split(":", 1)[0].split(" ", 1)[0]
    if root is None or not head.startswith("$"):
        return None, error
    node, line, whole = root, None, True
    for key, index in _PATH_PART.findall(head[1:]):
        if isinstance(node, yaml.MappingNode) and key:
            match = [(k, v) for k, v in node.value if getattr(k, "value", None) == key]
            if not match:
                whole = False
                break
            line, node = match[0][0].start_mark.line + 1, match[0][1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            whole = False
            break
    if whole and isinstance(node, yaml.ScalarNode):
        for canon in _CANONICAL:
            if error.endswith(f", got {canon}") and node.value.lower() != canon:
                return line, f"{error[: -len(canon)]}{node.value or '(nothing)'} (YAML reads it as {canon})"
    return line, error


def policy_data(policy: Policy) -> dict[str, Any]:
    """The full policy as plain data (lists for tuples); ``parse_policy`` inverts it."""
    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return list(v) if isinstance(v, tuple) else v

    return plain(_converter.unstructure(policy))


def policy_differences(a: Policy, b: Policy) -> list[tuple[str, Any, Any]]:
    """``(path, a's value, b's value)`` for every field where two resolved policies differ, in
    field order; ``path`` is dotted (``routing.judge``), as policy files and errors name fields.

    Example:
        >>> import attrs
        >>> d = Policy()
        >>> policy_differences(d, attrs.evolve(d, name="x", routing=attrs.evolve(d.routing, judge="local")))
        [('name', 'default', 'x'), ('routing.judge', 'when_uncertain', 'local')]
    """
    out: list[tuple[str, Any, Any]] = []

    def walk(path: str, x: Any, y: Any) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for k in list(x) + [k for k in y if k not in x]:
                walk(f"{path}.{k}" if path else k, x.get(k), y.get(k))
        elif x != y:
            out.append((path, x, y))

    walk("", policy_data(a), policy_data(b))
    return out


def shipped_name_clash(source: str | Path, policy: Policy) -> int:
    """How many fields (apart from the name) of the policy loaded from ``source`` differ from the
    shipped policy whose name it has, for a file outside :data:`POLICY_DIR` (a copy of
    ``policies/NAME.yaml`` with a key changed keeps its ``name:``); 0 for a shipped policy, an
    identical copy, or a name no shipped policy has."""
    path = _policy_path(source)
    shipped = POLICY_DIR / f"{policy.name}.yaml"
    if not path.is_file() or not shipped.is_file() or path.resolve().parent == POLICY_DIR.resolve():
        return 0
    try:
        base = load_policy(shipped)
    except PolicyError:
        return 0
    return len([d for d in policy_differences(base, policy) if d[0] != "name"])


def policy_label(source: str | Path, policy: Policy) -> str:
    """What ``rizz run`` and ``rizz bench`` call the policy loaded from ``source`` (their console
    lines, a bench's run folder and table row): its name; for a file that has a shipped policy's
    name while its fields differ (:func:`shipped_name_clash`), the file's stem, unless that is
    a shipped name too (or no folder name). run.json and summary.json record ``source`` as before."""
    if not shipped_name_clash(source, policy):
        return policy.name
    stem = _policy_path(source).stem
    return policy.name if (POLICY_DIR / f"{stem}.yaml").is_file() or _folder_name_problem(stem) else stem


def name_clash_note(source: str | Path, policy: Policy) -> str:
    """A note for a policy file that has a shipped policy's name while its fields differ from it
    (:func:`shipped_name_clash`): the file, the name, the label run and bench give it, and the fix;
    ``""`` for any other policy."""
    n = shipped_name_clash(source, policy)
    if not n:
        return ""
    name, label = policy.name, policy_label(source, policy)
    called = (f"rizz run and rizz bench label it {label}" if label != name
              else f"rizz run and rizz bench call it {name} too, as the shipped one")
    own = f"name: {label}" if label != name else "name: my-name"
    return (f"note: {source} is named {name}, as the shipped policy, but {plural(n, 'field differs', 'fields differ')} from it "
            f"(rizz policy diff {name} {source}); "
            f"{called}; give it its own name: ({own}), or write extends: {name} with only the keys you changed")


def dump_policy(policy: Policy) -> str:
    """The full policy as YAML (every field, defaults included)."""
    return yaml.safe_dump(policy_data(policy), sort_keys=False, allow_unicode=True)


def constants_markdown() -> str:
    """``specs/constants.md``: every policy field with its default (the core's ``Policy()``, and
    the shipped ``policies/default.yaml``'s value where it sets another), range and source."""
    import typing

    import attrs

    head = [
        "# Constants and where they come from",
        "",
        "Every constant is a policy field (schema `specs/policy.schema.json`). *default* is the value a",
        "policy file that leaves the field out gets (`rizz.core.Policy()`: what older runs were recorded",
        "with); *default.yaml* is the shipped `default` policy's value where it sets another one.",
        "`paper §N` = a value stated in the RIZZ paper (section numbers: `specs/stream-format.md`);",
        "`rizz` = this project's choice where the paper gives no number.",
        "Generated by `rizz policy constants > specs/constants.md`; a test keeps it in sync.",
        "",
        "| field | default | default.yaml | range | source | meaning |",
        "|---|---|---|---|---|---|",
    ]

    def show(v: Any) -> Any:
        return ", ".join(v) if isinstance(v, tuple) else (", ".join(f"{k}: {x}" for k, x in v.items()) if isinstance(v, dict) else v)

    rows = []
    hints = typing.get_type_hints(Policy)
    base, shipped = Policy(), load_policy("default")
    for sec in attrs.fields(Policy):
        if sec.name == "name":
            continue
        inst, ours = getattr(base, sec.name), getattr(shipped, sec.name)
        for f in attrs.fields(hints[sec.name]):
            md, v, w = f.metadata, getattr(inst, f.name), getattr(ours, f.name)
            rng = f"[{_fmt(md['min'])}, {_fmt(md['max'])}]" if "min" in md else ("one of " + ", ".join(md["enum"]) if "enum" in md else "")
            rows.append(f"| `{sec.name}.{f.name}` | {show(v)} | {show(w) if w != v else ''} | {rng} | {md.get('src', '')} | {md.get('doc', '')} |")
    return "\n".join(head + rows) + "\n"
