"""A FUSE file system that loses every write not fsynced when told "crash", as Jepsen's LazyFS does.

Owns the power-cut nemesis: the pass-through file system (its own process), its undo journal, and
`LazyFSMount`, the harness a test uses to mount it, crash it, remount it and always unmount it.

What a power cut loses (the model, checked by tests/unit/test_lazyfs.py):
- file data: every write and truncate since the file's last fsync/fdatasync (any descriptor of the
  same inode) is undone: the file gets back the size and bytes it had at that fsync. A syncfs(2) is
  not seen by a FUSE file system, so it protects nothing here (the broker uses it only at a clean
  shutdown of many logs);
- names: a create, mkdir, unlink, rmdir or rename is undone unless a directory it touched (the
  parent; for a rename either parent, as a journaling file system commits it as one transaction)
  was fsynced after it. An fsync of a file does not make its directory entry durable (POSIX;
  stricter than ext4 in practice). Names are undone newest first, after the data;
- not modelled: hard links and symlinks (refused with EPERM), permissions, owners and times (kept),
  torn writes inside one write(2) (a write is all or nothing), reordering of unsynced writes (all
  unsynced writes go; LazyFS can also keep a prefix of them).
Writes go straight to the backing directory (which stands for the page cache), with an undo record
of the bytes they replace below the last fsynced size; "crash" applies the undo journal and
unmounts, so a remount over the same backing directory sees only what was durable. mmap works:
no direct_io, so the kernel's page cache serves read-only maps (the broker maps segments read-only).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

GRAVEYARD_SUFFIX = ".lazyfs-graveyard"


@dataclass
class FileUndo:
    """The unsynced changes of one inode: its size at the last fsync and the bytes (below that size)
    that writes and truncates replaced since, oldest first; `fd` keeps the inode reachable."""

    fd: int
    durable_size: int
    entries: list[tuple[int, bytes]] = field(default_factory=list)
    covered: list[tuple[int, int]] = field(default_factory=list)  # ranges already saved

    def _is_covered(self, start: int, end: int) -> bool:
        return any(a <= start and end <= b for a, b in self.covered)

    def save(self, start: int, end: int) -> None:
        """Remember the durable bytes of [start, end) before they change (clipped to the durable
        size: bytes past it are dropped by the final truncate anyway)."""
        end = min(end, self.durable_size, os.fstat(self.fd).st_size)
        if start >= end or self._is_covered(start, end):
            return
        self.entries.append((start, os.pread(self.fd, end - start, start)))
        self.covered.append((start, end))

    def undo(self) -> None:
        """Put back the bytes and size the inode had at its last fsync."""
        for off, data in reversed(self.entries):
            os.pwrite(self.fd, data, off)
        os.ftruncate(self.fd, self.durable_size)


@dataclass
class NameOp:
    """One namespace change not yet durable: what to do to undo it, and the directories (by inode)
    whose fsync makes it durable. `grave`: where a removed or replaced entry waits."""

    kind: str  # create | mkdir | unlink | rmdir | rename
    path: str  # backing path (for a rename: the new name)
    ino: int
    dirs: frozenset[int]
    old_path: str = ""  # rename only
    grave: str = ""


class LazyState:
    """The undo journal of a mounted backing directory; pure bookkeeping over backing paths, used by
    the FUSE operations and directly by unit tests."""

    def __init__(self, backing: str) -> None:
        self.backing = os.path.abspath(backing)
        self.graveyard = self.backing.rstrip("/") + GRAVEYARD_SUFFIX
        shutil.rmtree(self.graveyard, ignore_errors=True)
        os.makedirs(self.graveyard)
        self.files: dict[int, FileUndo] = {}
        self.names: list[NameOp] = []
        self._graves = 0

    # -- data --
    def _undo_for(self, path: str) -> FileUndo:
        ino = os.lstat(path).st_ino
        u = self.files.get(ino)
        if u is None:
            fd = os.open(path, os.O_RDWR)
            u = self.files[ino] = FileUndo(fd, os.fstat(fd).st_size)
        return u

    def before_write(self, path: str, offset: int, size: int) -> None:
        self._undo_for(path).save(offset, offset + size)

    def before_truncate(self, path: str, length: int) -> None:
        u = self._undo_for(path)
        u.save(length, os.fstat(u.fd).st_size)

    def synced(self, path: str) -> None:
        """fsync/fdatasync of a file: its data as it is now is durable."""
        u = self.files.pop(os.lstat(path).st_ino, None)
        if u is not None:
            os.close(u.fd)

    # -- names --
    def _dir_ino(self, path: str) -> int:
        return os.lstat(os.path.dirname(path)).st_ino

    def _bury(self, path: str) -> str:
        self._graves += 1
        grave = os.path.join(self.graveyard, str(self._graves))
        os.rename(path, grave)
        return grave

    def created(self, kind: str, path: str) -> None:
        ino = os.lstat(path).st_ino
        self.names.append(NameOp(kind, path, ino, frozenset({self._dir_ino(path)})))

    def remove(self, kind: str, path: str) -> None:
        """unlink/rmdir: the entry moves to the graveyard until the parent's fsync."""
        st = os.lstat(path)
        if kind == "rmdir" and os.listdir(path):
            raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), path)
        dirs = frozenset({self._dir_ino(path)})
        self.names.append(NameOp(kind, path, st.st_ino, dirs, grave=self._bury(path)))

    def rename(self, old: str, new: str) -> None:
        st = os.lstat(old)
        grave = ""
        if os.path.lexists(new):
            nst = os.lstat(new)
            if nst.st_ino == st.st_ino:
                return
            if os.path.isdir(new) and os.listdir(new):
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), new)
            grave = self._bury(new)
        os.rename(old, new)
        dirs = frozenset({self._dir_ino(old), self._dir_ino(new)})
        self.names.append(NameOp("rename", new, st.st_ino, dirs, old_path=old, grave=grave))

    def dir_synced(self, path: str) -> None:
        """fsync of a directory: every namespace change touching it is durable (graves emptied)."""
        ino = os.lstat(path).st_ino
        keep: list[NameOp] = []
        for op in self.names:
            if ino in op.dirs:
                _remove_tree(op.grave)
            else:
                keep.append(op)
        self.names = keep

    # -- the power cut --
    def crash(self) -> tuple[int, int]:
        """Drop everything unsynced: (files whose data was undone, namespace changes undone)."""
        nfiles, nnames = len(self.files), len(self.names)
        for u in self.files.values():
            try:
                u.undo()
            finally:
                os.close(u.fd)
        self.files.clear()
        for op in reversed(self.names):
            try:
                self._undo_name(op)
            except OSError as e:  # a later durable change moved it: keep what is there
                log.warning("lazyfs: cannot undo %s %s: %s", op.kind, op.path, e)
        self.names.clear()
        _remove_tree(self.graveyard)
        return nfiles, nnames

    def _undo_name(self, op: NameOp) -> None:
        def here(p: str) -> bool:
            return os.path.lexists(p) and os.lstat(p).st_ino == op.ino

        if op.kind in ("create", "mkdir"):
            if here(op.path):
                _remove_tree(op.path)
        elif op.kind in ("unlink", "rmdir"):
            os.rename(op.grave, op.path)
        elif op.kind == "rename":
            if here(op.path):
                os.rename(op.path, op.old_path)
            if op.grave:
                os.rename(op.grave, op.path)

    def close(self) -> None:
        """A clean unmount: nothing is dropped (the page cache would be written back)."""
        for u in self.files.values():
            os.close(u.fd)
        self.files.clear()
        self.names.clear()
        _remove_tree(self.graveyard)


