# SPDX-License-Identifier: MIT
"""Semantics the FUSE glue owns: set-ID bits cleared by a non-owner's write,
and directory offsets that stay valid for seekdir/telldir."""
import ctypes
import ctypes.util
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
