"""Suite-wide guard: Ctrl-C stays deliverable to the children the tests start.

An ignored or blocked SIGINT is inherited through fork and exec (POSIX), and a Python child
started with SIGINT ignored never raises KeyboardInterrupt. A shell without job control starts
a background job (``bash .ci/run &``, ``make test &`` from a script) with SIGINT ignored, so
pytest and every child it starts inherit it: twice a fresh clone's full suite run that way hung
in ``tests/shell/test_progress.py``'s Ctrl-C test (330 s, then a failure), which passes in the
foreground. Reproduced without this file (``bash -c 'pytest --noconftest -k ctrl_c_before
tests/shell/test_progress.py & wait'`` fails after 331 s) and not with it (passes in 32 s).
A test can leave SIGINT ignored or blocked too (``tests/shell/test_resume_kill.py`` was hit
so once). The disposition is read from the kernel (``/proc/self/status``, ``SigIgn``/``SigBlk``),
since a C library's ``sigaction`` does not show in ``signal.getsignal``. At the start and after
each test the guard makes SIGINT deliverable again and names what left it so in the session's
summary.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

_LEAKS: list[str] = []
_SIGINT_BIT = 1 << (signal.SIGINT - 1)


def _sigint_state() -> tuple[bool, bool]:
    """(ignored, blocked) for SIGINT in this process's main thread, as the kernel has them."""
    fields = dict(line.split(":\t", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":\t" in line)
    return bool(int(fields["SigIgn"], 16) & _SIGINT_BIT), bool(int(fields["SigBlk"], 16) & _SIGINT_BIT)


def _make_deliverable(who: str) -> None:
    ignored, blocked = _sigint_state()
    if ignored or blocked:
        what = " and ".join(w for w, on in (("ignored", ignored), ("blocked", blocked)) if on)
        _LEAKS.append(f"{who}: SIGINT {what}; put back")
        if ignored:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def pytest_configure(config):
    if Path("/proc/self/status").exists():  # Linux; elsewhere there is nothing to read
        _make_deliverable("pytest started with it so (a shell without job control ignores it in '&' jobs)")


@pytest.fixture(autouse=True)
def _sigint_stays_deliverable(request):
    yield
    if Path("/proc/self/status").exists():
        _make_deliverable(request.node.nodeid)


def pytest_terminal_summary(terminalreporter):
    if _LEAKS:
        terminalreporter.section("SIGINT left undeliverable (restored after each)")
        for line in _LEAKS:
            terminalreporter.write_line(line)
