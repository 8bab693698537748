"""The code sandbox contains loops, fork bombs, memory blow-ups, stray writes and network use,
and still tells correct HumanEval code from wrong code."""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from rizz.adapters.verifiers import Isolation, SandboxResult, isolation, run_untrusted, sandbox as sandbox_mod

OS_LEVEL = isolation().network == "netns"
needs_os_level = pytest.mark.skipif(not OS_LEVEL, reason="namespaces/private uid need root on Linux")


def _sandbox_uid_processes(grace_s: float = 2.0) -> list[int]:
    """Live (non-zombie) PIDs under any private sandbox uid, after up to ``grace_s`` seconds
    for SIGKILLed processes to finish exiting. There must be none after a run."""
    lo, hi = sandbox_mod._UID_BASE, sandbox_mod._UID_BASE + sandbox_mod._UID_SPAN
    deadline = time.monotonic() + grace_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
            uid = int(fields["Uid"].split()[0])
            if lo <= uid < hi and not fields["State"].strip().startswith(("Z", "X")):
                found.append(int(entry))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_isolation_on_this_machine() -> None:
    iso = isolation()
    if os.geteuid() == 0 and sys.platform == "linux":
        # CI and developer machines run as root: the OS-level mechanisms must be in force
        assert iso == Isolation("netns", "uid+private-tmp", iso.interpreter)
    assert os.path.exists(iso.interpreter)


def test_ok_program_and_output() -> None:
    r = run_untrusted("print('hi'); import sys; print('err', file=sys.stderr)", timeout_s=5)
    assert r == SandboxResult(True, 0, False, "hi\n", "err\n", "ok")


def test_infinite_loop_is_cut_at_the_wall_limit() -> None:
    start = time.monotonic()
    r = run_untrusted("while True:\n    pass\n", timeout_s=1.0)
    assert time.monotonic() - start < 4.0
    assert (r.passed, r.timed_out, r.returncode, r.reason) == (False, True, None, "timeout after 1 s")


def test_sleeping_child_is_killed_with_the_group() -> None:
    r = run_untrusted("import subprocess\nsubprocess.Popen(['sleep', '30'])\nwhile True: pass\n", timeout_s=1.0)
    assert r.timed_out
    assert _sandbox_uid_processes() == []


@needs_os_level
def test_fork_limit() -> None:
    # forks until refused; RLIMIT_NPROC = 8 on the run's private uid (the parent is one of them)
    program = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
        "print(n)\n"
    )
    r = run_untrusted(program, timeout_s=5, max_procs=8)
    assert r.passed, r.stderr
    assert 1 <= int(r.stdout) <= 7
    assert _sandbox_uid_processes() == []  # the sleeping children were killed by uid


@needs_os_level
def test_fork_bomb_is_contained() -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    start = time.monotonic()
    r = run_untrusted(bomb, timeout_s=1.5, max_procs=16)
    assert time.monotonic() - start < 6.0
    assert r.timed_out and not r.passed
    assert _sandbox_uid_processes() == []


def test_memory_blow_up_fails_cleanly() -> None:
    r = run_untrusted("x = bytearray(1024 ** 3)\nprint('allocated')\n", timeout_s=5, memory_mb=256)
    assert (r.passed, r.timed_out, r.returncode) == (False, False, 1)
    assert r.reason == "exit 1: MemoryError"
    assert "allocated" not in r.stdout
    # a growing list hits the same wall
    r = run_untrusted("a = []\nwhile True:\n    a.append(' ' * 10 ** 6)\n", timeout_s=5, memory_mb=256)
    assert r.reason == "exit 1: MemoryError"


def test_file_size_limit() -> None:
    r = run_untrusted("open('big', 'wb').write(b'x' * (3 * 1024 * 1024))\n", timeout_s=5, max_file_mb=1)
    assert not r.passed
    assert "SIGXFSZ" in r.reason or "File too large" in r.reason


