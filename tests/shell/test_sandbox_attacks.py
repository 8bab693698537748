"""Issue #12 §7: hostile programs through the ``code_exec`` verifier.

Each program is a HumanEval-style candidate ``solve()`` whose test wants ``42``; the attack
sits in the candidate (at import time or in ``solve``). Every one must end with reward 0, no
effect outside the sandbox, and within a bounded time (wall limit + teardown).
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
import uuid
from pathlib import Path

import pytest
from test_sandbox import _sandbox_uid_processes  # noqa: E402 (pytest puts tests/shell on sys.path)

from rizz.adapters.verifiers import isolation, verify

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(isolation().network != "netns", reason="namespaces/private uid need root on Linux")]

ROOT = Path(__file__).resolve().parents[2]
TAG = uuid.uuid4().hex[:12]
TIMEOUT_S = 3.0
BOUND_S = TIMEOUT_S + 12.0  # wall limit + process teardown + interpreter start on a busy machine
TESTS = "def check(candidate):\n    assert candidate() == 42\n"


def score(code: str) -> tuple[float, str, float]:
    t0 = time.monotonic()
    res = verify("code_exec", code, "", metadata={"tests": TESTS, "entry_point": "solve", "timeout_s": TIMEOUT_S})
    return res.reward, res.detail, time.monotonic() - t0


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    """Things outside the sandbox that an attack would touch: files, a server, a socket."""
    t: dict = {}
    t["project_file"] = ROOT / "README.md"
    t["project_write"] = ROOT / f"pwned-{TAG}.txt"
    run_dir = ROOT / f".rundir-{TAG}"
    run_dir.mkdir()
    (run_dir / "log.jsonl").write_text('{"step": 0}\n')
    t["run_log"] = run_dir / "log.jsonl"
    secret_dir = Path("/var/lib") / f"rizz-secret-{TAG}"  # visible to the sandbox, owned by another user
    secret_dir.mkdir(mode=0o755)
    secret = secret_dir / "secret.txt"
    secret.write_text("42")
    os.chown(secret, 4242, 4242)
    os.chmod(secret, 0o600)
    t["other_user_file"] = secret
    t["tmp_outside"] = Path("/tmp") / f"rizz-out-{TAG}"
    t["shm_outside"] = Path("/dev/shm") / f"rizz-out-{TAG}"
    # a live TCP server on the host's loopback, counting connections
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    hits: list[bytes] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            hits.append(c.recv(100))
            c.sendall(b"42")
            c.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    t["port"], t["hits"] = srv.getsockname()[1], hits
    # a world-writable UNIX socket in /run and an abstract one
    unix_path = f"/run/rizz-{TAG}.sock"
    us = socket.socket(socket.AF_UNIX)
    us.bind(unix_path)
    os.chmod(unix_path, 0o777)
    us.listen(4)
    us.settimeout(0.2)
    ab = socket.socket(socket.AF_UNIX)
    ab.bind(f"\0rizz-{TAG}")
    ab.listen(4)
    ab.settimeout(0.2)
    t["unix_path"], t["unix"], t["abstract"] = unix_path, us, ab
    yield t
    stop.set()
    th.join(timeout=2)
    for s in (srv, us, ab):
        s.close()
    os.unlink(unix_path)
    for p in (t["project_write"], t["tmp_outside"], t["shm_outside"], secret):
        if p.exists():
            p.unlink()
    secret_dir.rmdir()
    for p in run_dir.iterdir():
        p.unlink()
    run_dir.rmdir()


def _accepted(sock: socket.socket) -> bool:
    try:
        c, _ = sock.accept()
        c.close()
        return True
    except OSError:
        return False


ATTACKS: dict[str, str] = {
    "fork bomb": "import os\ndef solve():\n    while True:\n        os.fork()\n",
    "fork bomb with sleeping children": (
        "import os, time\ndef solve():\n    for _ in range(10000):\n        if os.fork() == 0:\n            time.sleep(60)\n    return 42\n"),
    "infinite loop": "def solve():\n    while True:\n        pass\n",
    "infinite loop ignoring signals": (
        "import signal\nfor s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\ndef solve():\n    while True:\n        pass\n"),
    "10 GB allocation": "def solve():\n    b = bytearray(10 * 1024 ** 3)\n    return 42\n",
    "memory creep": "def solve():\n    xs = []\n    while True:\n        xs.append(bytearray(64 * 1024 ** 2))\n",
    "write into the project": "def solve():\n    open({project_write!r}, 'w').write('x')\n    return 42\n",
    "overwrite a run log": "def solve():\n    open({run_log!r}, 'w').write('corrupt')\n    return 42\n",
    "write /etc": "def solve():\n    open('/etc/rizz-pwned-{tag}', 'w').write('x')\n    return 42\n",
    "write host /tmp and /dev/shm then prove it": (
        "import os\ndef solve():\n    open({tmp_outside!r}, 'w').write('x')\n    open({shm_outside!r}, 'w').write('x')\n"
        "    return 42 if os.stat('/tmp').st_dev == os.stat('/').st_dev else 0\n"),
    "read the project's files": "def solve():\n    return 42 if 'rizz' in open({project_file!r}).read() else 0\n",
    "read another user's file": "def solve():\n    return int(open({other_user_file!r}).read())\n",
    "read /etc/shadow": "def solve():\n    open('/etc/shadow').read()\n    return 42\n",
    "read the parent's environment": (
        "import os\ndef solve():\n    open(f'/proc/{{os.getppid()}}/environ').read()\n    return 42\n"),
    "read pid 1's environment": "def solve():\n    open('/proc/1/environ').read()\n    return 42\n",
    "read pid 1's memory map": "def solve():\n    open('/proc/1/maps').read()\n    return 42\n",
    "connect to a live server on 127.0.0.1": (
        "import socket\ndef solve():\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "    s.sendall(b'leak')\n    return int(s.recv(10))\n"),
    "connect to a host UNIX socket": (
        "import socket\ndef solve():\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({unix_path!r})\n    return 42\n"),
    "connect to an abstract UNIX socket": (
        "import socket\ndef solve():\n    s = socket.socket(socket.AF_UNIX)\n    s.connect('\\0rizz-{tag}')\n    return 42\n"),
    "signal the parent": "import os, signal\ndef solve():\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 42\n",
    "signal every process": (  # kill(-1) spares the caller: it passes only if the parent died
        "import os, signal, time\ndef solve():\n    parent = os.getppid()\n    os.kill(-1, signal.SIGKILL)\n"
        "    time.sleep(0.5)\n    return 42 if os.getppid() != parent else 0\n"),
    "100 MB of stdout": "import sys\ndef solve():\n    sys.stdout.write('x' * (100 * 1024 ** 2))\n    return 42\n",
    "children left running": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\n    os._exit(0)\n"
        "def solve():\n    raise SystemExit(0)\n"),
    "exit 0 before the tests": "import os\nos._exit(0)\ndef solve():\n    return 0\n",
    "sys.exit(0) inside the candidate": "import sys\ndef solve():\n    sys.exit(0)\n",
    "ctypes: setuid(0) back to root": (
        "import ctypes\ndef solve():\n    libc = ctypes.CDLL(None)\n    assert libc.setuid(0) == 0\n    return 42\n"),
    "ctypes: unshare a user namespace": (
        "import ctypes\ndef solve():\n    libc = ctypes.CDLL(None)\n    assert libc.unshare(0x10000000) == 0\n    return 42\n"),
    "/proc: write the parent's memory": (
        "import os\ndef solve():\n    f = open(f'/proc/{{os.getppid()}}/mem', 'r+b')\n    return 42\n"),
    "/proc: ptrace-free peek via /proc/self/root escape": (
        "import os\ndef solve():\n    return 42 if os.path.exists('/proc/1/root{project_file}') else 0\n"),
    "symlink to the project": (
        "import os\ndef solve():\n    os.symlink({project_file!r}, 'link')\n    return 42 if open('link').read() else 0\n"),
}


def test_at_least_twenty_attacks():
    assert len(ATTACKS) >= 20


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_program_scores_zero_with_no_effect_outside(name, targets):
    code = ATTACKS[name].format(tag=TAG, **{k: (str(v) if isinstance(v, Path) else v) for k, v in targets.items()
                                            if k in ("project_write", "run_log", "tmp_outside", "shm_outside",
                                                     "project_file", "other_user_file", "port", "unix_path")})
    before_hits = len(targets["hits"])
    reward, detail, took = score(code)
    assert reward == 0.0, (name, detail)
    assert took < BOUND_S, (name, took)
    # nothing outside changed
    assert not targets["project_write"].exists()
    assert targets["run_log"].read_text() == '{"step": 0}\n'
    assert not Path(f"/etc/rizz-pwned-{TAG}").exists()
    assert not targets["tmp_outside"].exists() and not targets["shm_outside"].exists()
    assert len(targets["hits"]) == before_hits, "the host's loopback server was reached"
    assert not _accepted(targets["unix"]) and not _accepted(targets["abstract"])
    assert stat.S_IMODE(targets["other_user_file"].stat().st_mode) == 0o600
    assert _sandbox_uid_processes() == [], "processes left running"
    assert os.getpid() > 0  # (and this process is still alive to check)
