"""``rizz serve``: the HTTP layer (FastAPI) over :class:`~rizz.apps.serve.tenants.Tenants`.

Endpoints (CONTRACT "Additions"; OpenAPI page at ``/docs``)::

    POST /v1/tenants/{tenant}/answer    stream-format element -> {"id", "answer", "prompt_tokens", "branch"}
    POST /v1/tenants/{tenant}/verdict   {"id", "reward", "verifier"?} -> {"id", "folded", "steps", "digest"}
    GET  /v1/tenants/{tenant}/state     {"steps", "digest", "branches", "pending"}
    GET  /v1/tenants/{tenant}/branches  the rows of `rizz inspect`
    GET  /v1/tenants/{tenant}/pending   {"pending": [ids]}
    GET  /healthz                       {"ok": true, "tenants_open": n}
    GET  /metrics                       Prometheus text: requests, latency histograms, model calls and tokens per tenant
                                        (the operator's view: with keys, any valid key reads every tenant's counters;
                                        a request that fails authentication is counted under tenant "-")

Errors are JSON ``{"error": message, "field": "$.path" | null}``:

* 401 no or unknown ``Authorization: Bearer KEY`` (when keys are configured; also for /metrics;
  the scheme's case does not matter); 403 a valid key of another tenant — the session of the
  tenant in the path is not touched;
* 413 a request body over ``max_body_bytes`` (default :data:`MAX_BODY_BYTES`), read no further;
* 422 bad input (the field's path, as ``rizz run`` names it for a stream line), nothing changed;
* 404 a verdict for an id that is not pending (unknown, expired or already folded), or a path
  that is no endpoint; 405 a method the endpoint does not take (the ``Allow`` header lists them);
* 409 an answer for an id the tenant already answered (pending, folded or expired: a retried
  request is refused, not answered twice; ``field`` ``$.id``), or the tenant's folder was started
  with another policy/model; 503 it is held by another process;
* 502 the model failed (the reason); 504 the model timed out or its queue did;
* 500 anything else — the server logs it and goes on (it never dies on a request).
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request, VerdictIn) at run time.
import hmac
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from rizz.adapters.asgi import replay_body
from rizz.adapters.models.base import ModelError
from rizz.apps.serve.tenants import TENANT_RE, FairModel, ModelQueueTimeout, ReusedId, Tenants, UnknownId
from rizz.extras import extra_needed
from rizz.formats.streams import element_from_json
from rizz.store.runlog import RunDirBusy, RunDirMismatch
from rizz.store.runstore import RunStoreError

__all__ = ["MAX_BODY_BYTES", "create_app", "Metrics"]

#: Largest request body accepted (bytes): 1 MiB, ≈ 46× the longest line of the shipped data
#: (22,659 bytes); a larger body is answered 413 before it is read on (``rizz serve --max-body-kib``).
MAX_BODY_BYTES = 1 << 20

log = logging.getLogger("rizz.serve")


class Metrics:
    """Prometheus metrics of one server (own registry, so several apps in one process stay apart)."""

    def __init__(self) -> None:
        with extra_needed("serve", "rizz serve's metrics"):
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("rizz_requests", "HTTP requests by tenant, endpoint and status", ["tenant", "endpoint", "status"],
                                registry=self.registry)
        self.latency = Histogram("rizz_request_seconds", "request latency (seconds) by endpoint", ["endpoint"], registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.model_calls = Counter("rizz_model_calls", "model calls by tenant and outcome", ["tenant", "outcome"], registry=self.registry)
        self.model_tokens = Counter("rizz_model_tokens", "model tokens by tenant and direction", ["tenant", "direction"],
                                    registry=self.registry)
        self.model_seconds = Histogram("rizz_model_call_seconds", "model call time incl. queue wait (seconds)", ["tenant"],
                                       registry=self.registry, buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120))
        self.queue = Gauge("rizz_model_queue", "model calls queued or running", registry=self.registry)

    def on_model_call(self, tenant: str, gen: Any, seconds: float) -> None:
        """``FairModel.on_call`` hook: count the call and its tokens for ``tenant``."""
        self.model_calls.labels(tenant, "ok" if gen is not None else "error").inc()
        self.model_seconds.labels(tenant).observe(seconds)
        if gen is not None:
            self.model_tokens.labels(tenant, "prompt").inc(gen.prompt_tokens)
            self.model_tokens.labels(tenant, "completion").inc(gen.completion_tokens)


def load_keys(path: str) -> dict[str, str]:
    """Read a keys file: YAML mapping tenant -> key or list of keys. Returns ``{key: tenant}``.

    Raises ValueError naming the file and the ``$.path`` of a bad entry (a key never appears
    in a message).
    """
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"--keys {path}: cannot read ({type(e).__name__})") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"--keys {path}: $: expected a mapping of tenant name to key (or list of keys)")
    out: dict[str, str] = {}
    for tenant, keys in data.items():
        if not isinstance(tenant, str) or not TENANT_RE.match(tenant):
            raise ValueError(f"--keys {path}: $.{tenant}: not a valid tenant name (1-64 letters, digits, '_', '-')")
        keys = [keys] if isinstance(keys, str) else keys
        if not isinstance(keys, list) or not keys:
            raise ValueError(f"--keys {path}: $.{tenant}: expected a key or a non-empty list of keys")
        for i, k in enumerate(keys):
            if not isinstance(k, str) or len(k) < 16:
                raise ValueError(f"--keys {path}: $.{tenant}[{i}]: expected a string of at least 16 characters")
            if k in out and out[k] != tenant:
                raise ValueError(f"--keys {path}: $.{tenant}[{i}]: the same key is also {out[k]!r}'s")
            out[k] = tenant
    return out


def _key_tenant(keys: dict[str, str], header: str | None) -> str | None:
    """The tenant whose key is in ``Authorization: Bearer KEY`` (constant-time compare), or None."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():  # RFC 9110 §11.1: the scheme is case-insensitive
        return None
    given = token.strip().encode()
    found = None
    for k, t in keys.items():
        if hmac.compare_digest(k.encode(), given):
            found = t
    return found


