"""Landlock, through ctypes: detect the ABI, build a ruleset, confine this process, exec.

This module is the kernel half of rule R15 (see ``docs/confinement.md``). It imports the
standard library only, because it also runs as a script, the exec wrapper that
``shell.run`` starts::

    python -I -S .../clearance/toolsets/_landlock.py WORDS... -- PROGRAM ARGV0 ARGS...

The wrapper reads the ruleset's description (``WORDS``, see :func:`encode_spec`),
opens every path it names, enforces the ruleset on itself (``no_new_privs``, then
``landlock_restrict_self``) and ``execv``s ``PROGRAM`` with ``ARGV0 ARGS...``: the program
and all it starts inherit the ruleset and can never leave it. Any failure before the exec
ends the wrapper with exit code :data:`REFUSED` and a line on stderr; nothing runs
unconfined. A wrapper rather than ``preexec_fn``: that hook runs Python between ``fork``
and ``exec`` of a threaded harness, where a lock held by another thread deadlocks it.

**How a ruleset is built.** Landlock only grants: a rule on a directory gives its rights to
everything beneath it, and nothing can take a right back below. A *restricted* path (a
secret the program may not read, a file of clearance's it may read but not change) under a
granted directory is therefore carved out: the granted directory keeps only ``READ_DIR``
(its entries can be listed), every entry of it gets the grant as its own rule, and the
entry on the way to the restricted path is split again, down to the restricted path, which
gets what its restriction leaves (nothing, or reading). The price: in a directory that
holds a restricted path, a command cannot create, remove or rename entries (those rights
are checked on the directory, and they would let it rename the secret away and read it),
only change the files already there and work in the subdirectories. Symlinks get no rule
(the kernel checks the path a link resolves to).

**ABI.** ``landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`` gives the
ABI; the ruleset handles every right that ABI knows: v1 files, v2 ``REFER`` (moving and
linking across directories: without it they are always refused), v3 ``TRUNCATE``, v4 TCP
bind and connect, v5 device ioctls, v6 scopes (abstract UNIX sockets and signals to
processes outside the ruleset). v7 adds audit flags only.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the wrapper starts faster without importing collections
    from collections.abc import Iterable, Iterator, Mapping, Sequence

__all__ = [
    "DEVICE",
    "FS_DIR_ONLY",
    "FS_FILE",
    "LIST",
    "READ",
    "REFUSED",
    "WRITE",
    "Rule",
    "abi",
    "build_rules",
    "handled_fs",
    "restrict",
]

REFUSED = 126
"""The wrapper's exit code when it could not confine itself (the program never ran)."""

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446), "arm64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (include/uapi/linux/landlock.h).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15

FS_FILE = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights that apply to a file (a rule on a file may hold no other)."""
FS_DIR_ONLY = READ_DIR
"""What a directory on the way to a restricted path keeps."""

NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

READ = "read"
"""Read files, list directories, execute."""
LIST = "list"
"""List directories only (the parent of a package Python imports from)."""
WRITE = "write"
"""Everything: read, write, create, remove, rename, truncate."""
DEVICE = "device"
"""Read and write a device file (``/dev/null``) and use its ioctls."""
NONE = "none"
"""Nothing (a restriction: the path is hidden)."""

Rule = tuple[str, int, int]
"""A path-beneath rule: a path, an ``O_PATH`` descriptor of it, and its rights (a bit mask)."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _syscall_numbers() -> tuple[int, int, int] | None:
    if not sys.platform.startswith("linux"):
        return None
    return _SYSCALLS.get(os.uname().machine.lower())


