"""A small ASGI helper shared by the two in-process HTTP layers (``rizz serve`` and the peers'
llama.cpp server): hand an app a request body that a middleware has already read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["replay_body"]


def replay_body(receive: Callable[[], Awaitable[dict]], body: bytes) -> Callable[[], Awaitable[dict]]:
    """An ASGI ``receive`` that first yields ``body`` as the whole request, then defers to
    ``receive`` (for the disconnect message)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
