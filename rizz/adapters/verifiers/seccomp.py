"""A seccomp filter for the code sandbox: no new namespaces, mounts, ptrace or kernel-facing
syscalls for model-written code (specs/reliability.md, "`code_exec` sandbox: hostile programs").

With only a private uid, an unprivileged process may still create a *user* namespace
(``unshare(CLONE_NEWUSER)``) and, inside it, mount and unshare at will -- a large kernel
attack surface reachable through ``ctypes``. The filter below, installed in the sandboxed
child after ``PR_SET_NO_NEW_PRIVS`` and kept across ``exec``, makes these syscalls fail with
``EPERM``:

* ``unshare``, ``setns``; ``clone`` with any ``CLONE_NEW*`` flag; ``clone3`` (``ENOSYS``, so
  glibc falls back to ``clone``, whose flags can be checked);
* ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API
  (``open_tree``, ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``,
  ``mount_setattr``);
* ``ptrace``, ``process_vm_readv``/``writev``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*``, ``keyctl``/``add_key``/``request_key``, ``kexec_*``, module loading.

Any other ABI than x86-64 (the i386 ``int 0x80`` entry, x32 numbers) kills the process.
Only x86-64 is supported; elsewhere :func:`install` does nothing and returns False (the
namespaces, uid and limits still hold). Syscall numbers: ``arch/x86/entry/syscalls/syscall_64.tbl``.
"""

from __future__ import annotations

import ctypes
import platform
import struct

__all__ = ["BLOCKED_SYSCALLS", "install", "supported"]

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_NEW_ANY = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

#: x86-64 syscall numbers refused with EPERM.
BLOCKED_SYSCALLS: dict[str, int] = {
    "ptrace": 101, "pivot_root": 155, "chroot": 161, "mount": 165, "umount2": 166,
    "init_module": 175, "delete_module": 176, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}
_CLONE, _CLONE3 = 56, 435

# classic BPF opcodes
_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _program() -> bytes:
    deny = _RET_ERRNO | _EPERM
    prog = [
        _insn(_LD_W_ABS, 0, 0, 4),                        # A = arch
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, 0),                        # A = syscall nr
        _insn(_JGE_K, 0, 1, _X32_BIT),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_JEQ_K, 0, 1, _CLONE3),
        _insn(_RET_K, 0, 0, _RET_ERRNO | _ENOSYS),
    ]
    for nr in sorted(BLOCKED_SYSCALLS.values()):
        prog += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, deny)]
    prog += [
        _insn(_JEQ_K, 0, 3, _CLONE),
        _insn(_LD_W_ABS, 0, 0, 16),                       # A = low word of args[0] (flags)
        _insn(_JSET_K, 0, 1, _CLONE_NEW_ANY),
        _insn(_RET_K, 0, 0, deny),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def supported() -> bool:
    """True on Linux x86-64, where :func:`install` can filter."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def prepared() -> tuple[ctypes.CDLL, ctypes.Array, _SockFprog] | None:
    """Everything :func:`install` needs, built before ``fork`` (no allocation in the child)."""
    if not supported():
        return None
    code = _program()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    return ctypes.CDLL(None, use_errno=True), buf, prog


def install(prep: tuple[ctypes.CDLL, ctypes.Array, _SockFprog] | None) -> bool:
    """Install the filter in this process (needs ``PR_SET_NO_NEW_PRIVS`` first).

    Raises:
        OSError: the kernel refused the filter.
    """
    if prep is None:
        return False
    libc, _buf, prog = prep
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "sandbox setup: seccomp filter refused")
    return True
