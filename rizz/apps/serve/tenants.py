"""The one adapter between ``rizz serve`` and the live Session API (``rizz.Session``; specs/step-semantics.md, "Live sessions").

:class:`Tenants` keeps one durable Session per tenant under ``DATA/<tenant>/``, opened on first
use through ``opener(path) -> session``; a read (state, branches, pending) of a tenant with
no folder is answered by ``blank()``, a fresh in-memory session, and creates nothing. A session is used only through this API (the
CONTRACT's live API)::

    s.used_id(id) -> str | None         # what became of an earlier answer of this id (None: never answered)
    s.answer(element_dict) -> pending   # .id, .answer, .prompt_tokens, .branch (see _view)
    s.fold(id, Verdict | float)         # raises (nothing changed) for unknown/expired/folded ids
    s.digest(); s.pending_ids(); s.step_index; s.state; s.close()

A tenant's calls are serialised by its own lock (the Session also locks itself); different
tenants run in parallel. The model and the embedder are single resources shared by every
tenant: :class:`FairModel` queues calls first-come first-served (a ticket lock), and since a
tenant has at most one call in flight (its lock), the queue takes tenants in turn; a wait
longer than ``queue_timeout_s`` raises :class:`ModelQueueTimeout` (HTTP 504).
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rizz.adapters.models.base import Generation, Message, ModelError, sent_tokens
from rizz.core import Verdict
from rizz.errors import RizzError
from rizz.formats.wording import plural
from rizz.lab.diff import branch_rows as rows_of

__all__ = ["FairModel", "LockedEmbedder", "ModelQueueTimeout", "ReusedId", "TENANT_RE", "Tenants", "UnknownId", "branch_rows"]

#: Tenant names: a path segment, no dots first (no ``..``), at most 64 characters.
TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")

_local = threading.local()  # .tenant: the tenant whose request this thread serves (for metrics)


class ModelQueueTimeout(ModelError, TimeoutError):
    """The shared model stayed busy longer than the queue timeout (seconds)."""


class UnknownId(LookupError, RizzError):
    """A verdict for an id that is not pending in the tenant's session (unknown, expired or folded)."""


class ReusedId(ValueError, RizzError):
    """An answer for an id the tenant's session already answered (pending, folded or expired):
    a retried or duplicated request is refused, never answered a second time (HTTP 409)."""