def _remove_tree(p: str) -> None:
    if not p or not os.path.lexists(p):
        return
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p, ignore_errors=True)
    else:
        os.unlink(p)


def mounted(mountpoint: str | Path) -> bool:
    """Whether `mountpoint` is a mount point now (per /proc/mounts)."""
    target = os.path.abspath(mountpoint)
    with open("/proc/mounts", encoding="utf-8") as fh:
        return any(line.split()[1] == target for line in fh if len(line.split()) > 1)


def fusermount_unmount(mountpoint: str | Path) -> None:
    """Unmount, lazily if it is busy; quiet when it is not mounted."""
    for args in (["-u"], ["-u", "-z"]):
        if not mounted(mountpoint):
            return
        subprocess.run(["fusermount3", *args, str(mountpoint)], capture_output=True, check=False)


def _operations_class() -> type:
    """The FUSE operations over a LazyState (built late: mfusepy loads libfuse at import)."""
    import mfusepy

    class LazyOperations(mfusepy.Operations):  # type: ignore[misc]
        """Pass-through to the backing directory; every change goes through the undo journal.
        One lock: FUSE calls and the control channel's "crash" never interleave."""

        use_ns = True

        def __init__(self, state: LazyState) -> None:
            self.state = state
            self._mutex = threading.Lock()
            self.crashed = False

        def _p(self, path: str) -> str:
            return self.state.backing + path

        def _guard(self) -> None:
            if self.crashed:
                raise mfusepy.FuseOSError(errno.EIO)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            with self._mutex:
                self._guard()
                st = os.fstat(fh) if fh is not None else os.lstat(self._p(path))
                keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
                out: dict[str, Any] = {k: getattr(st, k) for k in keys}
                out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns)
                out.update(st_ctime=st.st_ctime_ns, st_ino=st.st_ino)
                return out

        def readdir(self, path: str, fh: int) -> list[str]:
            with self._mutex:
                self._guard()
                return [".", "..", *os.listdir(self._p(path))]

        def statfs(self, path: str) -> dict[str, Any]:
            sv = os.statvfs(self._p(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree")
            return {
                k: getattr(sv, k) for k in (*keys, "f_files", "f_flag", "f_frsize", "f_namemax")
            }

        def access(self, path: str, amode: int) -> int:
            with self._mutex:
                self._guard()
                if not os.access(self._p(path), amode):
                    raise mfusepy.FuseOSError(errno.EACCES)
                return 0

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._p(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(self._p(path), uid, gid)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            os.utime(self._p(path), ns=times) if times else os.utime(self._p(path))
            return 0

        def open(self, path: str, flags: int) -> int:
            with self._mutex:
                self._guard()
                # positions come from the kernel: no O_APPEND; the page cache stays (mmap)
                flags &= ~(os.O_APPEND | getattr(os, "O_DIRECT", 0))
                if flags & os.O_TRUNC:  # (when the kernel passes it on: atomic_o_trunc)
                    self.state.before_truncate(self._p(path), 0)
                return os.open(self._p(path), flags)

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            with self._mutex:
                self._guard()
                p = self._p(path)
                existed = os.path.lexists(p)
                fd = os.open(p, os.O_RDWR | os.O_CREAT, mode)
                if not existed:
                    self.state.created("create", p)
                return fd

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            with self._mutex:
                self._guard()
                return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self._mutex:
                self._guard()
                self.state.before_write(self._p(path), offset, len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            with self._mutex:
                self._guard()
                self.state.before_truncate(self._p(path), length)
                if fh is not None:
                    os.ftruncate(fh, length)
                else:
                    os.truncate(self._p(path), length)
                return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            with self._mutex:
                self._guard()
                self.state.synced(self._p(path))
                return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            with self._mutex:
                self._guard()
                self.state.dir_synced(self._p(path))
                return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            with self._mutex:
                self._guard()
                os.mkdir(self._p(path), mode)
                self.state.created("mkdir", self._p(path))
                return 0

        def unlink(self, path: str) -> int:
            with self._mutex:
                self._guard()
                self.state.remove("unlink", self._p(path))
                return 0

        def rmdir(self, path: str) -> int:
            with self._mutex:
                self._guard()
                self.state.remove("rmdir", self._p(path))
                return 0

        def rename(self, old: str, new: str) -> int:
            with self._mutex:
                self._guard()
                self.state.rename(self._p(old), self._p(new))
                return 0

        def link(self, target: str, source: str) -> int:
            raise mfusepy.FuseOSError(errno.EPERM)  # not modelled (see the module docstring)

        def symlink(self, target: str, source: str) -> int:
            raise mfusepy.FuseOSError(errno.EPERM)

        def crash(self) -> tuple[int, int]:
            with self._mutex:
                self.crashed = True
                return self.state.crash()

    return LazyOperations


def _serve_control(
    sock: socket.socket, ops: Any, mountpoint: str, served: threading.Event, busy: threading.Event
) -> None:
    """The control channel: one line per connection, `crash` or `unmount`; the answer is one line.
    Either way the mount goes (lazily if a file is still open) and the process leaves: it does
    not wait for the kernel to end the FUSE session, which a lazily detached mount can delay."""
    while True:
        conn, _ = sock.accept()
        with conn:
            cmd = conn.recv(64).decode("ascii", "replace").strip()
            if cmd == "crash":
                nfiles, nnames = ops.crash()
                answer = f"crashed files={nfiles} names={nnames}\n"
            elif cmd == "unmount":
                answer = "unmounting\n"
            else:
                conn.sendall(b"error: unknown command (crash | unmount)\n")
                continue
            busy.set()
            fusermount_unmount(mountpoint)
            conn.sendall(answer.encode())
        if cmd == "unmount":
            served.wait(2.0)  # the FUSE loop ends and the journal is closed cleanly
        os._exit(0)


def _die_with_parent() -> None:
    """SIGTERM this process when the one that started it dies (a killed test run): libfuse
    unmounts on SIGTERM, so no stale mount is left behind."""
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    """`python -m kafkalite.jepsen.lazyfs --backing DIR --mount DIR --control SOCKET`."""
    ap = argparse.ArgumentParser(prog="lazyfs", description=__doc__.splitlines()[0])
    ap.add_argument("--backing", required=True)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--control", required=True, help="Unix socket path for crash / unmount")
    ns = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="lazyfs %(levelname)s %(message)s")
    import mfusepy

    state = LazyState(ns.backing)
    ops = _operations_class()(state)
    if os.path.exists(ns.control):
        os.unlink(ns.control)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(ns.control)
    sock.listen(4)
    served, busy = threading.Event(), threading.Event()
    args = (sock, ops, ns.mount, served, busy)
    threading.Thread(target=_serve_control, args=args, daemon=True).start()
    _die_with_parent()
    try:
        # one thread: simple, and the lock above orders FUSE calls against a crash
        mfusepy.FUSE(ops, ns.mount, foreground=True, nothreads=True, fsname="lazyfs")
    finally:
        if not ops.crashed:
            state.close()
        sock.close()
        os.unlink(ns.control)
        served.set()
    if busy.is_set():  # the control thread answers, then ends the process
        time.sleep(5)
    return 0


class LazyFSMount:
    """Harness: mount a lazyfs over `backing` at `mountpoint` in its own process; `crash()` drops
    what was not fsynced and unmounts; `mount()` again to remount; leaving the `with` always
    unmounts (also after a failed test), so no stale mount is left in /proc/mounts."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing, self.mountpoint = Path(backing), Path(mountpoint)
        self.control = self.backing.parent / f".{self.backing.name}.lazyfs.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def mount(self, timeout: float = 15.0) -> LazyFSMount:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kafkalite.jepsen.lazyfs", "--backing", str(self.backing)]
        cmd += ["--mount", str(self.mountpoint), "--control", str(self.control)]
        self.proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        deadline = time.monotonic() + timeout
        while not (mounted(self.mountpoint) and self.control.exists()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.unmount()
                raise RuntimeError(f"lazyfs did not mount at {self.mountpoint}")
            time.sleep(0.02)
        return self

    def _command(self, cmd: str) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(str(self.control))
            s.sendall(cmd.encode() + b"\n")
            return s.recv(256).decode().strip()

    def crash(self, timeout: float = 15.0) -> str:
        """The power cut: everything not fsynced is gone, and the file system is unmounted. Stop
        (SIGKILL) the processes using it first, as the power cut stops them."""
        answer = self._command("crash")
        self._wait_gone(timeout)
        return answer

    def unmount(self, timeout: float = 15.0) -> None:
        """A clean unmount (nothing dropped); also the cleanup of a failed mount or test."""
        if self.proc is not None and self.proc.poll() is None and self.control.exists():
            try:
                self._command("unmount")
            except OSError:
                pass
        self._wait_gone(timeout)

    def _wait_gone(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.proc is not None and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.proc is not None and self.proc.poll() is None:
            log.warning("lazyfs at %s did not exit: killing it", self.mountpoint)
            self.proc.kill()
            self.proc.wait(5)
        fusermount_unmount(self.mountpoint)
        self.proc = None

    def __enter__(self) -> LazyFSMount:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()


if __name__ == "__main__":
    sys.exit(main())
