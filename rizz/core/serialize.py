"""State ↔ JSON-compatible data, and the state digest.

``to_data`` gives a canonical tree of JSON values (records tagged with their type, vectors
base64 float32, maps with sorted keys); ``from_data`` inverts it exactly, so
``from_data(to_data(s)) == s``. ``digest(s)`` is ``"sha256:" + hex`` of the canonical JSON
encoding — equal states have equal digests, on any machine (JSON floats print their
shortest round-trip repr). Fields with metadata ``derived`` (``AdaptiveState.episode_index``)
are left out; the record's constructor rebuilds them. Fields with metadata ``omit_default``
(added after states were first recorded, e.g. ``ContextItem.time``, or the state of an
optional feature: block evidence, zone evidence, sketches, the bandit) are left out while they
equal their default, so a state that does not use them keeps its earlier tree and digest;
``from_data`` restores the default. Fields with metadata ``digest: False`` are a function of
another field (``ContextItem.instant_us`` of ``time``): ``to_data`` keeps them (snapshots
restore them exactly) and ``digest`` leaves them out, so adding one changes no digest.
Python renames keep the wire names (``specs/glossary.md``): a class's
``WIRE_NAME`` is its type tag, a field's metadata ``wire`` its key.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from pyrsistent import PMap, PSet, PVector, pmap, pset, pvector

from rizz.core import events as _events, inputs as _inputs, records as _records, routing as _routing, tenants as _tenants
from rizz.core.vec import EmbeddingMatrix

# attrs.Factory's class: attrs's stubs type attrs.Factory as a function, which isinstance() does not take
_FACTORY: Any = type(attrs.Factory(list))

__all__ = ["Hook", "canonical_json", "digest", "from_data", "record_from_data", "to_data"]

def _wire(cls: type) -> str:
    """The record's type tag: its ``WIRE_NAME`` when it was renamed in Python (the tag written
    before stays, so digests and snapshots hold), else its class name."""
    name: str = cls.__dict__.get("WIRE_NAME", cls.__name__)
    return name


_TYPES: dict[str, type] = {}
for _mod in (_records, _events, _inputs, _routing, _tenants):
    for _name in dir(_mod):
        _obj = getattr(_mod, _name)
        if isinstance(_obj, type) and attrs.has(_obj) and _obj.__module__ == _mod.__name__:
            _TYPES[_wire(_obj)] = _obj
_TYPES["MemoryStore"] = _records.MemoryStore
# wire key -> Python field name, for the fields renamed in Python (metadata ``wire``)
_RENAMED: dict[type, dict[str, str]] = {
    cls: {f.metadata["wire"]: f.name for f in attrs.fields(cls) if "wire" in f.metadata} for cls in _TYPES.values()
}


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


Hook = Callable[[Any], Any]


def to_data(obj: Any, hook: Hook | None = None) -> Any:
    """Canonical JSON-compatible tree of a state, record, event or collection.

    ``hook``: called with every value that is not a JSON scalar, before it is serialised; a
    non-None result is used as its tree instead (the shell's incremental snapshots put large
    parts of a state elsewhere this way, ``rizz.store.snapchunks``). The hook serialises a
    value's children with ``to_data(child, hook)``."""
    return _tree(obj, False, hook)


