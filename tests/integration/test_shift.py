# SPDX-License-Identifier: MIT
"""fallocate COLLAPSE_RANGE and INSERT_RANGE through the mount.

The kernel client does them as ext4 does (block-aligned ranges; a collapse
must end inside the file, an insert start inside it): the metaserver moves the
layout, not the data, so the bytes after the range read back moved, through
this mount (its page cache dropped) and another. Linux's FUSE module refuses
both modes before rdfs-fuse sees them (fs/fuse/file.c), so through rdfs-fuse
the test checks that the refusal is EOPNOTSUPP and changes nothing.
"""
import errno
import os

import pytest

from conftest import CLIENT, MiB, assert_bytes_equal, drop_cache, fallocate

K = 1024
COLLAPSE = 0x08         # FALLOC_FL_COLLAPSE_RANGE
INSERT = 0x20           # FALLOC_FL_INSERT_RANGE


def errno_of(fd, mode, off, length):
    try:
        fallocate(fd, mode, off, length)
    except OSError as e:
        return e.errno
    return 0


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.skipif(CLIENT != "fuse", reason="the kernel client does both modes")
def test_fuse_refuses_collapse_and_insert(workdir):
    path = workdir / "f"
    data = os.urandom(2 * MiB)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        assert errno_of(fd, COLLAPSE, 0, 64 * K) == errno.EOPNOTSUPP
        assert errno_of(fd, INSERT, 0, 64 * K) == errno.EOPNOTSUPP
    finally:
        os.close(fd)
    assert_bytes_equal(data, read_all(path), "after a refused collapse and insert")


@pytest.mark.skipif(CLIENT != "lkm", reason="Linux's FUSE refuses these modes")
def test_collapse_and_insert_move_the_bytes(workdir, other_mount):
    """A file of 3 MiB + 5000 bytes over both servers: a collapse of 1 MiB + 8 KiB
    from 512 KiB (across chunk boundaries), with bytes written just before it
    still in the page cache; then an insert of 64 KiB at 100 KiB, which reads as
    zeros; the same bytes through a second mount; what ext4 refuses, refused."""
    path = workdir / "f"
    data = bytearray(os.urandom(3 * MiB + 5000))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, bytes(data), 0)
        os.fsync(fd)
        # cached pages of the old layout, and a write not yet written back
        assert os.pread(fd, MiB, 0) == bytes(data[:MiB])
        patch = os.urandom(3000)
        os.pwrite(fd, patch, 2 * MiB + 100)
        data[2 * MiB + 100:2 * MiB + 3100] = patch

        off, length = 512 * K, MiB + 8 * K
        fallocate(fd, COLLAPSE, off, length)
        del data[off:off + length]
        assert os.fstat(fd).st_size == len(data)
        assert_bytes_equal(bytes(data), os.pread(fd, len(data) + 10, 0),
                           "collapsed, through the writer's page cache")

        off, length = 100 * K, 64 * K
        fallocate(fd, INSERT, off, length)
        data[off:off] = bytes(length)
        assert os.fstat(fd).st_size == len(data)
        assert_bytes_equal(bytes(data), os.pread(fd, len(data) + 10, 0), "inserted")

        # ext4's refusals: unaligned, a collapse to or past the end, an insert at the end
        size = len(data)
        for mode, o, n in ((COLLAPSE, 100, 4 * K), (INSERT, 4 * K, 100),
                           (COLLAPSE, size - size % (4 * K), 4 * K),
                           (INSERT, size + 4 * K - size % (4 * K), 4 * K),
                           (COLLAPSE | 0x01, 0, 4 * K)):
            assert errno_of(fd, mode, o, n) == errno.EINVAL, (mode, o, n)
        assert os.fstat(fd).st_size == size
    finally:
        os.close(fd)
    drop_cache(path)
    assert_bytes_equal(bytes(data), read_all(path), "after the page cache was dropped")
    assert_bytes_equal(bytes(data), read_all(other_mount / workdir.name / "f"),
                       "through a second mount")
