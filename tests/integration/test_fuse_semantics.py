# SPDX-License-Identifier: MIT
"""Semantics the FUSE glue owns: set-ID bits cleared by a write, directory
offsets that stay valid for seekdir/telldir, and write-only opens that bypass
the page cache without other opens noticing."""
import ctypes
import ctypes.util
import mmap
import os
import stat

from test_permissions import ALICE, ok


def test_write_by_non_owner_clears_setuid_and_setgid(workdir):
    f = workdir / "suid"
    f.write_bytes(b"x" * 100)
    os.chmod(f, 0o6777)
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o6777

    def write_as_other():
        fd = os.open(f, os.O_WRONLY)
        try:
            return os.pwrite(fd, b"hello", 10)
        finally:
            os.close(fd)

    assert ok(ALICE, write_as_other) == 5
    mode = stat.S_IMODE(os.stat(f).st_mode)
    assert mode & (stat.S_ISUID | stat.S_ISGID) == 0, oct(mode)
    assert mode & 0o777 == 0o777
    data = f.read_bytes()
    assert data[10:15] == b"hello" and len(data) == 100


class _Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.opendir.restype = ctypes.c_void_p
    libc.opendir.argtypes = [ctypes.c_char_p]
    libc.readdir.restype = ctypes.POINTER(_Dirent)
    libc.readdir.argtypes = [ctypes.c_void_p]
    libc.telldir.restype = ctypes.c_long
    libc.telldir.argtypes = [ctypes.c_void_p]
    libc.seekdir.restype = None
    libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
    libc.closedir.argtypes = [ctypes.c_void_p]
    return libc


def _read_rest(libc, d):
    names = []
    while True:
        ent = libc.readdir(d)
        if not ent:
            return names
        names.append(ent.contents.d_name.decode())


def test_seekdir_telldir_return_to_the_same_entry(workdir):
    want = {"e%04d" % i for i in range(600)}
    for n in want:
        (workdir / n).touch()
    libc = _libc()
    d = libc.opendir(str(workdir).encode())
    assert d
    try:
        first = []
        for _ in range(250):
            first.append(libc.readdir(d).contents.d_name.decode())
        pos = libc.telldir(d)
        rest = _read_rest(libc, d)
        assert set(first + rest) - {".", ".."} == want
        assert len(first) + len(rest) == len(want) + 2   # each name once, plus . and ..
        libc.seekdir(d, pos)
        assert _read_rest(libc, d) == rest
        # An entry added after the position must not make the stream repeat or skip
        # the entries that did not change.
        (workdir / "zz-late").touch()
        libc.seekdir(d, pos)
        again = [n for n in _read_rest(libc, d) if n != "zz-late"]
        assert again == rest
    finally:
        libc.closedir(d)


# Write-only opens bypass the page cache (rdfs-fuse's direct_writes, on by
# default); these are the guarantees the cached path gave by itself.

def test_write_only_open_updates_what_other_opens_read(workdir):
    """Pages another open caches after the write-only open began are dropped
    by its writes (an open drops the file's pages; a write through the cache
    would have updated them)."""
    f = workdir / "coherent"
    f.write_bytes(b"a" * 8192)
    w = os.open(f, os.O_WRONLY)
    try:
        r = os.open(f, os.O_RDONLY)
        try:
            assert os.pread(r, 8192, 0) == b"a" * 8192  # its pages are cached now
            assert os.pwrite(w, b"b" * 100, 4000) == 100
            want = b"a" * 4000 + b"b" * 100 + b"a" * 4092
            assert os.pread(r, 8192, 0) == want
            os.close(w)
            w = -1
            assert os.pread(r, 8192, 0) == want
        finally:
            os.close(r)
    finally:
        if w >= 0:
            os.close(w)


def test_write_only_open_lands_after_a_dirty_shared_mapping(workdir):
    """A page dirtied through a mapping and then written through a write-only
    open holds both, the write's bytes on top (one page, as on a local disk)."""
    f = workdir / "mapped"
    f.write_bytes(b"a" * 8192)
    w = os.open(f, os.O_WRONLY)
    fd = os.open(f, os.O_RDWR)
    try:
        m = mmap.mmap(fd, 8192)
        m[0:100] = b"m" * 100                           # dirty, not written back yet
        assert os.pwrite(w, b"w" * 100, 50) == 100
        assert m[0:160] == b"m" * 50 + b"w" * 100 + b"a" * 10
        m.flush()
        m.close()
    finally:
        os.close(fd)
        os.close(w)
    assert f.read_bytes() == b"m" * 50 + b"w" * 100 + b"a" * (8192 - 150)


def test_set_id_bits_set_while_open_are_cleared_by_its_write(workdir):
    """The owner makes the file set-ID after opening it write-only, then writes:
    the write clears the bits (the kernel leaves that to us for writes that
    bypass the page cache). An open that writes nothing leaves them."""
    f = workdir / "suid-later"
    f.write_bytes(b"x" * 100)
    os.chown(f, *ALICE)

    def chmod_then(write):
        os.chmod(f, 0o777)
        fd = os.open(f, os.O_WRONLY)
        try:
            os.chmod(f, 0o6777)
            if write:
                os.pwrite(fd, b"hello", 10)
        finally:
            os.close(fd)
        return stat.S_IMODE(os.stat(f).st_mode)

    assert ok(ALICE, lambda: chmod_then(False)) == 0o6777
    assert ok(ALICE, lambda: chmod_then(True)) == 0o777
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o777
    assert f.read_bytes() == b"x" * 10 + b"hello" + b"x" * 85