def _tree(obj: Any, for_digest: bool, hook: Hook | None = None) -> Any:
    """:func:`to_data`; with ``for_digest`` fields marked ``digest: False`` are left out."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise ValueError(f"non-finite float {obj!r} cannot be serialised")
        return obj
    if hook is not None:
        hooked = hook(obj)
        if hooked is not None:
            return hooked
    if isinstance(obj, bytes):
        return {"_b": _b64(obj)}
    if isinstance(obj, EmbeddingMatrix):
        return {"_x": _b64(obj.rows().tobytes()), "d": obj.dim, "n": len(obj)}
    if isinstance(obj, PMap):
        return {"_m": [[_tree(k, for_digest, hook), _tree(obj[k], for_digest, hook)] for k in sorted(obj.keys(), key=repr)]}
    if isinstance(obj, PSet):
        return {"_s": sorted((_tree(x, for_digest, hook) for x in obj), key=repr)}
    if isinstance(obj, PVector):
        return {"_v": [_tree(x, for_digest, hook) for x in obj]}
    if isinstance(obj, tuple):
        return {"_tu": [_tree(x, for_digest, hook) for x in obj]}
    if isinstance(obj, dict):
        return {"_d": [[_tree(k, for_digest, hook), _tree(obj[k], for_digest, hook)] for k in sorted(obj, key=repr)]}
    if attrs.has(type(obj)):
        out: dict[str, Any] = {"_t": _wire(type(obj))}
        for f in attrs.fields(type(obj)):
            # derived data (the episodic index) is rebuilt, never stored
            if f.metadata.get("derived") or (for_digest and f.metadata.get("digest") is False):
                continue
            value = getattr(obj, f.name)
            if f.metadata.get("omit_default") and value == _default(f):
                continue  # an optional feature that is off leaves no trace (old digests hold)
            out[f.metadata.get("wire", f.name)] = _tree(value, for_digest, hook)
        return out
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def _default(f: Any) -> Any:
    d = f.default
    return d.factory() if isinstance(d, _FACTORY) and not d.takes_self else d


def from_data(data: Any, hook: Hook | None = None) -> Any:
    """Inverse of :func:`to_data` (with the same kind of ``hook``: called with every JSON object
    before it is read; a non-None result is the value). Raises ValueError on an unknown record type.

    A loaded state is ready to grow: sets are sized for their contents (``pset``'s default of 8
    buckets would make every lookup a scan and the first insertion a rehash) and matrices
    have room for a quarter more rows before their first append copies them."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [from_data(x, hook) for x in data]
    if hook is not None:
        out = hook(data)
        if out is not None:
            return out
    if "_b" in data:
        return base64.b64decode(data["_b"])
    if "_x" in data:
        rows = np.frombuffer(base64.b64decode(data["_x"]), dtype=np.float32).reshape(data["n"], data["d"]) if data["n"] else None
        return EmbeddingMatrix.from_rows(rows, data["d"], data["n"] // 4) if rows is not None else EmbeddingMatrix(data["d"])
    if "_m" in data:
        return pmap({from_data(k, hook): from_data(v, hook) for k, v in data["_m"]})
    if "_s" in data:
        return pset((from_data(x, hook) for x in data["_s"]), pre_size=max(8, 2 * len(data["_s"])))
    if "_v" in data:
        return pvector(from_data(x, hook) for x in data["_v"])
    if "_d" in data:
        return {from_data(k, hook): from_data(v, hook) for k, v in data["_d"]}
    if "_tu" in data:
        return tuple(from_data(x, hook) for x in data["_tu"])
    return record_from_data(data, hook)


def record_from_data(data: dict[str, Any], hook: Hook | None = None) -> Any:
    """The record (attrs value) of a ``{"_t": TYPE, ...}`` tree. Raises ValueError on an unknown type."""
    name = data.get("_t")
    cls = _TYPES.get(name)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown record type {name!r}")
    names = _RENAMED[cls]
    return cls(**{names.get(k, k): from_data(v, hook) for k, v in data.items() if k != "_t"})


def canonical_json(obj: Any, *, for_digest: bool = False) -> str:
    """Compact, key-sorted JSON of ``to_data(obj)`` (``for_digest``: of the digest's tree)."""
    return json.dumps(_tree(obj, for_digest), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any) -> str:
    """``"sha256:<hex>"`` of :func:`canonical_json` of the digest's tree (fields marked
    ``digest: False`` left out)."""
    return "sha256:" + hashlib.sha256(canonical_json(obj, for_digest=True).encode("utf-8")).hexdigest()