class FairModel:
    """A backend shared by every tenant: one call at a time, first come first served.

    ``on_call(tenant, generation_or_None, seconds)`` is told about every call (metrics);
    ``queue_timeout_s``: longest wait for the model before :class:`ModelQueueTimeout`
    (None: wait forever). ``count_tokens`` passes through without queueing.
    """

    def __init__(self, backend: Any, *, queue_timeout_s: float | None = None,
                 on_call: Callable[[str, Generation | None, float], None] = lambda t, g, s: None) -> None:
        self.backend = backend
        self.name = backend.name
        self.context_window = backend.context_window
        self.queue_timeout_s = queue_timeout_s
        self.on_call = on_call
        self._cv = threading.Condition()
        self._queue: deque[object] = deque()

    @property
    def temperature(self) -> float:
        return float(getattr(self.backend, "temperature", 0.0))

    @property
    def reasoning_tokens(self) -> int:
        """The backend's thinking allowance (``?reasoning=N``), so prompt budgets leave room."""
        return int(getattr(self.backend, "reasoning_tokens", 0))

    @property
    def request_options(self) -> dict[str, Any] | None:
        """The backend's per-model request fields (Anthropic), recorded in each ``run.json``."""
        opts = getattr(self.backend, "request_options", None)
        return opts if isinstance(opts, dict) else None

    @property
    def waiting(self) -> int:
        """Calls queued or running now."""
        return len(self._queue)

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def count_sent_tokens(self, messages: Sequence[Message], rendering: str) -> int:
        """``messages`` as the backend sends them (:func:`~rizz.adapters.models.base.sent_tokens`)."""
        return sent_tokens(self.backend, messages, rendering)

    def generate(self, messages: Sequence[Message], *, max_tokens: int, stop: Sequence[str] = (), rendering: str = "chat") -> Generation:
        return self._in_turn(lambda: self.backend.generate(messages, max_tokens=max_tokens, stop=stop, rendering=rendering),
                             lambda gen: gen)

    def native(self, request: Callable[[], Any]) -> Any:
        """Run ``request`` (a native tool-calling request of
        :class:`~rizz.engine.native_agent.NativeToolAgent` on :attr:`backend`'s client) in
        the same queue as :meth:`generate`; its ``(response, attempts)``'s ``usage`` (Anthropic
        ``input_tokens``/``output_tokens``, OpenAI ``prompt_tokens``/``completion_tokens``)
        is counted in the metrics. Raises :class:`ModelQueueTimeout` as :meth:`generate` does."""
        return self._in_turn(request, _usage)

    def _in_turn(self, call: Callable[[], Any], usage: Callable[[Any], Any]) -> Any:
        """``call()`` once every earlier call finished (first come, first served); tells
        ``on_call`` (with ``usage(result)``, or None if it raised)."""
        ticket = object()
        tenant = getattr(_local, "tenant", "-")
        t0 = time.perf_counter()
        with self._cv:
            self._queue.append(ticket)
            ok = self._cv.wait_for(lambda: self._queue[0] is ticket, timeout=self.queue_timeout_s)
            if not ok:
                self._queue.remove(ticket)
                self._cv.notify_all()
                raise ModelQueueTimeout(f"the model stayed busy for {self.queue_timeout_s:g} s ({plural(len(self._queue), 'call')} queued)")
        counted = None
        try:
            out = call()
            counted = usage(out)
            return out
        finally:
            with self._cv:
                self._queue.popleft()
                self._cv.notify_all()
            self.on_call(tenant, counted, time.perf_counter() - t0)


def _usage(result: Any) -> Any:
    """``prompt_tokens``/``completion_tokens`` of a native API response (Anthropic or OpenAI),
    given as the agent's request returns it: ``(response, attempts)``; or of the embedded
    model's :class:`~rizz.adapters.models.base.Generation` (its own fields)."""
    resp = result[0] if isinstance(result, tuple) else result
    u = getattr(resp, "usage", resp)
    prompt = getattr(u, "input_tokens", None)
    if prompt is None:
        prompt = getattr(u, "prompt_tokens", 0)
    completion = getattr(u, "output_tokens", None)
    if completion is None:
        completion = getattr(u, "completion_tokens", 0)
    return SimpleNamespace(prompt_tokens=int(prompt or 0), completion_tokens=int(completion or 0))


class LockedEmbedder:
    """An embedder shared by every tenant, one call at a time (``name``, ``dim``, ``embed``)."""

    def __init__(self, embedder: Any) -> None:
        self._e = embedder
        self._lock = threading.Lock()
        self.name = embedder.name

    @property
    def dim(self) -> int:
        return self._e.dim

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:
            return self._e.embed(texts)


def branch_rows(state: Any) -> list[dict[str, Any]]:
    """One row per branch, the columns of ``rizz inspect`` (:func:`rizz.lab.diff.branch_rows`)."""
    return rows_of(state)


def _view(p: Any) -> dict[str, Any]:
    """``{"id", "answer", "prompt_tokens", "branch"}`` of a :class:`~rizz.engine.pending.Pending`."""
    return {"id": p.id, "answer": p.answer, "prompt_tokens": p.prompt_tokens, "branch": p.branch}