@needs_os_level
def test_writes_stay_inside_the_sandbox() -> None:
    tag = uuid.uuid4().hex
    # (1) a root-owned, world-readable directory outside any temp dir (next to this test)
    outside_dir = Path(tempfile.mkdtemp(prefix="sandbox-outside-", dir=Path(__file__).parent))
    try:
        os.chmod(outside_dir, 0o755)
        existing = outside_dir / "existing.txt"
        existing.write_text("original")
        target = outside_dir / f"new-{tag}.txt"
        # (2) straight into the host's world-writable /tmp
        tmp_target = Path("/tmp") / f"rizz-escape-{tag}.txt"
        program = (
            "import os\n"
            f"for path in ({str(target)!r}, {str(existing)!r}, {str(tmp_target)!r}):\n"
            "    try:\n"
            "        with open(path, 'w') as f:\n"
            "            f.write('escaped')\n"
            "        print('wrote', path)\n"
            "    except OSError as e:\n"
            "        print('refused', type(e).__name__)\n"
            "open('inside.txt', 'w').write('ok')\n"
            "print('inside', open('inside.txt').read())\n"
        )
        r = run_untrusted(program, timeout_s=5)
        assert r.passed, r.stderr
        assert "inside ok" in r.stdout  # its own directory is writable
        assert not target.exists()
        assert existing.read_text() == "original"
        assert not tmp_target.exists()  # /tmp inside was a private tmpfs
        # PermissionError (not its uid's files) — or FileNotFoundError when the checkout itself
        # lies under /tmp, which the sandbox sees as a fresh private tmpfs. Either way refused.
        refused = r.stdout.count("refused PermissionError") + r.stdout.count("refused FileNotFoundError")
        assert refused == 2, r.stdout
    finally:
        for p in outside_dir.iterdir():
            p.unlink()
        outside_dir.rmdir()


def _connect_program(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'leak')\n"
        "    print('connected')\n"
        "except OSError as e:\n"
        "    print('blocked', type(e).__name__)\n"
    )


def _assert_no_connection(run) -> SandboxResult:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.3)
        r = run(_connect_program(listener.getsockname()[1]))
        with pytest.raises(TimeoutError):
            listener.accept()
    assert "connected" not in r.stdout
    assert r.stdout.startswith("blocked")
    return r


def test_network_is_unreachable() -> None:
    r = _assert_no_connection(lambda prog: run_untrusted(prog, timeout_s=5))
    if OS_LEVEL:  # an empty network namespace: loopback is down
        assert r.stdout.strip() in ("blocked OSError", "blocked ConnectionRefusedError")


def test_network_audit_hook_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    # the non-root path: no namespaces, a PEP 578 audit hook refuses sockets before user code runs
    monkeypatch.setattr(sandbox_mod, "isolation", lambda: Isolation("audit-hook", "cwd-only", sys.executable))
    r = _assert_no_connection(lambda prog: run_untrusted(prog, timeout_s=5))
    assert r.stdout.strip() == "blocked PermissionError"
    r = run_untrusted("import subprocess\nsubprocess.run(['true'])\n", timeout_s=5)
    assert "PermissionError: sandbox: subprocess.Popen is not allowed" in r.stderr


# HumanEval/0 (openai/human-eval, MIT): prompt + completion + test + check(entry_point)
_HE_PROMPT = (
    "from typing import List\n\n\n"
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """ Check if any two numbers are closer to each other than threshold. """\n'
)
_HE_TEST = (
    "\n\ndef check(candidate):\n"
    "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
    "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
    "    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True\n"
    "\n\ncheck(has_close_elements)\n"
)
_HE_CANONICAL = (
    "    for idx, elem in enumerate(numbers):\n"
    "        for idx2, elem2 in enumerate(numbers):\n"
    "            if idx != idx2:\n"
    "                distance = abs(elem - elem2)\n"
    "                if distance < threshold:\n"
    "                    return True\n\n"
    "    return False\n"
)


def test_humaneval_right_and_wrong() -> None:
    good = run_untrusted(_HE_PROMPT + _HE_CANONICAL + _HE_TEST, timeout_s=5)
    assert (good.passed, good.returncode, good.reason) == (True, 0, "ok")
    bad = run_untrusted(_HE_PROMPT + "    return True\n" + _HE_TEST, timeout_s=5)
    assert (bad.passed, bad.returncode, bad.reason) == (False, 1, "exit 1: AssertionError")


def test_bad_limits_raise() -> None:
    with pytest.raises(ValueError, match="positive"):
        run_untrusted("pass", timeout_s=0)
