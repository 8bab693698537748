"""``rizz serve``: one durable live Session per tenant behind FastAPI (docs/serve.md).

:mod:`rizz.apps.serve.tenants` is the one adapter to the Session API; :mod:`rizz.apps.serve.app`
the HTTP layer; :func:`serve` builds both for the CLI. Needs the ``serve`` extra
(``pip install 'rizz[serve]'``: fastapi, uvicorn, prometheus-client).
"""

from __future__ import annotations

from rizz.apps.serve.run import LOOPBACK, build, serve

__all__ = ["LOOPBACK", "build", "serve"]
