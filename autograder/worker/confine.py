"""Confine a rank of a multi-rank test to its own files, with Linux Landlock.

Ranks run as one uid in one sandbox, so file permissions cannot keep them apart: without more, a
rank could hand its whole input to another through a file (in the work dir, /tmp, /dev/shm, the
other rank's home) while its messages are decoys. After the rank has joined the process group and
before the conftest or the package load, the rank restricts itself (irrevocably, for itself and
every process it starts):
- writes: only beneath its own private folder (its HOME and TMPDIR) and to the rendezvous store
  file (`new_group` needs the store), plus /dev/null and its kin (and, for NCCL, /dev);
- reads: everything except the group's folder, where the other ranks' private folders and the
  progress files live (the rank's own folder and the store file excepted);
- no named sockets or FIFOs created anywhere; under gloo, no abstract unix socket or signal that
  crosses to another rank (Landlock scopes, ABI 6); ptrace and /proc/<pid>/mem of another rank
  are refused by Landlock's own rule (each rank is its own domain). Another rank's
  /proc/<pid>/environ stays readable: it holds the rank's coordinates, nothing of its inputs.
What it cannot close: the store itself (readable and writable through torch's store object), TCP
on loopback (gloo's own pairs connect to ports drawn at run time, so no port list can be fixed),
System V IPC. Where the kernel has no Landlock, nothing is confined and `confine` says so.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass
from pathlib import Path

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and aarch64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM, REFER, TRUNCATE = 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
# The rank's own folder: anything but named sockets, FIFOs and device nodes.
OWN = READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | REFER | TRUNCATE
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


@dataclass(frozen=True)
class Confinement:
    """What confine() did: the Landlock ABI used (0: none) and, when nothing, why."""

    abi: int
    note: str = ""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (old kernel, or disabled)."""
    try:
        version = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def _handled(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM: ABI 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _add(ruleset: int, path: str, rights: int, handled: int) -> None:
    """Allow `rights` beneath `path` (a missing path is skipped: nothing to allow)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS  # a file takes only file rights (else EINVAL)
        attr = struct.pack("=Qi", rights & handled, fd)  # struct landlock_path_beneath_attr (packed)
        buf = ctypes.create_string_buffer(attr, len(attr))
        if _libc().syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, buf, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _readable_around(hidden: Path) -> list[str]:
    """Every path beside the way from / to `hidden`: reading all of them reads everything except
    `hidden` (Landlock rules only allow, and a rule on a folder covers what is beneath it)."""
    out, here = [], Path("/")
    for part in hidden.parts[1:]:
        try:
            names = os.listdir(here)
        except OSError:
            names = []
        out += [str(here / n) for n in names if n != part]
        here = here / part
    return out


def _coverage_folder() -> str:
    """The folder coverage.py writes its data to while `autograder tasks` measures which tasks the
    public tests reach ("" otherwise). COVERAGE_PROCESS_START comes from the grader's environment;
    the package loads only after the rank is confined, so it cannot point this anywhere."""
    import configparser

    rc = os.environ.get("COVERAGE_PROCESS_START", "")
    if not rc or not os.path.isfile(rc):
        return ""
    parser = configparser.ConfigParser()
    parser.read(rc)
    data_file = parser.get("run", "data_file", fallback="")
    return os.path.dirname(os.path.abspath(data_file)) if data_file else ""


def confine(*, group_folder: str, own_folder: str, store_file: str, nccl: bool) -> Confinement:
    """Restrict this process as the module docstring says; returns what was applied."""
    abi = landlock_abi()
    if abi < 1:
        return Confinement(0, "the kernel offers no Landlock: the rank is not confined to its own files")
    handled = _handled(abi)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 and not nccl else 0  # NCCL's proxies use abstract sockets
    attr = struct.pack("=QQQ", handled, 0, scoped)[: 8 if abi < 4 else (16 if abi < 6 else 24)]
    buf = ctypes.create_string_buffer(attr, len(attr))
    libc = _libc()
    ruleset = libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        return Confinement(0, f"landlock_create_ruleset failed (errno {ctypes.get_errno()}): not confined")
    try:
        for path in _readable_around(Path(group_folder).resolve()):
            _add(ruleset, path, READ, handled)
        _add(ruleset, own_folder, OWN, handled)
        if coverage := _coverage_folder():
            _add(ruleset, coverage, OWN, handled)
        _add(ruleset, store_file, READ_FILE | WRITE_FILE | TRUNCATE, handled)
        for device in ("/dev",) if nccl else DEVICES:
            _add(ruleset, device, READ | WRITE_FILE | TRUNCATE, handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return Confinement(abi)
