"""Fixtures for the shell tests: a scripted fake backend, the embedded model, local HTTP servers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from stubs import StubBackend

from rizz.adapters.models import Generation, Message


class FakeModel(StubBackend):
    """A tiny backend satisfying ``ModelBackend``: replies from a script, records calls.

    ``replies`` is a list of strings served in order (the last one repeats) or a callable
    ``messages -> str``. Reports every message's words as prompt tokens, the reply's words as
    completion tokens and 1 ms of latency.
    """

    name = "fake:scripted"
    latency_s = 0.001

    def __init__(self, replies: Sequence[str] | Callable[[Sequence[Message]], str]) -> None:
        self._replies = replies
        self.calls: list[dict[str, Any]] = []

    def generate(self, messages, *, max_tokens, stop=(), rendering="chat") -> Generation:
        self.calls.append(
            dict(messages=list(messages), max_tokens=max_tokens, stop=tuple(stop),
                 rendering=rendering)
        )
        return super().generate(messages, max_tokens=max_tokens, stop=stop, rendering=rendering)

    def reply(self, messages) -> str:
        if callable(self._replies):
            return self._replies(messages)
        return self._replies[min(len(self.calls) - 1, len(self._replies) - 1)]

    def usage(self, messages, text: str) -> tuple[int, int]:
        return sum(self.count_tokens(m.content) for m in messages), self.count_tokens(text)


@pytest.fixture
def fake_model() -> Callable[..., FakeModel]:
    """Factory: ``fake_model(["reply 1", "reply 2"])`` or ``fake_model(lambda msgs: ...)``."""
    return FakeModel


@pytest.fixture
def cli_stub(monkeypatch, fake_model) -> None:
    """The ``rizz`` command with a fake model answering "2", the hash embedder, and no model
    spec check: for CLI tests of what surrounds the model."""
    from stubs import HashEmbedder

    monkeypatch.setattr("rizz.apps.cli.load_model", lambda spec, **kw: fake_model(lambda msgs: "2"))
    monkeypatch.setattr("rizz.apps.cli.Embedder", HashEmbedder)
    monkeypatch.setattr("rizz.apps.cli._check_model", lambda model, user_model: None)


@pytest.fixture(scope="session")
def embedded_model():
    """The shipped SmolLM2-135M-Instruct Q4_1, loaded once per test session.

    One thread: on a CPU shared with other busy processes llama.cpp's two OpenMP threads
    spin-wait and run 5-20x slower (see ``rizz/adapters/models/embedded.py``); the greedy text
    does not depend on the thread count (``test_gguf_spec_runs_any_file`` compares them).
    """
    from rizz.adapters.models.embedded import EmbeddedModel

    return EmbeddedModel(shipped="smollm2-135m-instruct", n_threads=1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """Function returning a currently free TCP port on 127.0.0.1."""
    return _free_port


class ScriptedHTTPServer:
    """A stdlib HTTP server on 127.0.0.1 in a thread; ``route(method, path, body)`` answers.

    ``route`` returns ``(status, json_body, headers)``. Every request is recorded in
    ``requests`` as ``dict(method, path, headers, body)`` (body parsed as JSON when it is).
    """

    def __init__(self, route: Callable[[str, str, Any], tuple[int, Any, dict[str, str]]]) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                outer.requests.append(
                    dict(method=self.command, path=self.path,
                         headers={k.lower(): v for k, v in self.headers.items()}, body=body)
                )
                status, payload, headers = route(self.command, self.path, body)
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> ScriptedHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def http_server() -> Iterator[Callable[..., ScriptedHTTPServer]]:
    """Factory for :class:`ScriptedHTTPServer`; every server made is stopped after the test."""
    made: list[ScriptedHTTPServer] = []

    def make(route):
        srv = ScriptedHTTPServer(route).__enter__()
        made.append(srv)
        return srv

    yield make
    for srv in made:
        srv.__exit__(None, None, None)


@pytest.fixture
def log_reads(monkeypatch) -> list[int]:
    """Grows by one each time a RunDir's log.jsonl is read (``RunDir.records``)."""
    from rizz.store.runlog import RunDir

    reads: list[int] = []
    real = RunDir.records

    def records(self):
        reads.append(1)
        return real(self)

    monkeypatch.setattr(RunDir, "records", records)
    return reads
