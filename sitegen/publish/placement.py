"""Where new folders go on disk: each build, and the cache, starts a hierarchy of its own.

On ext4 without a journal (cloud and CI images often mount it so), a new inode is never placed
where one was freed in the last 30 s (or 330 s while the freeing is not yet written out), and
finding a place walks past every such inode of its block group, for each new file. The files of
a build land in the block group of its parent folder, which is where the builds just removed
lived too (the previous site after ``rm -rf``, old builds pruned by ``--keep``). A cold build
made right after removing the last site and cache spent 21% of its CPU time in that walk (its
system time went from 1.2-1.6 s to 4.2-4.8 s) and took 8.5 s instead of 6.5 s.

Marking a folder as the top of a directory hierarchy (``chattr +T``, ``FS_TOPDIR_FL``) makes
ext4 place each folder made directly in it in a block group of its own choosing, with room
and few folders (the Orlov allocator), and everything below follows it there. The builds folder
and the cache folder are marked. Elsewhere (other file systems, other systems, no permission)
this does nothing.

Orlov starts its search at a group hashed from the new folder's *name*: a folder made again
under the same name (the cache's ``files`` and ``runs`` after the cache was removed) goes back
to the group where its removed predecessor left its inodes, and the walk is back (7% of a
cold build's CPU time, measured with ``perf``). :func:`make_dir` makes such folders under a
random name and renames them into place.
"""
from __future__ import annotations

import array
import os
import secrets
import struct
import sys
from pathlib import Path

FS_TOPDIR_FL = 0x00020000  # linux/fs.h: "top of directory hierarchies"
#: machines whose ioctl numbers use Linux's generic encoding (not alpha, mips, powerpc, sparc)
_GENERIC = frozenset({"x86_64", "aarch64", "arm64", "i386", "i686", "armv7l", "armv8l", "riscv64", "s390x", "loongarch64"})


def _ioctl_numbers() -> tuple[int, int] | None:
    """``FS_IOC_GETFLAGS`` and ``FS_IOC_SETFLAGS`` (``_IOR``/``_IOW('f', 1|2, long)``) with the
    generic Linux encoding, on the architectures that use it; None elsewhere."""
    if not sys.platform.startswith("linux") or os.uname().machine not in _GENERIC:
        return None
    size = struct.calcsize("l")
    read, write = 2 << 30, 1 << 30
    base = (size << 16) | (ord("f") << 8)
    return read | base | 1, write | base | 2


def _ioctl(folder: Path | str, set_bits: int = 0) -> int | None:
    """The inode flags of ``folder`` (``lsattr -d``), after adding ``set_bits`` to them; None
    when they cannot be read or changed."""
    numbers = _ioctl_numbers()
    if numbers is None:
        return None
    import fcntl

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        got = array.array("i", [0])
        fcntl.ioctl(fd, numbers[0], got, True)
        if set_bits and got[0] & set_bits != set_bits:
            got[0] |= set_bits
            fcntl.ioctl(fd, numbers[1], got)
        return got[0]
    except OSError:  # not ext2/3/4 (ENOTTY, EOPNOTSUPP), not our folder (EPERM)
        return None
    finally:
        os.close(fd)


def flags(folder: Path | str) -> int | None:
    """The inode flags of ``folder``, None when they cannot be read."""
    return _ioctl(folder)


def spread_below(folder: Path | str) -> bool:
    """Mark ``folder`` as the top of a hierarchy (see the module's notes); True when it is."""
    return _ioctl(folder, FS_TOPDIR_FL) is not None


def make_dir(path: Path | str) -> None:
    """``mkdir path`` (its parent exists), made under a random name and renamed into place, so
    that the block group ext4 picks for it does not follow from its name (see the notes).
    Nothing happens when ``path`` is already a folder."""
    path = str(path)
    if os.path.isdir(path):
        return
    tmp = f"{path}.{secrets.token_hex(8)}.tmp"
    os.mkdir(tmp)
    try:
        os.rename(tmp, path)  # (replaces an empty folder made meanwhile by another build)
    except OSError:
        os.rmdir(tmp)
        if not os.path.isdir(path):
            raise