def abi() -> int:
    """The Landlock ABI this kernel offers (0: none: not Linux, not compiled in, or
    disabled at boot)."""
    numbers = _syscall_numbers()
    if numbers is None:
        return 0
    try:
        version = _libc().syscall(
            numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_fs(version: int) -> int:
    """The filesystem rights ABI ``version`` knows (all of them are handled)."""
    if version < 1:
        return 0
    rights = (MAKE_SYM << 1) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def rights_of(kind: str, version: int) -> int:
    """The rights of a grant or restriction kind under ABI ``version``."""
    everything = handled_fs(version)
    return (
        everything
        & {
            READ: EXECUTE | READ_FILE | READ_DIR,
            LIST: READ_DIR,
            WRITE: everything,
            DEVICE: READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV,
            NONE: 0,
        }[kind]
    )


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def build_rules(
    grants: Sequence[tuple[str, str]],
    restrictions: Sequence[tuple[str, str]],
    version: int,
) -> Iterator[Rule]:
    """The path-beneath rules of a ruleset, carving ``restrictions`` out of ``grants``.

    A generator: each rule's file descriptor (opened ``O_PATH``, never following a
    symlink) is open while the rule is being consumed and closed when the next one is
    asked for, so that a large directory does not exhaust the descriptors. Entries are
    opened relative to their directory's descriptor: what is listed is what is opened.

    Args:
        grants: ``(absolute canonical path, kind)``: what may be done beneath each path
            (:data:`READ`, :data:`LIST`, :data:`WRITE`, :data:`DEVICE`).
        restrictions: ``(absolute canonical path, kind)``: the most that may be done
            beneath each path, whatever a grant says (:data:`NONE` or :data:`READ`). A
            file that is a restricted file under another name (a hard link) is limited
            the same way.
        version: the ABI (decides which rights exist).

    Yields:
        ``(path, fd, rights)``; a path that does not exist gets no rule, a symlink none
        (the kernel checks where it leads), a file only the rights of a file.
    """
    limits = [(path, rights_of(kind, version)) for path, kind in restrictions]
    inodes: dict[tuple[int, int], int] = {}
    for path, most in limits:
        try:
            st = os.stat(path)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        inodes[key] = inodes.get(key, most) & most

    def grant(path: str, name: str, dir_fd: int | None, rights: int) -> Iterator[Rule]:
        for restricted, most in limits:
            if _within(path, restricted):
                rights &= most
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                return
            rights &= inodes.get((st.st_dev, st.st_ino), rights)
            if not stat.S_ISDIR(st.st_mode):
                if rights & FS_FILE:
                    yield path, fd, rights & FS_FILE
                return
            below = [r for r, _ in limits if r != path and _within(r, path)]
            if not below:
                if rights:
                    yield path, fd, rights
                return
            if rights & FS_DIR_ONLY:
                yield path, fd, rights & FS_DIR_ONLY
            try:
                listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                return
            try:
                names = sorted(os.listdir(listing))
                for entry in names:
                    yield from grant(os.path.join(path, entry), entry, listing, rights)
            finally:
                os.close(listing)
        finally:
            os.close(fd)

    for path, kind in grants:
        yield from grant(path, path, None, rights_of(kind, version))


class LandlockError(OSError):
    """The kernel refused a step of building or enforcing the ruleset."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"{what}: {os.strerror(err)}")
    return result


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


def restrict(
    rules: Iterable[Rule],
    version: int,
    *,
    connect_ports: Sequence[int] = (),
    bind_ports: Sequence[int] = (),
) -> None:
    """Enforce a ruleset on the calling thread (and what it execs) for good.

    Handles every filesystem right of ``version``; TCP bind and connect (v4+) are denied
    but for the ports given; abstract UNIX sockets and signals (v6+) are scoped to the
    ruleset. Call it from a single-threaded process (the exec wrapper).

    Raises:
        LandlockError: the kernel refused (no Landlock, a bad rule).
    """
    numbers = _syscall_numbers()
    if numbers is None or version < 1:
        raise LandlockError(0, "Landlock is not available")
    create, add_rule, restrict_self = numbers
    libc = _libc()
    attr = _RulesetAttr(handled_fs(version), 0, 0)
    size = 8
    if version >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if version >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset = _check(
        libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    try:
        for path, fd, rights in rules:
            beneath = _PathBeneathAttr(rights, fd)
            _check(
                libc.syscall(
                    add_rule,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(beneath),
                    ctypes.c_uint32(0),
                ),
                f"landlock_add_rule({path!r})",
            )
        if version >= 4:
            ports = [(p, NET_CONNECT_TCP) for p in connect_ports]
            ports += [(p, NET_BIND_TCP) for p in bind_ports]
            for port, access in ports:
                net = _NetPortAttr(access, port)
                _check(
                    libc.syscall(
                        add_rule,
                        ctypes.c_int(ruleset),
                        ctypes.c_int(_RULE_NET_PORT),
                        ctypes.byref(net),
                        ctypes.c_uint32(0),
                    ),
                    f"landlock_add_rule(port {port})",
                )
        _check(
            libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0),
            "prctl(PR_SET_NO_NEW_PRIVS)",
        )
        _check(
            libc.syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)


def encode_spec(spec: Mapping[str, object]) -> list[str]:
    """The wrapper's words for ``spec`` (its arguments up to ``--``): ``abi=N``,
    ``grant=KIND=HEX``, ``restrict=KIND=HEX`` (a path's bytes in hex: any name survives),
    ``connect=PORT``, ``bind=PORT``. Plain words rather than JSON: importing ``json``
    (and ``re`` under it) would cost each command more than the rest of the wrapper."""
    words = [f"abi={spec.get('abi', 0)}"]
    for key, tag in (("grants", "grant"), ("restrictions", "restrict")):
        for path, kind in _pairs(spec.get(key)):
            words.append(f"{tag}={kind}={os.fsencode(str(path)).hex()}")
    for key, tag in (("connect_ports", "connect"), ("bind_ports", "bind")):
        words += [f"{tag}={port}" for port in _ports(spec.get(key))]
    return words


def decode_spec(words: Sequence[str]) -> dict[str, object]:
    """The spec :func:`encode_spec` wrote.

    Raises:
        ValueError: a word is not one of those.
    """
    spec: dict[str, list[object]] = {
        "grants": [],
        "restrictions": [],
        "connect_ports": [],
        "bind_ports": [],
    }
    version = 0
    for word in words:
        tag, _, value = word.partition("=")
        if tag == "abi":
            version = int(value)
        elif tag in ("grant", "restrict"):
            kind, _, encoded = value.partition("=")
            if kind not in (READ, LIST, WRITE, DEVICE, NONE):
                raise ValueError(f"unknown kind {kind!r}")
            path = os.fsdecode(bytes.fromhex(encoded))
            spec["grants" if tag == "grant" else "restrictions"].append([path, kind])
        elif tag in ("connect", "bind"):
            spec[f"{tag}_ports"].append(int(value))
        else:
            raise ValueError(f"unknown word {word!r}")
    return {"abi": version, **spec}


def confine_and_exec(spec: Mapping[str, object], program: str, argv: list[str]) -> None:
    """Build the ruleset ``spec`` describes, enforce it, and replace this process with
    ``program`` (``argv``). Returns only by raising.

    ``spec``: ``grants`` and ``restrictions`` (lists of ``[path, kind]``, see
    :func:`build_rules`), ``connect_ports`` and ``bind_ports`` (lists of integers), and
    ``abi`` (the ABI to use: at most what the kernel offers, never less than 1).

    Raises:
        LandlockError: the ruleset could not be enforced.
        OSError: the program could not be executed.
    """
    offered = abi()
    wanted = spec.get("abi")
    version = min(offered, wanted) if isinstance(wanted, int) else offered
    if version < 1:
        raise LandlockError(0, "Landlock is not available in this kernel")
    grants = [(str(p), str(k)) for p, k in _pairs(spec.get("grants"))]
    restrictions = [(str(p), str(k)) for p, k in _pairs(spec.get("restrictions"))]
    rules = build_rules(grants, restrictions, version)
    restrict(
        rules,
        version,
        connect_ports=_ports(spec.get("connect_ports")),
        bind_ports=_ports(spec.get("bind_ports")),
    )
    os.execv(program, argv)


def _pairs(value: object) -> list[tuple[object, object]]:
    if not isinstance(value, list):
        return []
    return [
        (item[0], item[1]) for item in value if isinstance(item, list | tuple) and len(item) == 2
    ]


def _ports(value: object) -> list[int]:
    if not isinstance(value, list | tuple):
        return []
    return [p for p in value if isinstance(p, int) and 0 <= p <= 65535]


def main(args: Sequence[str]) -> int:
    """The exec wrapper: ``WORDS... -- PROGRAM ARGV0 ARGS...`` (see :func:`encode_spec`).
    Returns only on failure."""
    try:
        end = list(args).index("--")
    except ValueError:
        end = -1
    if end < 0 or len(args) < end + 3:
        sys.stderr.write("clearance confinement: usage: WORDS... -- PROGRAM ARGV0 [ARGS...]\n")
        return REFUSED
    try:
        spec = decode_spec(args[:end])
        confine_and_exec(spec, args[end + 1], list(args[end + 2 :]))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"clearance confinement: {exc}; the program did not run\n")
    return REFUSED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
