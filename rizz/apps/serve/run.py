"""Building and running ``rizz serve`` (the CLI's entry; tests and benchmarks build it the same way)."""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rizz.adapters.embedder import Embedder
from rizz.adapters.models.cache import CachedModel, ResponseCache
from rizz.apps.serve.app import MAX_BODY_BYTES, Metrics, create_app, load_keys
from rizz.apps.serve.tenants import FairModel, LockedEmbedder, Tenants
from rizz.core import Policy
from rizz.extras import extra_needed
from rizz.formats.policy_file import load_policy
from rizz.formats.wording import plural

__all__ = ["LOOPBACK", "build", "is_loopback", "live_opener", "serve"]

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def live_opener(policy: Any, model: FairModel, embedder: Any, rendering: str | None = None) -> Callable[[Path], Any]:
    """``path -> rizz.Session.open(path, policy, model, rendering=rendering)``: each tenant's
    responses cached in its folder (``rendering`` None: the model's default, as ``rizz run``'s);
    a refusal in the command line's terms (``words="cli"``: ``--model``, and ``--out``, which
    the server's errors name as its ``--data`` folder).
    """
    # lazy: Session imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz serve`'s checks do not need
    from rizz.engine.session import Session

    def open_(path: Path) -> Any:
        path.mkdir(parents=True, exist_ok=True)
        return Session.open(path, policy=policy, model=CachedModel(model, ResponseCache(path / "responses.sqlite")), embedder=embedder,
                            rendering=rendering, words="cli")

    return open_


def _blank_session(policy: Any, model: FairModel, embedder: Any, rendering: str | None = None) -> Any:
    """A fresh in-memory Session of ``policy``: what a tenant with no folder reads as (steps 0,
    the initial state's digest, no branches, nothing pending)."""
    # lazy: Session imports the verifiers (rouge-score pulls in nltk and scipy, ~1 s), which `rizz --help` and `rizz serve`'s checks do not need
    from rizz.engine.session import Session

    return Session(policy if isinstance(policy, Policy) else load_policy(policy), model, embedder, rendering=rendering)


def build(data: str | Path, policy: Any, backend: Any, *, embedder: Any = None, keys_file: str | None = None,
          queue_timeout_s: float | None = 300.0, opener: Callable[[Path], Any] | None = None,
          blank: Callable[[], Any] | None = None, max_body_bytes: int = MAX_BODY_BYTES,
          rendering: str | None = None) -> tuple[Any, Tenants, FairModel]:
    """``(app, tenants, fair_model)`` for ``data`` (one folder per tenant), ``policy`` (a Policy),
    ``backend`` (a ModelBackend, shared fairly by all tenants), ``rendering`` (raw / chat /
    chat-turns; None: the backend's default, :func:`rizz.engine.answering.default_rendering`).

    ``opener`` replaces :func:`live_opener` and ``blank`` the in-memory fresh session that
    answers reads (``GET``) of a tenant with no folder yet, so a read creates nothing (tests).
    Raises ValueError for a bad keys file, RuntimeError without the live Session API.
    """
    keys = load_keys(keys_file) if keys_file else None
    metrics = Metrics()
    fair = FairModel(backend, queue_timeout_s=queue_timeout_s, on_call=metrics.on_model_call)
    if opener is None:
        if embedder is None:
            embedder = Embedder()
        embedder.embed(["warm-up"])  # load the weights now, not inside the first requests
        locked = LockedEmbedder(embedder)
        opener = live_opener(policy, fair, locked, rendering)
        if blank is None:
            blank = partial(_blank_session, policy, fair, locked, rendering)
    tenants = Tenants(data, opener, blank=blank)
    return create_app(tenants, keys=keys, metrics=metrics, model=fair, max_body_bytes=max_body_bytes), tenants, fair


def serve(data: str | Path, policy: Any, backend: Any, *, host: str = LOOPBACK, port: int = 8000, keys_file: str | None = None,
          queue_timeout_s: float | None = 300.0, embedder: Any = None, opener: Callable[[Path], Any] | None = None,
          say: Callable[[str], None] = lambda m: print(m, file=sys.stderr), max_body_bytes: int = MAX_BODY_BYTES,
          rendering: str | None = None) -> None:
    """Serve until interrupted; every tenant's session is closed (snapshotted) on the way out.

    Without ``keys_file`` only a loopback ``host`` is accepted (ValueError otherwise).
    """
    with extra_needed("serve", "rizz serve"):
        import uvicorn

    if keys_file is None and not is_loopback(host):
        raise ValueError(f"--host {host}: without --keys rizz serve listens on loopback only (127.0.0.1, ::1, localhost)")
    app, tenants, _ = build(data, policy, backend, embedder=embedder, keys_file=keys_file, queue_timeout_s=queue_timeout_s, opener=opener,
                            max_body_bytes=max_body_bytes, rendering=rendering)
    if keys_file is None:
        say(f"rizz serve: no --keys, so no authentication: listening on loopback only ({host}:{port}); "
            "every local user can reach every tenant")
    else:
        say(f"rizz serve: API keys from {keys_file} ({plural(len(set(load_keys(keys_file).values())), 'tenant')}); listening on {host}:{port}")
    say(f"rizz serve: tenants under {Path(data).resolve()}/<tenant>/, OpenAPI page at http://{host}:{port}/docs")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        tenants.close()
