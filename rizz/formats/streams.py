"""Stream files: read, validate and write the stream JSONL format (specs/stream-format.md).

One stream element per line (``specs/stream-format.md``)::

    {"id": "fomc-0007", "input": "...", "instruction": null,
     "metadata": {"task": "FOMC", "scope": null, "shape": "letter", "time": null},
     "evidence": null, "reference": "A", "verifier": "exact_match", "context_only": false}

:func:`read_stream` validates every line against the contract and reports a bad line as
``FILE:LINE: field 'PATH': expected ..., got ...`` (its first problem, or with
``every_error`` each of its problems: ``rizz streams check``). :func:`write_stream` writes the
canonical form (contract field order, every field present, UTF-8, one element a line), so
``write_stream(p, read_stream(p).elements)`` is a fixed point.

Extensions beyond the contract (documented, accepted by the reader):
- ``evidence`` may be a string or a list of strings (one per evidence passage, e.g. the
  ten HotpotQA paragraphs); it is held as ``str`` or ``tuple[str, ...]``.
- ``metadata`` may carry further keys (``tests``, ``source``, ``entry_point``, ``category``,
  ...); values are deep-frozen (dict -> pmap, list -> pvector). A key that is a near-miss of
  one rizz reads (``shap`` for ``shape``) is refused with a did-you-mean.
- Blank (whitespace-only) lines are skipped.

Refused beyond the field table: a key repeated in one JSON object (at any depth), a number
that is not finite (``NaN``, ``Infinity``, ``1e999``) anywhere in ``metadata``, a file with
no stream elements, and a file of JSON that is not JSON Lines (a JSON array, or an object
pretty-printed over several lines: one error for the file, :func:`not_json_lines`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
from pyrsistent import PMap, freeze, pmap, thaw

from rizz.errors import RizzError
from rizz.formats.stream_checks import (  # noqa: F401 - the field table's names are part of this module's API
    EPISODE_FIELDS,
    EPISODE_VERIFIERS,
    F1_VARIANTS,
    FIELDS,
    METADATA_KEYS,
    SHAPES,
    VERIFIERS,
    FieldError,
    check_repeated,
    describe,
    field_errors,
    non_finite,
    pairs_hook,
    repeated_keys,
    validate,
)
from rizz.formats.timekeys import canonical_time, instant_us

__all__ = [
    "SHAPES",
    "VERIFIERS",
    "EPISODE_VERIFIERS",
    "FIELDS",
    "EPISODE_FIELDS",
    "StreamElement",
    "BadLine",
    "StreamRead",
    "StreamError",
    "element_from_json",
    "element_to_json",
    "read_stream",
    "write_stream",
    "dumps_element",
    "count_tasks",
    "non_finite",
    "not_json_lines",
]

def _freeze_meta(meta: Mapping[str, Any] | None) -> PMap:
    meta = dict(meta or {})
    for key in METADATA_KEYS:
        meta.setdefault(key, None)
    return freeze(meta)


def _tuple_or_str(value: Any) -> str | tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(value)


def _freeze_list(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(freeze(v) for v in value)


def _freeze_or_none(value: Any) -> PMap | None:
    return None if value is None else freeze(dict(value))


def _element_validator(inst: StreamElement, _attr: Any, _value: Any) -> None:
    try:
        validate(element_to_json(inst))
    except FieldError as err:
        raise ValueError(f"invalid stream element {inst.id!r}: {err}") from None


@attrs.frozen
class StreamElement:
    """One stream element ``z_t = (x_t, I_t, m_t, d_t, y*_t)`` (§1).

    Attributes:
      id: unique within its stream file.
      input: ``x_t``, the text the model sees (or the context to store if ``context_only``).
      instruction: ``I_t`` or None.
      metadata: ``m_t`` as a deep-frozen pmap; always has ``task``, ``scope``, ``shape``,
        ``time`` (None when absent). ``code_exec`` needs ``tests`` and ``entry_point``;
        ``sari`` needs ``source``; no number in it is NaN or infinite.
      evidence: ``d_t``: None, one string, or a tuple of passages.
      reference: ``y*_t``: None, one string, or a tuple of acceptable strings (verifier only).
      verifier: one of :data:`VERIFIERS` or None.
      context_only: True when no answer is asked (the input is stored as scoped context).
      tools: episode elements only: function descriptions (JSON-schema, OpenAI/BFCL shape),
        each a frozen pmap; None for a single-answer element.
      turns: the user's later scripted turns (BFCL multi-turn), or None.
      user: the hidden brief of a simulated user (τ-bench), or None.
      environment: ``{"name": ..., <initial configuration>}`` as a pmap, or None.

    Raises:
      ValueError: on construction (and on ``attrs.evolve``) if the element breaks the contract.
    """

    id: str
    input: str
    instruction: str | None = None
    metadata: PMap = attrs.field(factory=pmap, converter=_freeze_meta)
    evidence: str | tuple[str, ...] | None = attrs.field(default=None, converter=_tuple_or_str)
    reference: str | tuple[str, ...] | None = attrs.field(default=None, converter=_tuple_or_str)
    verifier: str | None = None
    context_only: bool = attrs.field(default=False)
    tools: tuple[PMap, ...] | None = attrs.field(default=None, converter=_freeze_list)
    turns: tuple[str, ...] | None = attrs.field(default=None, converter=_freeze_list)
    user: str | None = None
    environment: PMap | None = attrs.field(default=None, converter=_freeze_or_none, validator=_element_validator)

    @property
    def is_episode(self) -> bool:
        """True for an episode element (it has ``tools``): the model calls tools until it answers."""
        return self.tools is not None

    @property
    def task(self) -> str | None:
        """``metadata.task`` (reporting only; never used for routing)."""
        return self.metadata.get("task")

    @property
    def scope(self) -> str | None:
        """``metadata.scope``: the scope key for scoped context, or None."""
        return self.metadata.get("scope")

    @property
    def time(self) -> str | None:
        """``metadata.time`` as canonical ISO 8601 text (:func:`rizz.formats.timekeys.canonical_time`), or None."""
        t = self.metadata.get("time")
        return None if t is None else canonical_time(t)

    @property
    def instant_us(self) -> int | None:
        """The instant of ``metadata.time``: integer microseconds since 1970-01-01 UTC (naive =
        UTC; :func:`rizz.formats.timekeys.instant_us`), or None. What the core orders by."""
        t = self.metadata.get("time")
        return None if t is None else instant_us(t)

    @property
    def tenant(self) -> str | None:
        """``metadata.tenant``: a hard wall (no memory crosses it), or None."""
        return self.metadata.get("tenant")

    @property
    def shape(self) -> str | None:
        """``metadata.shape``: expected output shape (one of :data:`SHAPES`) or None."""
        return self.metadata.get("shape")

    @property
    def evidence_items(self) -> tuple[str, ...]:
        """Evidence as a tuple of passages (empty if none)."""
        if self.evidence is None:
            return ()
        return (self.evidence,) if isinstance(self.evidence, str) else self.evidence

    @property
    def references(self) -> tuple[str, ...]:
        """Acceptable references as a tuple (empty if none)."""
        if self.reference is None:
            return ()
        return (self.reference,) if isinstance(self.reference, str) else self.reference


@attrs.frozen
class BadLine:
    """A rejected line: 1-based line number, offending field path (None for bad JSON), message.

    One error of the line: ``read_stream(..., every_error=True)`` gives one for each problem of
    a line (the same ``line``, each its own ``field``); otherwise one per bad line.
    """

    line: int
    field: str | None
    message: str


@attrs.frozen
class StreamRead:
    """Result of :func:`read_stream`: the good elements in file order and the bad lines' errors
    (one per bad line, or each of its errors with ``every_error``), in file order."""

    elements: tuple[StreamElement, ...]
    bad: tuple[BadLine, ...] = ()

    @property
    def bad_lines(self) -> int:
        """How many lines are bad (``len(bad)`` unless a line has several errors)."""
        return len({b.line for b in self.bad})


class StreamError(RizzError):
    """A stream file breaks the contract.

    For a bad line ``str(err)`` is ``FILE:LINE: field 'F': ...`` and ``line``/``field`` name it;
    for the file as a whole (no stream elements) it is ``FILE: ...`` with ``line`` and ``field``
    None. ``bad`` holds the bad lines collected before the error (``skip_bad``); for a bad line
    read with ``every_error`` (and not ``skip_bad``), each error of that line, the first being
    the one ``str(err)`` names; else ``()``.
    """

    def __init__(self, path: str, bad: BadLine | str, collected: Iterable[BadLine] = ()) -> None:
        if isinstance(bad, BadLine):
            super().__init__(f"{path}:{bad.line}: {bad.message}")
            self.line: int | None = bad.line
            self.field: str | None = bad.field
        else:
            super().__init__(f"{path}: {bad}")
            self.line = self.field = None
        self.path = path
        self.bad: tuple[BadLine, ...] = tuple(collected)


def element_from_json(obj: Any) -> StreamElement:
    """Build a :class:`StreamElement` from one decoded JSON line.

    Raises:
      ValueError: naming the bad field, e.g. ``field 'verifier': expected one of ...``.
    """
    try:
        validate(obj)
    except FieldError as err:
        raise ValueError(str(err)) from None
    return _element_of(obj)


def _element_of(obj: dict[str, Any]) -> StreamElement:
    """:func:`element_from_json` of an object already validated (``read_stream`` checks each line once)."""
    return StreamElement(
        id=obj["id"], input=obj["input"], instruction=obj.get("instruction"),
        metadata=obj.get("metadata") or {}, evidence=obj.get("evidence"),
        reference=obj.get("reference"), verifier=obj.get("verifier"),
        context_only=obj.get("context_only", False), tools=obj.get("tools"), turns=obj.get("turns"),
        user=obj.get("user"), environment=obj.get("environment"),
    )


def element_to_json(el: StreamElement) -> dict[str, Any]:
    """The canonical JSON object of an element: contract field order, every field present
    (the episode fields ``tools, turns, user, environment`` only when set);
    metadata keys ``task, scope, shape, time`` first, then the rest sorted."""
    meta = thaw(el.metadata)
    ordered = {k: meta.get(k) for k in METADATA_KEYS}
    ordered.update({k: meta[k] for k in sorted(meta) if k not in METADATA_KEYS})

    def plain(v: Any) -> Any:
        return list(v) if isinstance(v, tuple) else v

    out = {
        "id": el.id, "input": el.input, "instruction": el.instruction, "metadata": ordered,
        "evidence": plain(el.evidence), "reference": plain(el.reference),
        "verifier": el.verifier, "context_only": el.context_only,
    }
    for key in EPISODE_FIELDS:  # only when present: a single-answer line keeps its old form
        value = getattr(el, key)
        if value is not None:
            out[key] = sorted_plain(list(value) if isinstance(value, tuple) else value)
    return out


def sorted_plain(value: Any) -> Any:
    """A frozen stream value (pyrsistent) as plain dicts and lists, every dict's keys sorted.

    A ``pmap`` iterates in an order that depends on the process's string-hash seed
    (``PYTHONHASHSEED``), so thawed as is, the same element would be written, printed and
    prompted differently by every process: stream files built twice would differ byte for
    byte, and prompts (and the response-cache keys made from them) would change run to run."""
    return _sorted(thaw(value))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def dumps_element(el: StreamElement) -> str:
    """One canonical JSONL line (no trailing newline), UTF-8 text, non-ASCII kept as is."""
    return json.dumps(element_to_json(el), ensure_ascii=False)


def read_stream(path: str | os.PathLike[str], *, skip_bad: bool = False, every_error: bool = False) -> StreamRead:
    """Read and validate a stream file.

    Args:
      path: a UTF-8 JSONL file, one element a line; blank lines are skipped, and so is a
        UTF-8 byte-order mark at the start of the file.
      skip_bad: if False the first bad line raises; if True bad lines are collected in
        ``StreamRead.bad`` and the good ones returned.
      every_error: if False a bad line is its first problem (one :class:`BadLine`); if True
        each of its problems is one (every bad field, each repeated key; a line that is not
        JSON, or not an object, is still one). ``rizz streams check`` reads this way, so a
        line is fixed in one go; ``rizz run`` stops at the first.

    Returns:
      :class:`StreamRead` with elements in file order.

    Raises:
      StreamError: ``FILE:LINE: field 'F': expected ..., got ...`` (bad JSON, a key repeated
        in one object, unknown or missing field, wrong type, a non-finite number in
        ``metadata``, verifier/shape outside the allowed set, ``code_exec`` without
        ``metadata.tests`` or a function name in ``metadata.entry_point``, ``sari`` without
        ``metadata.source``, duplicate id — the message names both lines);
        ``FILE: no stream elements (...)`` if the file has no non-blank line, or (with
        ``skip_bad``) every line is bad — then ``err.bad`` lists them; ``FILE: a JSON array
        ..., not JSON Lines: ...`` (or ``one JSON object spread over N lines``), with or
        without ``skip_bad``, for a file of JSON that is not one element a line
        (:func:`not_json_lines`, which names the ``jq`` command that converts it).
      OSError: if the file cannot be read.
    """
    name = str(path)
    elements: list[StreamElement] = []
    bad: list[BadLine] = []
    seen: dict[str, int] = {}

    def reject(b: BadLine, *more: BadLine) -> None:
        if not skip_bad:
            raise StreamError(name, b, (b, *more) if every_error else ())
        bad.extend((b, *more))

    if os.path.isdir(path):
        raise StreamError(name, "is a directory; expected a stream file (JSONL, one element a line)")
    first_line = True
    with open(path, "rb") as fh:
        for lineno, raw_bytes in enumerate(fh, start=1):
            if lineno == 1 and raw_bytes.startswith(b"\xef\xbb\xbf"):
                raw_bytes = raw_bytes[3:]  # a UTF-8 byte-order mark (Windows editors write one) is not content
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as err:  # a bad byte is this line's fault, not a crash
                if raw_bytes.strip():
                    reject(BadLine(lineno, None, f"not UTF-8 text at byte {err.start + 1} of the line"))
                continue
            if not raw.strip():
                continue
            if first_line:  # a JSON file that is not JSON Lines is one error, not one per line
                first_line = False
                whole = not_json_lines(path, raw)
                if whole is not None:
                    raise StreamError(name, whole)
            try:
                obj = json.loads(raw.rstrip("\r\n"), object_pairs_hook=pairs_hook)
            except json.JSONDecodeError as err:
                # json's "Unterminated string starting at" (its own text continues ": line L column C")
                what = f"{err.msg[:-3].lower()} there" if err.msg.endswith(" at") else err.msg
                reject(BadLine(lineno, None, f"invalid JSON at column {err.colno}: {what}"))
                continue
            if not isinstance(obj, dict):
                reject(BadLine(lineno, None, f"expected a JSON object, got {describe(obj)}"))
                continue
            errors = [BadLine(lineno, err.field, str(err)) for err in [*repeated_keys(obj), *field_errors(obj)]]
            if not errors or every_error:  # a good id that an earlier element has is one error more
                ident = obj.get("id")
                first = seen.get(ident) if isinstance(ident, str) else None
                if first is not None:
                    errors.append(BadLine(lineno, "id", f"field 'id': duplicate id {ident!r}, first used at line {first}"))
            if errors:
                if every_error:
                    reject(*errors)
                else:
                    reject(errors[0])
                continue
            seen[obj["id"]] = lineno
            elements.append(_element_of(obj))
    if not elements and not bad:
        raise StreamError(name, "no stream elements (the file is empty or has only blank lines)")
    if not elements:
        n_bad = len({b.line for b in bad})
        raise StreamError(name, "no stream elements: the only non-blank line is bad" if n_bad == 1
                          else f"no stream elements: all {n_bad} non-blank lines are bad", bad)
    return StreamRead(tuple(elements), tuple(bad))


def not_json_lines(path: str | os.PathLike[str], first_line: str) -> str | None:
    """What is wrong with a stream file that holds JSON but not JSON Lines, said once for the
    whole file, with the ``jq`` command that converts it; None when it is not such a file.

    ``first_line``: the file's first non-blank line. Such a file is a JSON array (the line
    starts with ``[`` and the file is one array; or it does not parse at all and the line is
    no whole JSON value: a broken array), or JSON values spread over several lines
    (pretty-printed: the first line is no whole JSON value, but the file is one or more).
    Anything else is read line by line, each bad line an error of its own.

    Example (``s.json`` holds ``[{"id": "a", ...}, ...]`` pretty-printed)::

        a JSON array of 2 items, not JSON Lines: a stream file holds one element, a whole JSON
        object, per line (specs/stream-format.md); convert it with: jq -c '.[]' s.json > s.jsonl
    """
    import shlex

    head = first_line.strip()
    try:
        json.loads(head)
        whole_line = True
    except ValueError:
        whole_line = False
    if whole_line and not head.startswith("["):
        return None  # a whole JSON value on the first line: JSON Lines (or bad lines, said one by one)
    try:
        text: str | None = Path(path).read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        text = None
    values = None if text is None else _json_values(text)
    if head.startswith("["):
        if values is not None and len(values) == 1 and isinstance(values[0], list):
            n = len(values[0])
            what = f"a JSON array of {n} item{'' if n == 1 else 's'}"
        elif values is None and not whole_line:  # an array that does not parse (a comma too many?): jq says where
            what = "a JSON array (its first non-blank character is '[')"
        else:  # lines of JSON, the first an array: each bad line is said on its own
            return None
        jq = "'.[]'"
    elif values is not None and text is not None:
        lines = sum(1 for line in text.splitlines() if line.strip())
        what = (f"one JSON {'object' if isinstance(values[0], dict) else 'value'} spread over {lines} lines" if len(values) == 1
                else f"{len(values)} JSON values spread over {lines} lines (pretty-printed)")
        jq = "."
    else:
        return None
    target = Path(path).with_suffix(".jsonl")
    if target == Path(path):
        target = Path(path).with_suffix(".lines.jsonl")
    return (f"{what}, not JSON Lines: a stream file holds one element, a whole JSON object, per line "
            f"(specs/stream-format.md); convert it with: jq -c {jq} {shlex.quote(str(path))} > {shlex.quote(str(target))}")


def _json_values(text: str) -> list[Any] | None:
    """The JSON values ``text`` holds one after another (whitespace between them), or None
    when it is not such a sequence."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    at, end = 0, len(text)
    while True:
        while at < end and text[at] in " \t\r\n":
            at += 1
        if at == end:
            return values or None
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return None
        values.append(value)


def write_stream(path: str | os.PathLike[str], elements: Iterable[StreamElement]) -> int:
    """Write elements as canonical JSONL (see :func:`element_to_json`), atomically.

    Returns:
      the number of lines written.

    Raises:
      ValueError: if two elements share an id, or there are none (the file would not read back).
    """
    lines: list[str] = []
    seen: set[str] = set()
    for el in elements:
        if el.id in seen:
            raise ValueError(f"duplicate stream element id {el.id!r}")
        seen.add(el.id)
        lines.append(dumps_element(el) + "\n")
    if not lines:
        raise ValueError("no stream elements to write (read_stream refuses an empty stream file)")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.writelines(lines)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(lines)


def count_tasks(elements: Iterable[StreamElement]) -> dict[str, int]:
    """Elements per ``metadata.task``, in order of first appearance; ``"-"`` counts those
    without a task (as ``summary.json``'s ``per_task`` does)."""
    counts: dict[str, int] = {}
    for el in elements:
        key = el.task or "-"
        counts[key] = counts.get(key, 0) + 1
    return counts