#: The endpoint label of the request counter: these, else "other" (an unknown path adds no series).
ENDPOINTS = ("answer", "verdict", "state", "branches", "pending", "/healthz", "/metrics", "/docs", "/openapi.json")


def _endpoint_label(endpoint: str) -> str:
    return endpoint if endpoint in ENDPOINTS else "other"


def _field_of(message: str) -> str | None:
    """``$.path`` from a stream-format message ``field 'metadata.shape': ...``."""
    m = re.search(r"field '([^']+)'", message)
    return f"$.{m.group(1)}" if m else None


class _BodyLimit:
    """ASGI middleware: answer 413 to a request whose body is over ``max_bytes`` (by its
    Content-Length, or by counting a body sent without one), before the app reads it."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, int(max_bytes)

    async def _too_large(self, send: Any) -> None:
        import json

        body = json.dumps({"error": f"request body over {self.max_bytes} bytes (rizz serve --max-body-kib)", "field": "$"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.max_bytes:
                await self._too_large(send)
                return
            await self.app(scope, receive, send)
            return
        chunks, size = [], 0  # no Content-Length (chunked): read up to the limit, then replay
        while True:
            msg = await receive()
            if msg.get("type") != "http.request":
                break
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._too_large(send)
                return
            if not msg.get("more_body"):
                break
        await self.app(scope, replay_body(receive, b"".join(chunks)), send)


def create_app(tenants: Tenants, *, keys: dict[str, str] | None = None, metrics: Metrics | None = None,
               model: FairModel | None = None, title: str = "rizz serve", max_body_bytes: int = MAX_BODY_BYTES) -> Any:
    """The FastAPI app. ``keys``: ``{key: tenant}`` (:func:`load_keys`) or None (no auth: loopback only,
    enforced by the CLI). ``model``: the shared FairModel (for the queue gauge). ``max_body_bytes``:
    larger request bodies get 413."""
    with extra_needed("serve", "rizz serve"):
        from fastapi import FastAPI, Request
        from fastapi.exceptions import RequestValidationError
        from fastapi.responses import JSONResponse, PlainTextResponse
        from pydantic import BaseModel, Field
        from starlette.exceptions import HTTPException

    metrics = metrics or Metrics()
    app = FastAPI(title=title, description="A RIZZ live session per tenant (rizz/apps/serve/app.py).", version="1")
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes)

    class VerdictIn(BaseModel):
        id: str = Field(..., min_length=1, description="the id of an answered element")
        reward: float = Field(..., ge=0.0, le=1.0, allow_inf_nan=False, description="reward in [0, 1]")
        verifier: str | None = Field(None, description="name recorded with the verdict (default 'external')")
        correction: str | None = Field(None, min_length=1,
                                       description="the right answer, when the caller knows it (used under write.corrections)")
        model_config = {"extra": "forbid"}

    def err(status: int, message: str, field: str | None = None) -> JSONResponse:
        return JSONResponse({"error": message, "field": field}, status_code=status)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:  # 404, 405: the same shape as every error
        allowed = (exc.headers or {}).get("Allow")
        resp = err(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}" + (f" (allowed: {allowed})" if allowed else ""))
        resp.headers.update(exc.headers or {})
        return resp

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        e = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        return err(422, f"{e.get('msg')}", "$" + "".join(f".{x}" for x in loc) if loc else "$")

    @app.middleware("http")
    async def _observe(request: Request, call_next: Callable) -> Any:
        t0 = time.perf_counter()
        route = request.url.path
        parts = route.strip("/").split("/")
        tenant = parts[2] if len(parts) >= 4 and parts[:2] == ["v1", "tenants"] else "-"
        endpoint = parts[3] if tenant != "-" else route
        if keys is not None and route not in ("/healthz", "/docs", "/openapi.json", "/docs/oauth2-redirect"):
            who = _key_tenant(keys, request.headers.get("authorization"))
            if who is None:
                resp = err(401, "missing or unknown API key (send Authorization: Bearer KEY)")
                resp.headers["WWW-Authenticate"] = "Bearer"
            elif tenant != "-" and who != tenant:
                resp = err(403, f"this key belongs to another tenant, not to {tenant!r}")
            else:
                who = "ok"
            if who != "ok":  # counted without the path's tenant: an unauthenticated caller adds no series
                metrics.requests.labels("-", _endpoint_label(endpoint), str(resp.status_code)).inc()
                return resp
        try:
            resp = await call_next(request)
        except Exception:  # noqa: BLE001 - the server never dies on a request
            log.exception("unhandled error on %s %s", request.method, route)
            resp = err(500, "internal error (logged by the server)")
        metrics.latency.labels(_endpoint_label(endpoint)).observe(time.perf_counter() - t0)
        metrics.requests.labels(tenant if TENANT_RE.match(tenant) else "-", _endpoint_label(endpoint), str(resp.status_code)).inc()
        return resp

    def guarded(fn: Callable[[], Any]) -> Any:
        """Run a tenant call; map the library's errors to HTTP statuses (module docstring)."""
        try:
            return fn()
        except UnknownId as e:
            return err(404, str(e), "$.id")
        except ReusedId as e:
            return err(409, str(e), "$.id")
        except ModelQueueTimeout as e:
            return err(504, f"model timeout: {e}")
        except TimeoutError as e:
            return err(504, f"model timeout: {e}")
        except ModelError as e:
            if "timeout" in type(e).__name__.lower() or "timed out" in str(e).lower():
                return err(504, f"model timeout: {e}")
            return err(502, f"model failed: {e}")
        except RunDirMismatch as e:  # worded for serve: its folders come from --data (rizz run's text names --out)
            return err(409, e.worded("serve"))
        except RunDirBusy as e:
            return err(503, e.worded("serve"))
        except RunStoreError as e:  # the tenant's store.sqlite cannot be read or written: nothing of the request was folded
            return err(503, e.worded("serve"))
        except ValueError as e:  # refused input (SessionError is a ValueError); nothing changed
            return err(422, str(e), _field_of(str(e)))
        except Exception as e:  # noqa: BLE001
            if "timeout" in type(e).__name__.lower():
                return err(504, f"model timeout: {type(e).__name__}: {e}")
            log.exception("unhandled error")
            return err(500, f"internal error: {type(e).__name__}")

    def check_element(tenant: str, body: Any) -> JSONResponse | None:
        if not isinstance(body, dict):
            return err(422, "expected a JSON object: a stream-format element (specs/stream-format.md)", "$")
        try:
            element_from_json(body)
        except ValueError as e:
            return err(422, str(e), _field_of(str(e)))
        meta = body.get("metadata") or {}
        if meta.get("tenant") not in (None, tenant):
            return err(422, f"metadata.tenant {meta.get('tenant')!r} differs from the path's tenant {tenant!r}", "$.metadata.tenant")
        return None

    @app.post("/v1/tenants/{tenant}/answer", summary="Answer a stream-format element")
    async def answer(tenant: str, request: Request) -> Any:
        import anyio

        try:
            body = await request.json()
        except ValueError:
            return err(422, "body is not JSON", "$")
        bad = check_element(tenant, body) if TENANT_RE.match(tenant) else err(422, f"bad tenant name {tenant!r}", "$.tenant")
        if bad is not None:
            return bad
        return await anyio.to_thread.run_sync(lambda: guarded(lambda: tenants.answer(tenant, body)))

    @app.post("/v1/tenants/{tenant}/verdict", summary="Fold the verdict of a pending answer, in any order",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": VerdictIn.model_json_schema()}}}})
    async def verdict(tenant: str, request: Request) -> Any:
        import anyio
        from pydantic import ValidationError

        try:  # read as JSON whatever the Content-Type (as /answer does; curl -d sends form-urlencoded)
            raw = await request.json()
        except ValueError:
            return err(422, "body is not JSON", "$")
        if not isinstance(raw, dict):
            return err(422, "expected a JSON object {\"id\", \"reward\", \"verifier\"?, \"correction\"?}", "$")
        try:
            body = VerdictIn.model_validate(raw, strict=True)  # strict: "1" or true is not a reward
        except ValidationError as e:
            first = e.errors()[0]
            loc = "".join(f".{x}" for x in first.get("loc", ()))
            return err(422, f"field '{loc[1:] or '$'}': {first.get('msg')}", "$" + loc)
        if not TENANT_RE.match(tenant):
            return err(422, f"bad tenant name {tenant!r}", "$.tenant")
        return await anyio.to_thread.run_sync(lambda: guarded(lambda: tenants.verdict(tenant, body.id, body.reward, body.verifier, body.correction)))

    def reader(fn: Callable[[str], Any]) -> Callable:
        async def read(tenant: str) -> Any:
            import anyio

            if not TENANT_RE.match(tenant):
                return err(422, f"bad tenant name {tenant!r}", "$.tenant")
            return await anyio.to_thread.run_sync(lambda: guarded(lambda: fn(tenant)))
        return read

    app.get("/v1/tenants/{tenant}/state", summary="steps, digest, branches, pending")(reader(tenants.state))
    app.get("/v1/tenants/{tenant}/branches", summary="what `rizz inspect` shows")(reader(tenants.branches))
    app.get("/v1/tenants/{tenant}/pending", summary="ids waiting for a verdict")(reader(lambda t: {"pending": tenants.pending(t)}))

    @app.get("/healthz")
    async def healthz() -> Any:
        return {"ok": True, "tenants_open": len(tenants.open_tenants())}

    @app.get("/metrics")
    async def prom() -> Any:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if model is not None:
            metrics.queue.set(model.waiting)
        return PlainTextResponse(generate_latest(metrics.registry).decode(), media_type=CONTENT_TYPE_LATEST)

    return app