class Tenants:
    """One Session per tenant under ``data_dir``, opened lazily; see the module docstring."""

    def __init__(self, data_dir: str | Path, opener: Callable[[Path], Any], *, blank: Callable[[], Any] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.opener = opener
        self.blank = blank  # () -> an in-memory fresh session, for reads of a tenant with no folder yet
        self._blank: Any = None
        self._sessions: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._registry = threading.Lock()

    def _lock(self, tenant: str) -> threading.Lock:
        with self._registry:
            return self._locks.setdefault(tenant, threading.Lock())

    def _session(self, tenant: str) -> Any:  # called with the tenant's lock held
        s = self._sessions.get(tenant)
        if s is None:
            s = self.opener(self.data_dir / tenant)
            self._sessions[tenant] = s
        return s

    def _call(self, tenant: str, fn: Callable[[Any], Any], *, read: bool = False) -> Any:
        """``fn(session)`` under the tenant's lock. A read (``read=True``) of a tenant that has
        no folder and no open session answers from the blank session, creating nothing."""
        if not TENANT_RE.match(tenant):
            raise ValueError(f"tenant {tenant!r}: expected 1-64 letters, digits, '_' or '-', not starting with '_' or '-'")
        with self._lock(tenant):
            _local.tenant = tenant
            try:
                if read and self.blank is not None and tenant not in self._sessions and not (self.data_dir / tenant).exists():
                    with self._registry:
                        if self._blank is None:
                            self._blank = self.blank()
                    return fn(self._blank)
                return fn(self._session(tenant))
            finally:
                _local.tenant = "-"

    def answer(self, tenant: str, element: dict[str, Any]) -> dict[str, Any]:
        """Answer ``element`` in ``tenant``'s session; returns ``{"id", "answer", "prompt_tokens", "branch"}``.

        Raises ReusedId (nothing written) when the session answered this id before."""
        def answer(s: Any) -> dict[str, Any]:
            used = s.used_id(element["id"])
            if used is not None:
                raise ReusedId(f"id {element['id']!r} was already {used}; each id is answered once (a retried request "
                               "is not answered again): send its verdict, or post the element under a new id")
            return _view(s.answer(element))

        return self._call(tenant, answer)

    def verdict(self, tenant: str, item_id: str, reward: float, verifier: str | None,
                correction: str | None = None) -> dict[str, Any]:
        """Fold ``reward`` (with the caller's ``correction``, if any: ``Verdict.correction``) into
        ``item_id``'s pending answer. Raises UnknownId when it is not pending."""
        def fold(s: Any) -> dict[str, Any]:
            if item_id not in s.pending_ids():
                try:  # the session says why (unknown, expired, already folded)
                    s.fold(item_id, Verdict(float(reward), verifier or "external"))
                except ValueError as e:
                    raise UnknownId(str(e)) from None
                raise UnknownId(f"{item_id!r} is not pending")  # pragma: no cover - the session refused nothing
            s.fold(item_id, Verdict(float(reward), verifier or "external", correction=correction))
            return {"id": item_id, "folded": True, "steps": s.step_index, "digest": s.digest()}

        return self._call(tenant, fold)

    def state(self, tenant: str) -> dict[str, Any]:
        """``{"steps", "digest", "branches", "pending"}`` (answers so far, state digest, branch count, pending count)."""
        return self._call(tenant, lambda s: {"steps": s.step_index, "digest": s.digest(), "branches": len(s.state.branches),
                                             "pending": len(s.pending_ids())}, read=True)

    def branches(self, tenant: str) -> list[dict[str, Any]]:
        return self._call(tenant, lambda s: branch_rows(s.state), read=True)

    def pending(self, tenant: str) -> list[str]:
        return self._call(tenant, lambda s: list(s.pending_ids()), read=True)

    def open_tenants(self) -> list[str]:
        with self._registry:
            return sorted(self._sessions)

    def close(self) -> None:
        """Close every session (each snapshots and releases its directory)."""
        for tenant in list(self._sessions):
            with self._lock(tenant):
                s = self._sessions.pop(tenant, None)
                if s is not None:
                    s.close()
